/**
 * The JSON of ./diff and ./diff/node (see docs/api/openapi.yaml). Times are µs; `delta_ratio_*` are
 * fractions (0.05 for +5 %), null where the baseline is zero or the row exists on one side only; the page
 * shows them as percentages.
 */

/** One trace file: the baseline is the shell's selection, the experiment is chosen on the page. */
export interface Target {
  run: string;
  worker: string;
  span: string;
}

export interface DiffBreakdown {
  categories: string[];
  baseline: Record<string, number>;
  experiment: Record<string, number>;
  delta: Record<string, number>;
  step_baseline_us: number;
  step_experiment_us: number;
  step_delta_us: number;
  step_delta_ratio: number | null;
}

export type DiffStatus = "both" | "new" | "gone";

/**
 * A joined row: `baseline_<m>`, `experiment_<m>` (null on the side that lacks it), `delta_<m>`,
 * `delta_ratio_<m>` for each metric m (operators: calls, host_total_us, host_self_us, device_total_us,
 * device_self_us; kernels: calls, total_us, mean_us).
 */
export interface DiffRow {
  name: string;
  status: DiffStatus;
  [field: string]: string | number | null;
}

export interface DiffResponse {
  breakdown: DiffBreakdown;
  /** The compared steps' names; null on both sides when all steps are compared. */
  steps?: { baseline: string | null; experiment: string | null };
  /** Every step of each side: what a step comparison can pick. */
  step_names?: { baseline: string[]; experiment: string[] };
  operators: DiffRow[];
  kernels: DiffRow[];
}

export interface DiffStats {
  count: number;
  host_us: number;
  device_us: number;
}

export interface DiffNodeChild {
  path: string;
  name: string;
  baseline: DiffStats | null;
  experiment: DiffStats | null;
  matched: boolean;
  expandable: boolean;
}

export interface DiffNode {
  path: string;
  name: string;
  baseline: DiffStats | null;
  experiment: DiffStats | null;
  children: DiffNodeChild[];
}

export type Side = "baseline" | "experiment" | "delta" | "delta_ratio";

/** A metric value of a joined row (null when missing or not a finite number). */
export function rowValue(row: DiffRow, side: Side, metric: string): number | null {
  const v = row[`${side}_${metric}`];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Two steps compared instead of all steps (the Overview's outlier-steps evidence): step names of each side. */
export interface StepPair {
  step: string;
  exp_step: string;
}

export function targetParams(base: Target, exp: Target, steps?: StepPair | null): Record<string, string> {
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
