/**
 * The Memory view's snapshot mode, DOM-free (unit-tested in test/snapshotData.test.ts): the answers of the
 * ./snapshot/* routes (docs/api/openapi.yaml), a frame's colour, where a band lies in a window, what lies under
 * the pointer, and the sentences the cards say.
 *
 * A window (./snapshot/timeline) is `at.length` columns; band `b` spans columns `first_column` to `end_column` - 1
 * and its bottom is given by `steps` ([column, offset, …], the offset from that column on). Bands stack in
 * allocation order; the bytes above the last band of a column (`other_bytes`) are the smaller allocations.
 */
import { formatBytes, formatMs, formatPercent, isNum } from "../../format";
import type { Answer } from "../../types";
import { OTHER_COLOR, PALETTE } from "../common/charts";

export type SnapshotSummary = Answer<"snapshot/summary">;
export type SnapshotWindow = Answer<"snapshot/timeline">;
export type SnapshotBand = SnapshotWindow["bands"][number];
export type SnapshotFrameLabel = SnapshotWindow["frames"][number];
export type SnapshotLive = Answer<"snapshot/live">;
export type SnapshotAllocationDetails = Answer<"snapshot/allocation">;
export type SnapshotAllocation = SnapshotLive["allocations"][number];
export type SnapshotSegments = Answer<"snapshot/segments">;
export type SnapshotOom = NonNullable<SnapshotSummary["oom"]>;
export type SnapshotFinding = SnapshotSummary["findings"][number];
export type SnapshotStackFrame = SnapshotAllocationDetails["stack"][number];

export const NO_STACK = "(no stack recorded)";

/** A frame's colour: the same frame keeps its colour in every window and card (a hash into the palette). */
export function frameColor(label: string): string {
  if (label === NO_STACK || label === "") return OTHER_COLOR;
  let hash = 2166136261;
  for (let i = 0; i < label.length; i++) {
    hash ^= label.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  return PALETTE[(hash >>> 0) % PALETTE.length] ?? OTHER_COLOR;
}

/** The runs of a band: [first column, end column, bottom in bytes], the offset constant in each. */
export function bandRuns(b: SnapshotBand): [number, number, number][] {
  const out: [number, number, number][] = [];
  const s = b.steps;
  for (let k = 0; k + 1 < s.length; k += 2) {
    const c0 = s[k] ?? 0;
    const c1 = k + 2 < s.length ? (s[k + 2] ?? b.end_column) : b.end_column;
    if (c1 > c0) out.push([c0, c1, s[k + 1] ?? 0]);
  }
  return out;
}

/** The bottom of band `b` at column `c` (bytes), null where it is not live. */
export function bandOffset(b: SnapshotBand, c: number): number | null {
  if (c < b.first_column || c >= b.end_column) return null;
  const s = b.steps;
  let lo = 0;
  let hi = s.length / 2 - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((s[2 * mid] ?? 0) <= c) lo = mid;
    else hi = mid - 1;
  }
  return s[2 * lo + 1] ?? null;
}

/** The bytes the drawn bands take at column `c`, and so where the smaller allocations start. */
export function drawnTop(win: SnapshotWindow, c: number): number {
  return (win.live_bytes[c] ?? 0) - (win.other_bytes[c] ?? 0);
}

/** What lies at `bytes` (from the bottom) in column `c`: a band, the smaller allocations, or nothing. */
export function bandAt(win: SnapshotWindow, c: number, bytes: number): SnapshotBand | "other" | null {
  if (c < 0 || c >= win.at.length || bytes < 0) return null;
  for (const b of win.bands) {
    const off = bandOffset(b, c);
    if (off !== null && bytes >= off && bytes < off + b.size) return b;
  }
  const top = drawnTop(win, c);
  return bytes >= top && bytes < (win.live_bytes[c] ?? 0) ? "other" : null;
}

