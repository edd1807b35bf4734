/** traceCriticalPath.ts: a picker value's /critical_path query and the side each segment category is drawn on. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { criticalSide, pathQuery } from "../src/views/trace/traceCriticalPath";

describe("pathQuery", () => {
  it("asks for a step, an annotation (names may hold colons) or the visible range", () => {
    assert.deepEqual(pathQuery("step:7", null), { step: "7" });
    assert.deepEqual(pathQuery("annotation:fwd:block 3", null), { annotation: "fwd:block 3" });
    assert.deepEqual(pathQuery("range", { start: 120.5, end: 980 }), { start_us: 120.5, end_us: 980 });
    assert.deepEqual(pathQuery("range", null), { start_us: 0, end_us: 0 });
  });
});

describe("criticalSide", () => {
  it("draws device work on the GPU side, host work on the host side, the rest as waiting", () => {
    for (const c of ["kernel", "memcpy", "memset"]) assert.equal(criticalSide(c), "gpu");
    for (const c of ["cpu_op", "annotation", "runtime", "launch"]) assert.equal(criticalSide(c), "host");
    for (const c of ["sync_wait", "idle", "dataloader"]) assert.equal(criticalSide(c), "wait");
  });
});
