/** views/gpu/rooflineData.ts: which roofs are drawn, their bends, the points' sizes and groups. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  drawable,
  intensityRange,
  markerSizes,
  memoryLine,
  pointsByRoof,
  roofLine,
  roofsToDraw,
  type RooflinePoint,
  type RooflineResponse,
} from "../src/views/gpu/rooflineData";

function point(over: Partial<RooflinePoint>): RooflinePoint {
  return {
    name: "k", calls: 1, time_us: 100, flops: 1e9, bytes: 1e7, intensity: 100, achieved_flops_per_s: 1e13,
    achieved_bytes_per_s: 1e11, roof: "bf16", peak_flops_per_s: 1e15, attainable_flops_per_s: 1e15, bound: "compute",
    fraction_of_roof: 0.01, wasted_us: 99, above_roof: false, tensor_cores: true, source: "shapes", how: "", ...over,
  };
}

const H100 = {
  bandwidth_bytes_per_s: 3.35e12,
  compute: [
    { roof: "fp32" as const, label: "FP32 (CUDA cores)", peak_flops_per_s: 67e12, ridge_intensity: 67e12 / 3.35e12 },
    { roof: "tf32" as const, label: "TF32 tensor cores", peak_flops_per_s: 494.5e12, ridge_intensity: 494.5e12 / 3.35e12 },
    { roof: "bf16" as const, label: "BF16 tensor cores", peak_flops_per_s: 989.5e12, ridge_intensity: 989.5e12 / 3.35e12 },
  ],
};

function answer(points: RooflinePoint[]): RooflineResponse {
  return {
    group_by: "kernel", device: { name: "NVIDIA H100 80GB HBM3", table_entry: "NVIDIA H100 SXM", key: "H100-SXM", source: "datasheet", note: null },
    roofs: H100, points, total_points: points.length,
    totals: { kernel_time_us: 1, estimated_time_us: 1, flops: 1, achieved_flops_per_s: 1, wasted_us: 0 },
    unestimated: { kernels: 0, time_us: 0, top: [] },
  };
}

describe("roofline data", () => {
  it("draws the roofs of the points' classes, and the TF32 tensor-core roof beside an FP32 point", () => {
    assert.deepEqual(roofsToDraw(answer([point({ roof: "fp32" })])).map((r) => r.roof), ["fp32", "tf32"]);
    assert.deepEqual(roofsToDraw(answer([point({ roof: "bf16" })])).map((r) => r.roof), ["bf16"]);
    // a point that cannot be drawn (no bytes: no intensity) brings no roof
    assert.deepEqual(roofsToDraw(answer([point({ roof: "fp32", intensity: null })])).map((r) => r.roof), []);
  });

  it("draws each compute roof flat from its ridge, and the memory roof up to the highest ridge", () => {
    const [fp32, , bf16] = H100.compute;
    assert.ok(fp32 && bf16);
    assert.deepEqual(roofLine(bf16, 1, 1e4), { x: [bf16.ridge_intensity, 1e4], y: [989.5e12, 989.5e12] });
    // a ridge left of the range: flat over all of it
    assert.deepEqual(roofLine(fp32, 100, 1e4).x, [100, 1e4]);
    const memory = memoryLine(H100.bandwidth_bytes_per_s, [fp32, bf16], 1, 1e4);
    assert.deepEqual(memory, { x: [1, bf16.ridge_intensity], y: [3.35e12, bf16.ridge_intensity * 3.35e12] });
    assert.equal(memoryLine(null, [fp32], 1, 10), null);
  });

  it("spans a decade beyond the points and the ridges", () => {
    const [fp32] = H100.compute;
    assert.ok(fp32);
    const [lo, hi] = intensityRange([point({ intensity: 2 }), point({ intensity: 50 })], [fp32]);
    assert.equal(lo, 0.2);
    assert.equal(hi, 500);
  });

  it("sizes markers by the square root of time (area ∝ time), the longest 44 px", () => {
    assert.deepEqual(markerSizes([point({ time_us: 400 }), point({ time_us: 100 }), point({ time_us: 0 })]), [44, 26, 8]);
  });

  it("groups drawable points by roof, keeping their index in the answer", () => {
    const copy = point({ roof: "fp32", intensity: 0 });
    const pts = [point({ roof: "bf16" }), copy, point({ roof: "fp32" }), point({ roof: null })];
    assert.equal(drawable(copy), false);
    const groups = pointsByRoof(pts);
    assert.deepEqual([...groups.keys()], ["bf16", "fp32", "none"]);
    assert.deepEqual(groups.get("fp32")?.map((i) => i.index), [2]);
  });
});