/** The column holding position `p` (columns start at `first`), -1 outside the window. */
export function columnOfPosition(win: SnapshotWindow, p: number): number {
  if (p < win.start || p > win.end || win.first.length === 0) return -1;
  let lo = 0;
  let hi = win.first.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((win.first[mid] ?? 0) <= p) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The positions a range of columns covers, as a window to ask for (at least `minimum` entries wide). */
export function windowOfColumns(win: SnapshotWindow, c0: number, c1: number, minimum = 8): { start: number; end: number } {
  const a = Math.max(0, Math.min(c0, c1));
  const b = Math.min(win.first.length - 1, Math.max(c0, c1));
  let start = win.first[a] ?? win.start;
  let end = b + 1 < win.first.length ? (win.first[b + 1] ?? win.end + 1) - 1 : win.end;
  if (end - start + 1 < minimum) {
    const mid = (start + end) / 2;
    start = Math.max(0, Math.floor(mid - minimum / 2));
    end = Math.min(win.positions - 1, start + minimum - 1);
  }
  return { start, end };
}

/** Zooming by `factor` (< 1 in, > 1 out) around column `c`: the positions to ask for. */
export function zoomAround(win: SnapshotWindow, c: number, factor: number): { start: number; end: number } {
  const span = win.end - win.start + 1;
  const next = Math.max(8, Math.min(win.positions, Math.round(span * factor)));
  const center = win.first[Math.max(0, Math.min(c, win.first.length - 1))] ?? win.start;
  const frac = span > 0 ? (center - win.start) / span : 0.5;
  let start = Math.round(center - frac * next);
  start = Math.max(0, Math.min(start, win.positions - next));
  return { start, end: start + next - 1 };
}

/** "entry 657 · +1,234.56 ms": a position and, where torch recorded times, its time from the history's start. */
export function momentLabel(position: number, timeUs: number | null | undefined, startUs: number | null | undefined): string {
  if (position < 0) return "before the history";
  const entry = `entry ${position.toLocaleString("en-US")}`;
  return isNum(timeUs) && isNum(startUs) ? `${entry} · +${formatMs(timeUs - startUs)}` : entry;
}

/** When an allocation lived, in words. */
export function lifetimeText(a: SnapshotAllocation, startUs: number | null | undefined): string {
  const from = a.start < 0 ? "allocated before the history" : `allocated at ${momentLabel(a.start, a.start_us, startUs)}`;
  const to = a.end === null ? "live at the end" : `freed at ${momentLabel(a.end, a.end_us, startUs)}`;
  const lived = isNum(a.lifetime_us) ? ` (lived ${formatMs(a.lifetime_us)})` : "";
  return `${from}, ${to}${lived}`;
}

/** The out-of-memory in one sentence with its verdict. */
export function oomSentence(oom: SnapshotOom): string {
  const step = oom.step !== null ? `In step ${oom.step}, ` : "";
  const room = oom.limit_bytes !== null
    ? `the process may use ${formatBytes(oom.limit_bytes)} (set_per_process_memory_fraction)`
    : `the device had ${formatBytes(oom.device_free_bytes)} free`;
  const why = oom.reason === "fragmentation"
    ? `Fragmentation: ${formatBytes(oom.free_in_reserved_bytes)} was free in the reserved segments, but no block larger than ${formatBytes(oom.largest_free_bytes)}.`
    : `Live data: ${formatBytes(oom.live_bytes)} was live, only ${formatBytes(oom.free_in_reserved_bytes)} of the ${formatBytes(oom.reserved_bytes)} reserved was free, and ${room}.`;
  return `${step}${oom.frame} asked for ${formatBytes(oom.requested_bytes)}. ${why}`;
}

/** Fragmentation at a moment: 1 - largest free block / free bytes, as a percentage ("—" when nothing is free). */
export function fragmentationText(free: number, largest: number): string {
  return free > 0 ? formatPercent(1 - largest / free) : "—";
}

/** Stack frames with the user's first (innermost first among them), then the rest in call order. */
export function userFirst<F extends { kind: string }>(frames: readonly F[]): F[] {
  return [...frames.filter((f) => f.kind === "user"), ...frames.filter((f) => f.kind !== "user")];
}

/** Ticks for a bytes axis: about `count` round values from 0 to `max`. */
export function byteTicks(max: number, count = 4): number[] {
  if (!(max > 0)) return [0];
  const raw = max / count;
  const unit = 2 ** Math.floor(Math.log2(raw));
  const step = [1, 2, 4, 8].map((m) => m * unit).find((s) => s >= raw) ?? unit * 8;
  const out: number[] = [];
  for (let v = 0; v <= max; v += step) out.push(v);
  return out;
}
