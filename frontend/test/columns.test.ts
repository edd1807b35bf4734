/** views/common/columns.ts: the duration and byte columns every table page shares. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { bytesColumn, durationColumn } from "../src/views/common/columns";

interface Row { us: number | null; bytes: number }

describe("durationColumn", () => {
  it("people's units in the cell, exact µs in the tooltip, µs in the CSV", () => {
    const col = durationColumn<Row>("total", "Total", "Sum of the runs.", (r) => r.us);
    const row = { us: 1504.506, bytes: 0 };
    assert.deepEqual([col.key, col.label, col.help, col.numeric, col.csvHeader], ["total", "Total", "Sum of the runs.", true, "Total (us)"]);
    assert.equal(col.value(row), 1504.506);
    assert.equal(col.text?.(row), "1.50 ms");
    assert.equal(col.exact?.(row), "1,504.506 µs");
    assert.equal(col.text({ us: null, bytes: 0 }), "—");
  });
});

describe("bytesColumn", () => {
  it("binary units, exact bytes in the tooltip, a minus sign where signed", () => {
    const col = bytesColumn<Row>("size", "Size increase", "Allocated − released.", (r) => r.bytes, true);
    const row = { us: null, bytes: -1.5 * 1024 ** 2 };
    assert.equal(col.text?.(row), "−1.50 MiB");
    assert.equal(col.exact?.(row), "-1,572,864 bytes");
    assert.equal(col.csvHeader, "Size increase (bytes)");
    assert.equal(bytesColumn<Row>("size", "Size", "", (r) => r.bytes).text?.({ us: null, bytes: 2048 }), "2.00 KiB");
  });
});
