/**
 * The GPU Kernel page's pure part: its answer types (generated from docs/api/openapi.yaml), the totals its pies
 * show and the key a table row keeps across regroupings. DOM-free, so frontend/test/kernelData.test.ts checks
 * the numbers.
 */
import { isNum } from "../../format";
import type { Answer } from "../../types";

export type KernelsResponse = Answer<"kernels">;
export type KernelRow = KernelsResponse["rows"][number];
export type KernelGrouping = KernelsResponse["group_by"];

/** What the pies card shows of the by-name answer. */
export interface KernelSummary {
  rows: KernelRow[];
  /** the kernels' total time summed (µs; a row without a finite total counts 0) */
  kernelUs: number;
  /** the share of kernel time on tensor cores, null when the server could not tell */
  ratio: number | null;
}

export function kernelSummary(resp: KernelsResponse): KernelSummary {
  const rows = Array.isArray(resp.rows) ? resp.rows : [];
  const kernelUs = rows.reduce((s, r) => s + (isNum(r.total_us) ? r.total_us : 0), 0);
  return { rows, kernelUs, ratio: isNum(resp.tensor_core_ratio) ? resp.tensor_core_ratio : null };
}

/** Kernel time on and off tensor cores (µs) for the tensor-core pie; "off" never goes below 0. */
export function tensorCoreSplit(ratio: number, kernelUs: number): { on: number; off: number } {
  const on = ratio * kernelUs;
  return { on, off: Math.max(0, kernelUs - on) };
}

/** A row's identity: its name and, by operator, the operator and launch configuration (NUL-separated). */
export function kernelRowKey(r: KernelRow): string {
  return [r.name, r.operator ?? "", r.grid ?? "", r.block ?? "", r.registers_per_thread ?? "", r.shared_memory ?? ""].join("\u0000");
}

export const NO_OPERATOR = "(no operator)";

/** Whether a row (by operator) has a launching operator whose call stacks can be shown. */
export function hasLaunchingOperator(r: KernelRow): boolean {
  return !!r.operator && r.operator !== NO_OPERATOR;
}
