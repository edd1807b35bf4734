/** views/kernelData.ts: the GPU Kernel page's totals, tensor-core split and row identity. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hasLaunchingOperator, kernelRowKey, type KernelRow, type KernelsResponse, kernelSummary, tensorCoreSplit } from "../src/views/kernel/kernelData";

function row(name: string, total: number, extra: Partial<KernelRow> = {}): KernelRow {
  return { name, calls: 2, total_us: total, mean_us: total / 2, min_us: 1, max_us: total - 1, tensor_cores: false,
    blocks_per_sm: null, achieved_occupancy: null, streams: [7], ...extra };
}

describe("kernelSummary", () => {
  it("sums the finite totals and keeps a finite tensor-core ratio", () => {
    const resp: KernelsResponse = { group_by: "name", total_us: 0, tensor_core_ratio: 0.25,
      rows: [row("gemm", 300), row("relu", 100.5), row("odd", Number.NaN)] };
    const s = kernelSummary(resp);
    assert.equal(s.kernelUs, 400.5);
    assert.equal(s.ratio, 0.25);
    assert.equal(s.rows.length, 3);
  });

  it("answers no ratio for null or a non-finite one, and no rows for a malformed answer", () => {
    assert.equal(kernelSummary({ group_by: "name", total_us: 0, tensor_core_ratio: null, rows: [] }).ratio, null);
    const odd = { group_by: "name", total_us: 0, tensor_core_ratio: Number.POSITIVE_INFINITY, rows: null } as unknown as KernelsResponse;
    assert.deepEqual(kernelSummary(odd), { rows: [], kernelUs: 0, ratio: null });
  });
});

describe("tensorCoreSplit", () => {
  it("splits the kernel time by the ratio, never below zero", () => {
    assert.deepEqual(tensorCoreSplit(0.25, 400), { on: 100, off: 300 });
    assert.deepEqual(tensorCoreSplit(1.5, 400), { on: 600, off: 0 });
  });
});

describe("kernel rows", () => {
  it("a row's key tells launch configurations apart", () => {
    const a = row("gemm", 10, { operator: "aten::mm", grid: "[1, 2, 1]", block: "[128, 1, 1]", registers_per_thread: 32, shared_memory: 0 });
    const b = { ...a, registers_per_thread: 64 };
    assert.equal(kernelRowKey(a), "gemm\u0000aten::mm\u0000[1, 2, 1]\u0000[128, 1, 1]\u000032\u00000");
    assert.notEqual(kernelRowKey(a), kernelRowKey(b));
    assert.equal(kernelRowKey(row("relu", 1)), "relu\u0000\u0000\u0000\u0000\u0000");
  });

  it("only a recorded operator has stacks to show", () => {
    assert.equal(hasLaunchingOperator(row("k", 1, { operator: "aten::mm" })), true);
    assert.equal(hasLaunchingOperator(row("k", 1, { operator: "(no operator)" })), false);
    assert.equal(hasLaunchingOperator(row("k", 1)), false);
  });
});
