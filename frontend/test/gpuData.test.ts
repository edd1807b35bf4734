/** views/gpu/gpuData.ts: the GPU page's headings agree with the tables beneath them. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { outlierHeading } from "../src/views/gpu/gpuData";

describe("outlierHeading", () => {
  it("says how many outliers are listed when the table holds fewer than the count", () => {
    assert.equal(outlierHeading(1113, 500), "Launch-delay outliers (p95 and above): 1,113, the 500 longest listed");
    assert.equal(outlierHeading(51, 51), "Launch-delay outliers (p95 and above): 51");
    assert.equal(outlierHeading(0, 0), "Launch-delay outliers (p95 and above): 0");
  });
});
