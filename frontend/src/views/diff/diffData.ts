/**
 * The Diff page's data: its answers (./diff and ./diff/node) as docs/api/openapi.yaml types them, and the
 * targets compared. Times are µs; `delta_ratio_*` are fractions (0.05 for +5 %), null where the baseline is zero
 * or the row exists on one side only; the page shows them as percentages.
 */
import type { Answer, Query } from "../../types";

/** One trace file: the baseline is the shell's selection, the experiment is chosen on the page. */
export interface Target {
  run: string;
  worker: string;
  span: string;
}

export type DiffResponse = Answer<"diff">;
export type DiffBreakdown = DiffResponse["breakdown"];
/**
 * A joined row: `baseline_<m>`, `experiment_<m>` (null on the side that lacks it), `delta_<m>`,
 * `delta_ratio_<m>` for each metric m (operators: calls, host_total_us, host_self_us, device_total_us,
 * device_self_us; kernels: calls, total_us, mean_us).
 */
export type DiffRow = DiffResponse["operators"][number];
export type DiffStatus = DiffRow["status"];
export type DiffNode = Answer<"diff/node">;
export type DiffNodeChild = DiffNode["children"][number];
export type DiffStats = NonNullable<DiffNode["baseline"]>;

export type Side = "baseline" | "experiment" | "delta" | "delta_ratio";

/** A metric value of a joined row (null when missing or not a finite number). */
export function rowValue(row: DiffRow, side: Side, metric: string): number | null {
  const v: unknown = row[`${side}_${metric}`];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Two steps compared instead of all steps (the Overview's outlier-steps evidence): step names of each side. */
export interface StepPair {
  step: string;
  exp_step: string;
}

export function targetParams(base: Target, exp: Target, steps?: StepPair | null): Query<"diff"> {
  return { run: base.run, worker: base.worker, span: base.span, exp_run: exp.run, exp_worker: exp.worker, exp_span: exp.span, ...(steps ?? {}) };
}

export function sameTarget(a: Target | null | undefined, b: Target | null | undefined): boolean {
  return !!a && !!b && a.run === b.run && a.worker === b.worker && a.span === b.span;
}

export function describeTarget(t: Target): string {
  return `${t.run} · ${t.worker} · span ${t.span}`;
}

/** Colours of the two sides in every Diff chart. */
export const BASELINE_COLOR = "#4e79a7";
export const EXPERIMENT_COLOR = "#f28e2b";
export const DELTA_COLOR = "#b07aa1";
