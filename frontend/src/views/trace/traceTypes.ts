/**
 * The JSON contract of the Trace view's routes (`./trace/window`, `./trace/event`, `./trace/search`,
 * `./trace/range`; see docs/api/openapi.yaml). Times are microseconds: absolute in requests, briefs
 * and details, relative to `t0` inside a window answer.
 */

/** Events at least one pixel wide, columnar. */
export interface LaneEvents {
  t: number[];
  d: number[];
  /** index into `names` */
  n: number[];
  id: number[];
  /** only when the window was asked with a `category`: 1 where the event counts in it */
  hl?: number[];
}

/** Merged runs of sub-pixel events, columnar. */
export interface LaneBoxes {
  t: number[];
  d: number[];
  count: number[];
  /** share of the box's span covered by events, 0..1 */
  busy: number[];
  /** the most common name, index into `names` */
  n: number[];
  /** only when the window was asked with a `category`: how many of the box's events count in it */
  hl?: number[];
}

export interface WindowLane {
  depth: number;
  events: LaneEvents;
  boxes: LaneBoxes;
}

export interface WindowTrack {
  id: number;
  kind: "cpu" | "gpu";
  pid?: number | string;
  tid?: number | string;
  label: string;
  process: string;
  /** nesting depths of the whole track (not only of this window) */
  depths: number;
  /** lanes sent (depth 0 first): fewer than depths when limited (collapsed, levels, host_levels) */
  shown_depths?: number;
  /** levels above the first one sent, left out (a spawn job's frames above its steps); depths count from there */
  skipped?: number;
  collapsed: boolean;
  lanes: WindowLane[];
}

export interface WindowCounter {
  name: string;
  /** "fraction" (0..1) or "bytes" */
  unit: string;
  /** one per pixel column of the window; null where nothing is known */
  values: (number | null)[];
}

/** [src_id, src_track, src_t, dst_id, dst_track, dst_t], times relative to t0 */
export type WindowFlow = [number, number, number, number, number, number];

/** [name, t (relative to t0), duration] */
export type WindowStep = [string, number, number];

export interface TraceWindowResponse {
  t0: number;
  t1: number;
  px_us: number;
  /** [trace start, trace end], absolute µs */
  bounds: [number, number];
  names: string[];
  tracks: WindowTrack[];
  flows: WindowFlow[];
  flows_truncated: boolean;
  steps: WindowStep[];
  counters: WindowCounter[];
}

export interface EventBrief {
  id: number;
  name: string;
  /** absolute µs */
  start_us: number;
  dur_us: number;
  track: number | null;
}

export interface TraceEventResponse extends EventBrief {
  category: string | null;
  kind: string;
  pid: number | string;
  tid: number | string;
  args: Record<string, unknown>;
  launched_by?: EventBrief | null;
  operator?: EventBrief | null;
  launched?: EventBrief[];
  /** frames "path(line): function", innermost first */
  call_stack?: string[];
  /** the whole name, where `name` (and every other answer) shows it shortened (over 8,192 characters) */
  full_name?: string;
}

export interface TraceSearchResponse {
  query: string;
  total: number;
  offset: number;
  items: EventBrief[];
}

export interface TraceRangeRow {
  name: string;
  count: number;
  total_us: number;
  self_us: number;
}

export interface TraceRangeResponse {
  start_us: number;
  end_us: number;
  events: number;
  groups: number;
  rows: TraceRangeRow[];
}
