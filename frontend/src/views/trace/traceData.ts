/**
 * The Trace view's data side: a `./trace/window` answer turned into typed arrays that the renderer
 * walks without allocating, colours by name, and time formatting.
 */
import type { TraceWindowResponse, WindowFlow, WindowTrack } from "./traceTypes";
import { formatFixed, formatTime } from "../../format";

export interface Lane {
  depth: number;
  /** events ≥ 1 px at fetch time: start (relative to the window's t0), duration, palette index, id, name index */
  et: Float64Array;
  ed: Float64Array;
  ec: Uint8Array;
  eid: Float64Array;
  en: Int32Array;
  /** boxes of merged sub-pixel events */
  bt: Float64Array;
  bd: Float64Array;
  bcount: Float64Array;
  bbusy: Float64Array;
  bc: Uint8Array;
  bn: Int32Array;
  /** with a highlighted category: per event 1 where it counts in the category; per box how many of its events do */
  ehl: Uint8Array | null;
  bhl: Float64Array | null;
}

export interface TrackMeta {
  id: number;
  kind: "cpu" | "gpu";
  label: string;
  process: string;
  depths: number;
  /** levels above depth 0 that the server left out (the frames above a spawn job's outermost ProfilerStep) */
  skipped: number;
}

export interface TrackData extends TrackMeta {
  collapsed: boolean;
  /** lanes the server sent (depth 0 first) */
  shown: number;
  /** lanes by depth (sparse: depths without events in the window are missing) */
  lanes: (Lane | undefined)[];
}

export interface CounterData {
  name: string;
  unit: string;
  /** NaN where the answer had null */
  values: Float64Array;
  max: number;
}

export interface Step {
  name: string;
  /** absolute µs */
  start: number;
  dur: number;
}

export interface EventLocation {
  id: number;
  track: number;
  depth: number;
  /** absolute µs */
  start: number;
  dur: number;
  name: string;
}

export interface WindowData {
  t0: number;
  t1: number;
  pxUs: number;
  bounds: [number, number];
  names: string[];
  tracks: TrackData[];
  trackById: Map<number, TrackData>;
  flows: WindowFlow[];
  flowsTruncated: boolean;
  steps: Step[];
  counters: CounterData[];
  /** the `levels=` list the window was asked with */
  levelsKey: string;
  /** the step-breakdown category the window was asked to highlight (null: none) */
  category: string | null;
  eventCount: number;
  boxCount: number;
  /** lazily built id → location of the window's events */
  index: Map<number, EventLocation> | null;
}

// ------------------------------------------------------------------------------------------ colours

/** Hues of the event palette; lightness/saturation come from the theme. */
const HUES = [210, 145, 28, 275, 350, 185, 55, 320, 100, 240, 12, 200, 80, 300, 40, 165, 225, 125, 0, 260];
export const PALETTE_SIZE = HUES.length;

export interface Palette {
  fill: string[];
  /** true where dark text reads better than light text */
  darkText: boolean[];
}

export function makePalette(dark: boolean): Palette {
  const fill: string[] = [];
  const darkText: boolean[] = [];
  for (const [i, hue] of HUES.entries()) {
    const sat = dark ? 45 + (i % 3) * 8 : 55 + (i % 3) * 8;
    const light = dark ? 40 + (i % 4) * 5 : 64 + (i % 4) * 5;
    fill.push(`hsl(${hue} ${sat}% ${light}%)`);
    darkText.push(!dark);
  }
  return { fill, darkText };
}

const colourCache = new Map<string, number>();

