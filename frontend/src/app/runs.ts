/**
 * What the shell knows of the logdir, as pure functions: a `./runs` answer made well-formed (a half-written answer
 * never breaks the page; a run's allocator snapshots become workers of one span, `snapshot`), which run, worker
 * and span a picker level opens on, and how a span is named on the page.
 */
import type { RunInfo, RunsResponse, SpanInfo, WorkerInfo } from "../types";

/** Tab id of the built-in summary tab (also its value in the URL). */
export const INFO_TAB = "info";
export const INFO_LABEL = "Trace info";

export const POLL_ACTIVE_MS = 2_000;
export const POLL_IDLE_MS = 10_000;
export const POLL_UNREACHABLE_MS = 5_000;

export interface Selection {
  run: RunInfo;
  worker: WorkerInfo;
  span: SpanInfo;
  view: string;
}

export type Connection =
  | { state: "connecting" }
  | { state: "ok" }
  | { state: "unreachable"; message: string }
  | { state: "error"; message: string };

export interface ViewsEntry {
  /** signature of the run's span states when fetched; refetch when it changes */
  signature: string;
  views: string[] | null;
  inFlight: boolean;
}

const SPAN_STATES: readonly string[] = ["queued", "loading", "ready", "failed"];
/** The one span of an allocator snapshot in the pickers and the URL. */
export const SNAPSHOT_SPAN = "snapshot";
export const SNAPSHOT_VIEW = "Memory";

/** Whether a worker of the run is one of its allocator snapshots (see normalizeRuns). */
export function isSnapshot(run: RunInfo, worker: WorkerInfo): boolean {
  return worker.spans.length === 1 && worker.spans[0]?.span === SNAPSHOT_SPAN && run.snapshots.some((s) => s.name === worker.name);
}

type SnapshotInfo = RunInfo["snapshots"][number];

/** A run's snapshots, well-formed ones only. */
function normalizeSnapshots(raw: unknown): SnapshotInfo[] {
  const out: SnapshotInfo[] = [];
  for (const s of Array.isArray(raw) ? (raw as unknown[]) : []) {
    if (typeof s !== "object" || s === null) continue;
    const r = s as Record<string, unknown>;
    if (typeof r["name"] !== "string" || r["name"] === "") continue;
    const state = typeof r["state"] === "string" && SPAN_STATES.includes(r["state"]) ? r["state"] : "queued";
    out.push({
      name: r["name"],
      file: typeof r["file"] === "string" ? r["file"] : r["name"],
      size_bytes: typeof r["size_bytes"] === "number" ? r["size_bytes"] : 0,
      mtime: typeof r["mtime"] === "number" && Number.isFinite(r["mtime"]) ? r["mtime"] : 0,
      state: state as SnapshotInfo["state"],
      error: typeof r["error"] === "string" ? r["error"] : null,
    });
  }
  return out;
}

/** A snapshot as the pickers see it: a worker of one span, `snapshot`. */
function snapshotWorker(s: SnapshotInfo): WorkerInfo {
  const span: SpanInfo = {
    span: SNAPSHOT_SPAN, key: SNAPSHOT_SPAN, mtime: s.mtime, state: s.state, progress: s.state === "ready" ? 1 : 0,
    error: s.error, file: s.file, size_bytes: s.size_bytes, updating: false,
  };
  return { name: s.name, spans: [span] };
}

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? (v as unknown[]) : []);
export const rec = (v: unknown): Record<string, unknown> | null =>
  typeof v === "object" && v !== null ? (v as Record<string, unknown>) : null;

