/**
 * The Capture dialog's DOM-free logic: which run to offer first, how a job and a request's progress read, the
 * request's body, and when the new traces can be opened. The answers' types come from docs/api/openapi.yaml.
 */
import { formatFixed, formatInt, isNum } from "../format";
import type { Answer, RunsResponse, Schema } from "../types";

export type CaptureInfo = Answer<"capture">;
export type CaptureTarget = CaptureInfo["targets"][number];
export type CaptureJob = NonNullable<CaptureInfo["job"]>;
export type CaptureProgress = Schema<"CaptureProgress">;
export type CaptureRequest = Schema<"CaptureRequest">;
export type RankRow = CaptureProgress["ranks"][number];

export const ACTIVITIES = ["cpu", "cuda", "xpu", "mtia", "hpu"] as const;
export const MAX_STEPS = 50;
/** How long the job has to pick a request up (the server's default; the job polls every 1-5 s). */
export const DEADLINE_S = 60;
/** Rank rows the dialog lists; the summary line counts them all. */
export const SHOWN_RANKS = 64;

/** "job · 4 ranks listening" or "resnet · no job listening": what the run picker shows. */
export function targetLabel(t: CaptureTarget): string {
  if (t.listening <= 0) return `${t.run} · no job listening`;
  return `${t.run} · ${t.listening} rank${t.listening === 1 ? "" : "s"} listening`;
}

/** The run offered first: the one on screen if a job listens there, else the first where one listens, else the
 * one on screen, else the first. */
export function pickTarget(targets: readonly CaptureTarget[], current: string | undefined): string | undefined {
  const here = targets.find((t) => t.run === current);
  if (here && here.listening > 0) return here.run;
  return (targets.find((t) => t.listening > 0) ?? here ?? targets[0])?.run;
}

/** One line on the job in the chosen folder. */
export function jobLine(job: CaptureJob | null): string {
  if (!job || job.listening <= 0) {
    return job?.ended
      ? "The job that listened here has ended."
      : "No job is listening in this run's folder: a request waits for one until its deadline.";
  }
  const ranks = isNum(job.world_size) && job.world_size > job.listening
    ? `${job.listening} of ${formatInt(job.world_size)} ranks`
    : `${job.listening} rank${job.listening === 1 ? "" : "s"}`;
  const step = isNum(job.step) ? `, step ${formatInt(job.step)}` : "";
  const rate = isNum(job.steps_per_s) && job.steps_per_s > 0 ? ` (${formatFixed(job.steps_per_s, 1)} steps/s)` : "";
  const heard = isNum(job.heard_s) ? `, heard ${formatInt(job.heard_s)} s ago` : "";
  return `Job listening: ${ranks}${step}${rate}${heard}.`;
}

export interface CaptureForm {
  steps: number;
  activities: readonly string[];
  recordShapes: boolean;
  profileMemory: boolean;
  withStack: boolean;
}

/** The POST body, or the sentence saying what is wrong with the form. */
export function requestBody(form: CaptureForm): CaptureRequest | string {
  if (!Number.isInteger(form.steps) || form.steps < 1 || form.steps > MAX_STEPS) {
    return `Steps must be a whole number from 1 to ${MAX_STEPS}.`;
  }
  const activities = ACTIVITIES.filter((a) => form.activities.includes(a));
  if (activities.length === 0) return "Choose at least one activity to trace.";
  return {
    steps: form.steps,
    activities,
    record_shapes: form.recordShapes,
    profile_memory: form.profileMemory,
    with_stack: form.withStack,
    deadline_s: DEADLINE_S,
  };
}

const STATE_LABELS: Record<RankRow["state"], string> = {
  pending: "not answered yet",
  waiting: "waiting",
  capturing: "capturing",
  written: "written",
  failed: "failed",
  missing: "never answered",
  lost: "stopped answering",
};

/** One row per rank as the dialog lists it: rank, state, step, and the file or the reason. */
export function rankRows(progress: CaptureProgress): { rank: string; state: string; step: string; detail: string }[] {
  return progress.ranks.slice(0, SHOWN_RANKS).map((r) => ({
    rank: r.worker,
    state: STATE_LABELS[r.state],
    step: isNum(r.step) ? formatInt(r.step) : "",
    detail: [r.file, r.reason].filter((x): x is string => typeof x === "string" && x !== "").join(" · "),
  }));
}

/** How many ranks are not listed (beyond SHOWN_RANKS, or left out by the server). */
export function ranksNotShown(progress: CaptureProgress): number {
  return Math.max(0, progress.ranks.length - SHOWN_RANKS) + progress.ranks_left_out;
}

export interface OpenTarget {
  run: string;
  worker: string;
  span: string;
}

/** What to open once every rank wrote: the run, the first rank's worker and the span the files form. */
export function openTarget(progress: CaptureProgress): OpenTarget | null {
  const first = progress.ranks.find((r) => r.state === "written");
  if (progress.state !== "written" || !progress.run || !progress.span || !first) return null;
  return { run: progress.run, worker: first.worker, span: progress.span };
}

/** Whether the catalog lists the new span for every worker that wrote (the rescan found the files). */
export function listed(runs: RunsResponse, target: OpenTarget, progress: CaptureProgress): boolean {
  const run = runs.runs.find((r) => r.name === target.run);
  if (!run) return false;
  const writers = progress.ranks.filter((r) => r.state === "written").map((r) => r.worker);
  return writers.every((w) => run.workers.some((x) => x.name === w && x.spans.some((s) => s.key === target.span)));
}
