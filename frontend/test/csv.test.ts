/** views/common/csv.ts: RFC 4180 text, and no cell a spreadsheet would run as a formula (CSV injection). */
import "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { toCsv } from "../src/views/common/csv";

function cells(text: string): string[] {
  return (text.split("\r\n")[1] ?? "").split(",");
}

describe("toCsv", () => {
  it("prefixes text starting with = + - @ tab or CR with ' (OWASP), quoted where needed", () => {
    const names = ["=HYPERLINK(\"http://x\")", "+1+2", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "aten::mm", "a=b"];
    const text = toCsv(["name"], names.map((n) => [n]));
    const lines = text.split("\r\n");
    assert.deepEqual(lines.slice(1, 6), ["\"'=HYPERLINK(\"\"http://x\"\")\"", "'+1+2", "'-2+3", "'@SUM(A1)", "'\tTAB"]);
    assert.ok(text.includes("\"'\rCR\""));
    assert.ok(text.endsWith("aten::mm\r\na=b\r\n"));
  });

  it("leaves numbers, negative ones too, as numbers", () => {
    assert.deepEqual(cells(toCsv(["a", "b", "c", "d"], [[-5, 1.5, null, Number.NaN]])), ["-5", "1.5", "", ""]);
    assert.deepEqual(cells(toCsv(["a", "b"], [[true, "-"]])), ["true", "'-"]);
  });
});
