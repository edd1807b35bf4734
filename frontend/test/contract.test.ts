/**
 * The contract between the server and the pages, at run time. Types cover names and shapes: every answer a page
 * reads is `Answer<route>`, generated from docs/api/openapi.yaml, so a field renamed there fails `tsc` where a page
 * reads it (tests/unit/test_frontend_contract.py plants one and sees `npm run typecheck` fail). What types cannot
 * see is the meaning of a position: a flow arrow is an 8-tuple and a step a 3-tuple, read by index. These tests
 * read the positions the OpenAPI file documents and check the client reads each item as the one named there.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { FLOW_FIELDS, flowEnds, parseWindow, type TraceWindowResponse, type WindowFlow } from "../src/views/trace/traceData";

const SPEC = readFileSync(new URL("../../docs/api/openapi.yaml", import.meta.url), "utf8");

/** The bracketed item names of a tuple's `description` under `key:` in the TraceWindow schema. */
function documentedItems(key: string): string[] {
  const schema = SPEC.slice(SPEC.indexOf("    TraceWindow:"));
  const at = schema.indexOf(`\n        ${key}:`);
  assert.ok(at >= 0, `TraceWindow.${key} is not in docs/api/openapi.yaml`);
  const match = /description: "[^"[]*\[([^\]]+)\]/.exec(schema.slice(at, at + 600));
  assert.ok(match?.[1], `TraceWindow.${key} documents no [item, ...] order`);
  return match[1].split(",").map((s) => s.trim().split(" ")[0] ?? "");
}

const camel = (name: string): string => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

describe("the trace window's tuples, by the positions the OpenAPI file documents", () => {
  it("a flow's eight items are read as the ones named there", () => {
    const names = documentedItems("flows");
    assert.deepEqual(names, [...FLOW_FIELDS]);
    const flow = names.map((_, i) => 10 * (i + 1)) as WindowFlow;
    const ends = flowEnds(flow) as unknown as Record<string, number>;
    names.forEach((name, i) => {
      assert.equal(ends[camel(name)], flow[i], `${name} is item ${i}`);
    });
  });

  it("a step's name, start and duration are read as the ones named there", () => {
    assert.deepEqual(documentedItems("steps"), ["name", "t", "duration"]);
    const answer: TraceWindowResponse = {
      t0: 1000, t1: 2000, px_us: 1, bounds: [0, 5000], names: [], tracks: [], flows: [], flows_truncated: false,
      steps: [["7", 250, 40]], counters: [],
    };
    assert.deepEqual(parseWindow(answer, "").steps, [{ name: "7", start: 1250, dur: 40 }]);
  });
});