/** A stable palette index for a name (FNV-1a of the name without digits' noise such as "#123"). */
export function colourOf(name: string): number {
  const cached = colourCache.get(name);
  if (cached !== undefined) return cached;
  const key = name.replace(/#\d+$/, "");
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  const idx = (h >>> 0) % PALETTE_SIZE;
  if (colourCache.size > 50_000) colourCache.clear();
  colourCache.set(name, idx);
  return idx;
}

// ------------------------------------------------------------------------------------------ steps

/**
 * The steps known so far with those of a new answer, each step once, in time order. Every window answer lists
 * every step with its start relative to that window's `t0` (rounded to 1 ns), so one step comes back with starts a
 * rounding apart (at 1.6e15 µs, a float's step is 0.25 µs): steps are keyed by name, which the server makes
 * unique (a host step and its GPU copy are one step), and the first value seen stays.
 */
export function mergeSteps(known: readonly Step[], incoming: readonly Step[]): Step[] {
  const byName = new Map<string, Step>();
  for (const s of [...known, ...incoming]) if (!byName.has(s.name)) byName.set(s.name, s);
  return [...byName.values()].sort((a, b) => a.start - b.start);
}

// ------------------------------------------------------------------------------------------ parsing

function f64(values: readonly number[] | undefined): Float64Array {
  return Float64Array.from(values ?? []);
}

function i32(values: readonly number[] | undefined): Int32Array {
  return Int32Array.from(values ?? []);
}

function colours(nameIdx: Int32Array, nameColours: Uint8Array): Uint8Array {
  const out = new Uint8Array(nameIdx.length);
  for (let i = 0; i < nameIdx.length; i++) out[i] = nameColours[nameIdx[i] ?? 0] ?? 0;
  return out;
}

function parseTrack(t: WindowTrack, nameColours: Uint8Array, counts: { events: number; boxes: number }): TrackData {
  const lanes: (Lane | undefined)[] = [];
  for (const l of Array.isArray(t.lanes) ? t.lanes : []) {
    const en = i32(l.events.n);
    const bn = i32(l.boxes.n);
    const lane: Lane = {
      depth: l.depth,
      et: f64(l.events.t),
      ed: f64(l.events.d),
      en,
      ec: colours(en, nameColours),
      eid: f64(l.events.id),
      bt: f64(l.boxes.t),
      bd: f64(l.boxes.d),
      bcount: f64(l.boxes.count),
      bbusy: f64(l.boxes.busy),
      bn,
      bc: colours(bn, nameColours),
      ehl: Array.isArray(l.events.hl) ? Uint8Array.from(l.events.hl) : null,
      bhl: Array.isArray(l.boxes.hl) ? f64(l.boxes.hl) : null,
    };
    counts.events += lane.et.length;
    counts.boxes += lane.bt.length;
    lanes[l.depth] = lane;
  }
  return {
    id: t.id,
    kind: t.kind === "gpu" ? "gpu" : "cpu",
    label: t.label,
    process: t.process,
    depths: Math.max(1, t.depths | 0),
    skipped: Math.max(0, (t.skipped ?? 0) | 0),
    collapsed: t.collapsed,
    shown: Math.max(1, Math.min(t.depths | 0, (t.shown_depths ?? t.depths) | 0)),
    lanes,
  };
}

export function parseWindow(resp: TraceWindowResponse, levelsKey: string, category: string | null = null): WindowData {
  const names = Array.isArray(resp.names) ? resp.names.map(String) : [];
  const nameColours = Uint8Array.from(names.map(colourOf));
  const counts = { events: 0, boxes: 0 };
  const tracks = (Array.isArray(resp.tracks) ? resp.tracks : []).map((t) => parseTrack(t, nameColours, counts));
  const t0 = resp.t0;
  return {
    t0,
    t1: resp.t1,
    pxUs: resp.px_us,
    bounds: [resp.bounds[0], resp.bounds[1]],
    names,
    tracks,
    trackById: new Map(tracks.map((t) => [t.id, t])),
    flows: Array.isArray(resp.flows) ? resp.flows : [],
    flowsTruncated: resp.flows_truncated,
    steps: (Array.isArray(resp.steps) ? resp.steps : []).map(([name, t, d]) => ({ name, start: t0 + t, dur: d })),
    counters: (Array.isArray(resp.counters) ? resp.counters : []).map((c) => {
      const values = Float64Array.from(c.values, (v) => (v === null ? NaN : v));
      let max = 0;
      for (const v of values) if (v > max) max = v;
      return { name: c.name, unit: c.unit, values, max };
    }),
    levelsKey,
    category,
    eventCount: counts.events,
    boxCount: counts.boxes,
    index: null,
  };
}

/** Where an event of the window is (null when it is not drawn as an event in this window). */
export function locate(data: WindowData, id: number): EventLocation | null {
  if (!data.index) {
    const index = new Map<number, EventLocation>();
    for (const track of data.tracks) {
      for (const lane of track.lanes) {
        if (!lane) continue;
        for (let i = 0; i < lane.eid.length; i++) {
          index.set(lane.eid[i] ?? -1, {
            id: lane.eid[i] ?? -1,
            track: track.id,
            depth: lane.depth,
            start: data.t0 + (lane.et[i] ?? 0),
            dur: lane.ed[i] ?? 0,
            name: data.names[lane.en[i] ?? 0] ?? "",
          });
        }
      }
    }
    data.index = index;
  }
  return data.index.get(id) ?? null;
}

/** First index i with arr[i] >= value (arr sorted ascending). */
export function lowerBound(arr: Float64Array, value: number): number {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((arr[mid] ?? 0) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// ------------------------------------------------------------------------------------------ formatting

/**
 * A time relative to the trace start: "+1.234 ms", "−101.64 µs" (before the start, which a view may show), "0 µs";
 * one sign, never "+-".
 */
export function formatOffset(us: number): string {
  const text = formatTime(Math.abs(us));
  if (!Number.isFinite(us) || /^0(\.0+)? /.test(text)) return text; // zero at this precision: no sign
  return `${us < 0 ? "\u2212" : "+"}${text}`;
}

/**
 * `text` cut with an ellipsis to fit `avail` px as `measure` measures it; null when not even one character and the
 * ellipsis fit (then nothing is drawn: a label must never run into its neighbour).
 */
export function elide(text: string, avail: number, measure: (s: string) => number): string | null {
  if (text.length === 0 || !(avail > 0)) return null;
  const full = measure(text);
  if (full <= avail) return text;
  const ell = measure("…");
  if (avail < ell + 6) return null;
  const per = full / text.length;
  let n = Math.min(text.length - 1, Math.floor((avail - ell) / per));
  while (n > 0) {
    const candidate = text.slice(0, n) + "…";
    const w = measure(candidate);
    if (w <= avail) return candidate;
    n -= Math.max(1, Math.ceil((w - avail) / per));
  }
  return null;
}

/** A ruler step in µs: 1, 2 or 5 × 10^k, at least `minUs`. */
export function niceStep(minUs: number): number {
  if (!(minUs > 0) || !Number.isFinite(minUs)) return 1;
  const exp = Math.floor(Math.log10(minUs));
  const base = 10 ** exp;
  for (const m of [1, 2, 5, 10]) if (m * base >= minUs) return m * base;
  return 10 * base;
}

/** The unit of ruler labels for a view reaching `maxOffsetUs` past the trace start: s, ms or µs. */
export function tickUnit(maxOffsetUs: number): { us: number; suffix: string } {
  if (maxOffsetUs >= 1_000_000) return { us: 1_000_000, suffix: "s" };
  if (maxOffsetUs >= 1000) return { us: 1000, suffix: "ms" };
  return { us: 1, suffix: "µs" };
}

/** A ruler label for an offset from the trace start, with the decimals the step needs in that unit. */
export function formatTick(offsetUs: number, stepUs: number, unit: { us: number; suffix: string }): string {
  const digits = Math.min(6, Math.max(0, Math.ceil(-Math.log10(stepUs / unit.us) - 1e-9)));
  return `${formatFixed(offsetUs / unit.us, digits)} ${unit.suffix}`;
}

export function formatBytesShort(bytes: number): string {
  if (!Number.isFinite(bytes)) return "—";
  const a = Math.abs(bytes);
  if (a >= 1024 ** 3) return `${formatFixed(bytes / 1024 ** 3, 2)} GiB`;
  if (a >= 1024 ** 2) return `${formatFixed(bytes / 1024 ** 2, 1)} MiB`;
  if (a >= 1024) return `${formatFixed(bytes / 1024, 1)} KiB`;
  return `${formatFixed(bytes, 0)} B`;
}

export function formatCounter(value: number, unit: string): string {
  if (!Number.isFinite(value)) return "—";
  if (unit === "fraction") return `${formatFixed(value * 100, 1)}%`;
  if (unit === "bytes") return formatBytesShort(value);
  if (unit === "count") return formatFixed(value, 0);
  // a trickle (a few .item() copies) keeps two significant digits rather than reading "0.00 GB/s"
  if (unit === "GB/s") return `${value > 0 && value < 0.1 ? value.toPrecision(2) : formatFixed(value, 2)} GB/s`;
  return formatFixed(value, 2);
}

/**
 * The lane that holds step `name`'s `ProfilerStep#name` event on a host thread (its outermost, the shallowest),
 * or null when the window does not have it: where the Trace view scrolls after a step-bar click, so that the
 * step's thread (and what a step link highlights there) is on screen.
 */
export function stepLane(data: Pick<WindowData, "names" | "tracks">, name: string): { track: number; depth: number } | null {
  const code = data.names.indexOf(`ProfilerStep#${name}`);
  if (code < 0) return null;
  let best: { track: number; depth: number } | null = null;
  for (const track of data.tracks) {
    if (track.kind !== "cpu") continue;
    for (const lane of track.lanes) {
      if (lane && lane.en.includes(code) && (best === null || lane.depth < best.depth)) best = { track: track.id, depth: lane.depth };
    }
  }
  return best;
}

/** The first lane (in the tracks' order) holding an event the server marked for the highlighted category, or null:
 * where a highlight link (the Overview's breakdown row) must open, rather than on the step's host lane. */
export function firstMarkedLane(data: Pick<WindowData, "tracks">): { track: number; depth: number } | null {
  for (const track of data.tracks) {
    for (const lane of track.lanes) {
      if (lane && ((lane.ehl?.some((v) => v > 0) ?? false) || (lane.bhl?.some((v) => v > 0) ?? false))) {
        return { track: track.id, depth: lane.depth };
      }
    }
  }
  return null;
}

/** The step a linked range shows (the one covering most of it, at least half), or null: a step link's target. */
export function stepOfRange(steps: readonly Step[], start: number, end: number): Step | null {
  let best: Step | null = null;
  let most = 0;
  for (const s of steps) {
    const overlap = Math.min(end, s.start + s.dur) - Math.max(start, s.start);
    if (overlap > most) {
      most = overlap;
      best = s;
    }
  }
  return best && most >= 0.5 * (end - start) ? best : null;
}