/** One span of an answer, well-formed, or null. */
export function normalizeSpan(raw: unknown): SpanInfo | null {
  const sp = rec(raw);
  if (!sp || typeof sp["span"] !== "string") return null;
  const state = typeof sp["state"] === "string" && SPAN_STATES.includes(sp["state"]) ? sp["state"] : "queued";
  const progress = typeof sp["progress"] === "number" && Number.isFinite(sp["progress"]) ? sp["progress"] : 0;
  return {
    span: sp["span"],
    key: typeof sp["key"] === "string" && sp["key"] !== "" ? sp["key"] : sp["span"],
    mtime: typeof sp["mtime"] === "number" && Number.isFinite(sp["mtime"]) ? sp["mtime"] : 0,
    state: state as SpanInfo["state"],
    progress: Math.min(1, Math.max(0, progress)),
    error: typeof sp["error"] === "string" ? sp["error"] : null,
    file: typeof sp["file"] === "string" ? sp["file"] : "",
    size_bytes: typeof sp["size_bytes"] === "number" ? sp["size_bytes"] : 0,
    updating: sp["updating"] === true,
  };
}

/** Keep only well-formed entries, so a half-written server answer cannot break the page. */
export function normalizeRuns(raw: unknown): RunsResponse {
  const obj = (typeof raw === "object" && raw !== null ? raw : {}) as Partial<Record<keyof RunsResponse, unknown>>;
  const runs: RunInfo[] = [];
  for (const r of arr(obj.runs).map(rec)) {
    if (!r || typeof r["name"] !== "string") continue;
    const workers: WorkerInfo[] = [];
    for (const w of arr(r["workers"]).map(rec)) {
      if (!w || typeof w["name"] !== "string") continue;
      const spans = arr(w["spans"]).map(normalizeSpan).filter((sp): sp is SpanInfo => sp !== null);
      if (spans.length) workers.push({ name: w["name"], spans });
    }
    const snapshots = normalizeSnapshots(r["snapshots"]).filter((s) => !workers.some((w) => w.name === s.name));
    workers.push(...snapshots.map(snapshotWorker));
    if (workers.length) runs.push({ name: r["name"], workers, snapshots });
  }
  return {
    runs,
    logdir: typeof obj.logdir === "string" ? obj.logdir : "",
    scanning: obj.scanning === true,
    errors: arr(obj.errors).filter((e): e is string => typeof e === "string"),
  };
}

/** 2: ready, 1: queued/loading, 0: failed. */
export function spanScore(s: SpanInfo): number {
  return s.state === "ready" ? 2 : s.state === "failed" ? 0 : 1;
}
export const workerScore = (w: WorkerInfo): number => Math.max(0, ...w.spans.map(spanScore));
export const runScore = (r: RunInfo): number => Math.max(0, ...r.workers.map(workerScore));
/** The newest file of a run: the run opened first is the one profiled last (as the old plugin did). */
export const runMtime = (r: RunInfo): number => Math.max(0, ...r.workers.flatMap((w) => w.spans.map((s) => s.mtime)));
/** The view a run opens on when no link names one: the Overview, as the old plugin did. */
export const DEFAULT_VIEW = "Overview";

/**
 * Choose one item of a picker level:
 * 1. the wished one (from the link or the user; `names` of an item: its name and other keys), whatever its state;
 * 2. else the one shown before, unless it failed: defaults do not jump around while files load;
 * 3. else the first of the best score (ties: the newest by `recency`, else the first).
 */
export function pick<T>(
  items: readonly T[],
  names: (t: T) => readonly string[],
  wanted: string | undefined,
  previous: string | undefined,
  score: (t: T) => number,
  recency: (t: T) => number = () => 0,
): T | undefined {
  const byName = (n: string | undefined): T | undefined =>
    n === undefined ? undefined : (items.find((i) => names(i)[0] === n) ?? items.find((i) => names(i).includes(n)));
  const wish = byName(wanted);
  if (wish) return wish;
  const prev = byName(previous);
  if (prev && score(prev) > 0) return prev;
  let best: T | undefined;
  for (const item of items) {
    if (best === undefined || score(item) > score(best) || (score(item) === score(best) && recency(item) > recency(best))) best = item;
  }
  return best;
}

export function runSignature(run: RunInfo): string {
  return run.workers.map((w) => `${w.name}:${w.spans.map((s) => `${s.span}=${s.state}`).join(",")}`).join(";");
}

export function where(run: string, worker: string, span: string): string {
  return span === SNAPSHOT_SPAN ? `${run} · snapshot ${worker}` : `${run} · ${worker} · span ${span}`;
}
