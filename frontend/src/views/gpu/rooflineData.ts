/**
 * The roofline card's pure part (GET ./roofline): its answer types (generated from docs/api/openapi.yaml), the
 * log-log figure — the memory roof (slanted) and a flat roof per compute class the points use (and, beside a
 * CUDA-core FP32 point, the TF32 tensor-core roof it could reach) from its ridge on, and the points as markers
 * whose area follows their time — and what the table shows. DOM-free: frontend/test/rooflineData.test.ts.
 */
import { isNum } from "../../format";
import type { Answer } from "../../types";

export type RooflineResponse = Answer<"roofline">;
export type RooflinePoint = RooflineResponse["points"][number];
export type RooflineGrouping = RooflineResponse["group_by"];
export type ComputeRoof = RooflineResponse["roofs"]["compute"][number];

/** Colours per roof class, the same for its points and its roof line. */
export const ROOF_COLORS: Record<string, string> = {
  fp64: "#8c6d31", fp64_tensor: "#b07aa1", fp32: "#4e79a7", tf32: "#76b7b2", bf16: "#e15759", fp16: "#f28e2b",
  fp8: "#59a14f",
};

/** A point can be drawn on log axes: finite positive intensity and achieved FLOP/s. */
export function drawable(p: RooflinePoint): boolean {
  return isNum(p.intensity) && p.intensity > 0 && isNum(p.achieved_flops_per_s) && p.achieved_flops_per_s > 0;
}

/**
 * The roof classes to draw: those of the drawable points, and beside a CUDA-core FP32 (FP64) point its
 * tensor-core counterpart TF32 (FP64 tensor), so an FP32 kernel is seen against the roof it could reach.
 */
export function roofsToDraw(resp: RooflineResponse): ComputeRoof[] {
  const used = new Set(resp.points.filter(drawable).map((p) => p.roof).filter((r): r is NonNullable<typeof r> => r !== null));
  if (used.has("fp32")) used.add("tf32");
  if (used.has("fp64")) used.add("fp64_tensor");
  return resp.roofs.compute.filter((r) => used.has(r.roof));
}

/** The x range of the chart: a decade beyond the points on each side, and the ridges of the roofs drawn. */
export function intensityRange(points: RooflinePoint[], roofs: ComputeRoof[]): [number, number] {
  const xs = points.filter(drawable).map((p) => p.intensity as number);
  for (const r of roofs) if (isNum(r.ridge_intensity)) xs.push(r.ridge_intensity);
  if (!xs.length) return [0.01, 1e4];
  return [Math.min(...xs) / 10, Math.max(...xs) * 10];
}

/** A compute roof: flat at its peak from its ridge (where the memory roof reaches it) to `hi`; from `lo` without a
 * bandwidth. */
export function roofLine(roof: ComputeRoof, lo: number, hi: number): { x: number[]; y: number[] } {
  const start = isNum(roof.ridge_intensity) && roof.ridge_intensity > lo ? Math.min(roof.ridge_intensity, hi) : lo;
  return { x: [start, hi], y: [roof.peak_flops_per_s, roof.peak_flops_per_s] };
}

/** The memory roof: y = intensity × bandwidth from `lo` up to the highest of the drawn roofs' ridges. */
export function memoryLine(bandwidth: number | null, roofs: ComputeRoof[], lo: number, hi: number): { x: number[]; y: number[] } | null {
  if (!isNum(bandwidth) || bandwidth <= 0) return null;
  const ridges = roofs.map((r) => r.ridge_intensity).filter(isNum);
  const end = Math.min(hi, ridges.length ? Math.max(...ridges) : hi);
  return { x: [lo, end], y: [lo * bandwidth, end * bandwidth] };
}

/** Marker diameter (px) of each point: area proportional to its time, 8 px at least, 44 px for the longest. */
export function markerSizes(points: RooflinePoint[]): number[] {
  const longest = Math.max(0, ...points.map((p) => p.time_us));
  return points.map((p) => (longest > 0 ? 8 + 36 * Math.sqrt(Math.max(p.time_us, 0) / longest) : 8));
}

/** The points grouped by roof class (one trace each), in the answer's order; `index` is the point's position. */
export function pointsByRoof(points: RooflinePoint[]): Map<string, { point: RooflinePoint; index: number }[]> {
  const out = new Map<string, { point: RooflinePoint; index: number }[]>();
  points.forEach((point, index) => {
    if (!drawable(point)) return;
    const key = point.roof ?? "none";
    const list = out.get(key) ?? [];
    list.push({ point, index });
    out.set(key, list);
  });
  return out;
}

/** "memory-bound at 18.9 % of its roof" (the table's and the hover's wording); "" without a roof. */
export function boundText(p: RooflinePoint): string {
  if (p.bound === null || !isNum(p.fraction_of_roof)) return "";
  return `${p.bound}-bound at ${(100 * p.fraction_of_roof).toFixed(1)} % of its roof${p.above_roof ? " (above it: the estimate or the peak is off)" : ""}`;
}
