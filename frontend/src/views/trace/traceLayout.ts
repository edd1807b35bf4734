/**
 * Vertical layout of the Trace view: process headers, their threads / streams (one lane per nesting
 * depth, or only depth 0 when collapsed) and counter tracks (a GPU's under that GPU, the rest at
 * the bottom). Row positions are CSS pixels from the top of the rows area (below the ruler).
 */
import type { TrackMeta } from "./traceData";

export const RULER_H = 24;
export const STEPS_H = 18;
export const HEADER_H = RULER_H + STEPS_H;
export const PROCESS_H = 24;
export const LANE_H = 18;
export const TRACK_PAD = 5;
export const COUNTER_H = 38;
/**
 * Host threads deeper than HOST_LEVELS + 1 open HOST_LEVELS levels deep: a `with_stack=True` trace nests dozens of
 * Python frames, which would push every other track below the fold. Their last lane's label expands them.
 */
export const HOST_LEVELS = 4;

export interface ProcessRow {
  kind: "process";
  y: number;
  h: number;
  key: string;
  label: string;
  folded: boolean;
  trackIds: number[];
}

export interface TrackRow {
  kind: "track";
  y: number;
  h: number;
  track: TrackMeta;
  /** the label without its process prefix ("stream 7") */
  label: string;
  collapsed: boolean;
  /** lanes shown (depth 0 first) */
  lanes: number;
  /** what the label of the last lane offers: the hidden levels ("more"), going back to HOST_LEVELS ("fewer") */
  levels: "more" | "fewer" | null;
}

export interface CounterSeries {
  name: string;
  unit: string;
  /** the first series of a row is drawn as an area, the others as lines */
  style: "area" | "line";
}

export interface CounterRow {
  kind: "counter";
  y: number;
  h: number;
  key: string;
  label: string;
  unit: string;
  series: CounterSeries[];
}

export type Row = ProcessRow | TrackRow | CounterRow;

export interface Layout {
  rows: Row[];
  height: number;
  trackRows: Map<number, TrackRow>;
  /** tracks not drawn because their process is folded */
  hiddenTracks: Set<number>;
}

export const COUNTER_GROUP = "Counters";

/** "GPU 0 memory allocated" and "GPU 0 memory reserved" share the row "GPU 0 memory". */
function counterRowKey(name: string): string {
  return name.replace(/ (allocated|reserved)$/, "");
}

/**
 * The levels a host thread opens with: HOST_LEVELS when it is deeper than HOST_LEVELS + 1, else all (null). The
 * server applies this rule to the first window (`host_levels`, timeline/window.host_default); here it decides
 * which fully shown threads offer "show 4 levels".
 */
export function defaultLevels(track: Pick<TrackMeta, "kind" | "depths">): number | null {
  return track.kind === "cpu" && track.depths > HOST_LEVELS + 1 ? HOST_LEVELS : null;
}

/** A track's row: `shown` lanes of its depths (all when null), at `y`. */
function trackRow(t: TrackMeta, process: string, shown: number | null, y: number): TrackRow {
  const lanes = Math.max(1, Math.min(t.depths, shown ?? t.depths));
  const prefix = `${process} · `;
  const deep = defaultLevels(t) !== null;
  return {
    kind: "track",
    y,
    h: lanes * LANE_H + TRACK_PAD,
    track: t,
    label: t.label.startsWith(prefix) ? t.label.slice(prefix.length) : t.label,
    collapsed: lanes === 1 && t.depths > 1,
    lanes,
    levels: lanes < 2 ? null : lanes < t.depths ? "more" : deep ? "fewer" : null,
  };
}

/**
 * Rows of the track tree: per process a header, its tracks (each `levels.get(id)` lanes deep, all when absent;
 * none when the process is `folded`), then its counters; the counters of no process last.
 */
export function buildLayout(
  tracks: readonly TrackMeta[],
  counters: readonly { name: string; unit: string }[],
  levels: ReadonlyMap<number, number>,
  folded: ReadonlySet<string>,
): Layout {
  // Groups of adjacent tracks of one process, in the server's display order.
  const groups: { key: string; tracks: TrackMeta[]; counters: Map<string, CounterSeries[]> }[] = [];
  for (const t of tracks) {
    const last = groups[groups.length - 1];
    if (last?.key === t.process) last.tracks.push(t);
    else groups.push({ key: t.process, tracks: [t], counters: new Map() });
  }
  const rest = { key: COUNTER_GROUP, tracks: [] as TrackMeta[], counters: new Map<string, CounterSeries[]>() };
  for (const c of counters) {
    const owner = groups.find((g) => c.name.startsWith(`${g.key} `)) ?? rest;
    const key = counterRowKey(c.name);
    const series = owner.counters.get(key) ?? [];
    series.push({ name: c.name, unit: c.unit, style: series.length === 0 ? "area" : "line" });
    owner.counters.set(key, series);
  }
  if (rest.counters.size > 0) groups.push(rest);

  const rows: Row[] = [];
  const trackRows = new Map<number, TrackRow>();
  const hiddenTracks = new Set<number>();
  let y = 0;
  for (const g of groups) {
    const isFolded = folded.has(g.key);
    rows.push({ kind: "process", y, h: PROCESS_H, key: g.key, label: g.key, folded: isFolded, trackIds: g.tracks.map((t) => t.id) });
    y += PROCESS_H;
    if (isFolded) {
      for (const t of g.tracks) hiddenTracks.add(t.id);
      continue;
    }
    for (const t of g.tracks) {
      const row = trackRow(t, g.key, levels.get(t.id) ?? null, y);
      rows.push(row);
      trackRows.set(t.id, row);
      y += row.h;
    }
    for (const [key, series] of g.counters) {
      const label = g.key !== COUNTER_GROUP && key.startsWith(`${g.key} `) ? key.slice(g.key.length + 1) : key;
      rows.push({ kind: "counter", y, h: COUNTER_H, key, label, unit: series[0]?.unit ?? "", series });
      y += COUNTER_H;
    }
  }
  return { rows, height: y, trackRows, hiddenTracks };
}

/** The row at `y` (rows-area coordinates), by binary search. */
export function rowAt(layout: Layout, y: number): Row | null {
  const rows = layout.rows;
  let lo = 0;
  let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const r = rows[mid];
    if (!r) break;
    if (y < r.y) hi = mid - 1;
    else if (y >= r.y + r.h) lo = mid + 1;
    else return r;
  }
  return null;
}

/** Top of lane `depth` of a track row (rows-area coordinates). */
export function laneTop(row: TrackRow, depth: number): number {
  return row.y + 2 + Math.min(depth, row.lanes - 1) * LANE_H;
}
