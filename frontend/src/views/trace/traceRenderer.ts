/**
 * Canvas drawing and hit testing of the Trace view. Everything is drawn from the last window answer,
 * transformed to the current view (so panning and zooming redraw at once while the next window is
 * fetched): ruler, step bands, lanes of events (colour by name, labels when wide enough) and boxes of
 * merged sub-pixel events (alpha by busy share), counter charts, flow arrows, selection and range.
 * Rects are batched by colour, so a frame costs one fill per palette entry.
 */
import {
  PALETTE_SIZE,
  elide,
  formatCounter,
  formatTick,
  locate,
  lowerBound,
  niceStep,
  tickUnit,
  type Lane,
  type Palette,
  type Step,
  type WindowData,
} from "./traceData";
import {
  HEADER_H,
  HOST_LEVELS,
  LANE_H,
  RULER_H,
  STEPS_H,
  laneTop,
  rowAt,
  type CounterRow,
  type Layout,
  type Row,
  type TrackRow,
} from "./traceLayout";

export interface Colours {
  bg: string;
  surface: string;
  surface2: string;
  border: string;
  fg: string;
  muted: string;
  accent: string;
  accentSoft: string;
  grid: string;
  stepShade: string;
  textDark: string;
  textLight: string;
  counterArea: string[];
  counterLine: string[];
  palette: Palette;
  dark: boolean;
}

export interface ViewRange {
  start: number;
  end: number;
}

/** A flow end: track, lane depth when known, absolute time. */
export interface FlowEnd {
  track: number;
  depth: number | null;
  t: number;
}

export interface FlowArrow {
  from: FlowEnd;
  to: FlowEnd;
}

export interface Highlight {
  id: number;
  track: number | null;
  depth: number | null;
  start: number;
  dur: number;
}

export interface RangeMark {
  start: number;
  end: number;
  /** rows-area y range the selection covers (null = all rows) */
  y0: number | null;
  y1: number | null;
}

export interface Scene {
  width: number;
  height: number;
  labelW: number;
  scrollTop: number;
  view: ViewRange;
  bounds: [number, number] | null;
  data: WindowData | null;
  layout: Layout;
  steps: readonly Step[];
  /** scale of each counter row (by row key) */
  counterScale: ReadonlyMap<string, number>;
  selection: Highlight | null;
  arrows: readonly FlowArrow[];
  /** draw every flow of the window, faintly */
  allFlows: boolean;
  hover: Hit | null;
  range: RangeMark | null;
  colours: Colours;
  /** the critical path overlay ("highlight critical path"), absolute µs */
  critical: readonly CriticalMark[];
}

export interface CriticalMark {
  start: number;
  end: number;
  /** Trace event id of the segment's event; null for waits and idle time */
  id: number | null;
  /** "gpu" (kernels, copies), "host" (operators, launches, runtime) or "wait" (gaps, sync, idle) */
  side: "gpu" | "host" | "wait";
}

export const CRITICAL_COLOURS: Record<CriticalMark["side"], string> = { gpu: "#d81b60", host: "#1e88e5", wait: "#9e9e9e" };

export interface DrawStats {
  events: number;
  boxes: number;
  labels: number;
  /** events of the critical path outlined in this frame */
  critical: number;
  /** with a highlighted category: events and boxes drawn in full (they hold category events) and dimmed */
  marked: number;
  dimmed: number;
  ms: number;
  /** the ruler's labels and the step labels drawn (for tests: what the axis reads) */
  ticks: string[];
  steps: string[];
}

export type Hit =
  | { kind: "event"; id: number; track: number; depth: number; start: number; dur: number; name: string }
  | { kind: "box"; track: number; depth: number; start: number; dur: number; count: number; busy: number; name: string }
  | { kind: "counter"; row: CounterRow; t: number; values: { name: string; unit: string; value: number }[] }
  | { kind: "label"; row: Row; toggle: boolean; levels: "more" | "fewer" | null; above: boolean }
  | { kind: "step"; step: Step }
  | { kind: "ruler"; t: number }
  | { kind: "empty"; row: Row | null; t: number };

const FONT = '11px Roboto, system-ui, -apple-system, "Segoe UI", Arial, sans-serif';
const FONT_BOLD = '600 12px Roboto, system-ui, -apple-system, "Segoe UI", Arial, sans-serif';
const FONT_SMALL = '10.5px Roboto, system-ui, -apple-system, "Segoe UI", Arial, sans-serif';
const ALPHA_LEVELS = 4;
const MIN_LABEL_PX = 28;

export function plotWidth(scene: Pick<Scene, "width" | "labelW">): number {
  return Math.max(1, scene.width - scene.labelW);
}

export function timeToX(scene: Pick<Scene, "width" | "labelW" | "view">, t: number): number {
  return scene.labelW + ((t - scene.view.start) * plotWidth(scene)) / (scene.view.end - scene.view.start);
}

export function xToTime(scene: Pick<Scene, "width" | "labelW" | "view">, x: number): number {
  return scene.view.start + ((x - scene.labelW) * (scene.view.end - scene.view.start)) / plotWidth(scene);
}

// ------------------------------------------------------------------------------------------ text

const textWidth = new Map<string, number>();

/** The width of `text` in the context's current font (cached per font: labels use three). */
function measure(ctx: CanvasRenderingContext2D, text: string): number {
  const key = `${ctx.font}\u0000${text}`;
  let w = textWidth.get(key);
  if (w === undefined) {
    w = ctx.measureText(text).width;
    if (textWidth.size > 20_000) textWidth.clear();
    textWidth.set(key, w);
  }
  return w;
}

/** `text` cut with an ellipsis to fit `avail` px in the current font (null when nothing fits). */
export function fitText(ctx: CanvasRenderingContext2D, text: string, avail: number): string | null {
  return elide(text, avail, (s) => measure(ctx, s));
}

// ------------------------------------------------------------------------------------------ batches

class RectBatch {
  readonly buckets: number[][];
  constructor(n: number) {
    this.buckets = Array.from({ length: n }, () => []);
  }
  clear(): void {
    for (const b of this.buckets) b.length = 0;
  }
  add(bucket: number, x: number, y: number, w: number, h: number): void {
    this.buckets[bucket]?.push(x, y, w, h);
  }
  fill(ctx: CanvasRenderingContext2D, style: (bucket: number) => string, alpha?: (bucket: number) => number): void {
    for (const [i, b] of this.buckets.entries()) {
      if (b.length === 0) continue;
      ctx.fillStyle = style(i);
      ctx.globalAlpha = alpha ? alpha(i) : 1;
      ctx.beginPath();
      for (let k = 0; k < b.length; k += 4) ctx.rect(b[k] ?? 0, b[k + 1] ?? 0, b[k + 2] ?? 0, b[k + 3] ?? 0);
      ctx.fill();
    }
    ctx.globalAlpha = 1;
  }
}

const eventRects = new RectBatch(PALETTE_SIZE);
const boxRects = new RectBatch(PALETTE_SIZE * ALPHA_LEVELS);
/** events and boxes outside a highlighted category, drawn faintly under the rest */
const dimRects = new RectBatch(PALETTE_SIZE);
const DIM_ALPHA = 0.16;
/** x, y, w, h of each narrow event or box holding category events: outlined, at least MARK_MIN_PX wide, so that a
 * highlighted copy a few µs long still shows in a step of 50 ms (wider ones stand out by their colour alone) */
const markRects: number[] = [];
const MARK_MIN_PX = 3;
const MARK_OUTLINE_BELOW_PX = 8;
const labelJobs: { x: number; y: number; text: string; dark: boolean }[] = [];

// ------------------------------------------------------------------------------------------ drawing

/** Paint the batched lanes: dimmed (outside a highlighted category) first, boxes, events, then their labels. */
function fillLanes(ctx: CanvasRenderingContext2D, colours: Colours): void {
  const palette = colours.palette;
  dimRects.fill(ctx, (b) => palette.fill[b] ?? colours.muted, () => DIM_ALPHA);
  boxRects.fill(ctx, (b) => palette.fill[Math.floor(b / ALPHA_LEVELS)] ?? colours.muted,
                (b) => 0.22 + 0.78 * (((b % ALPHA_LEVELS) + 0.5) / ALPHA_LEVELS));
  eventRects.fill(ctx, (b) => palette.fill[b] ?? colours.muted);
  if (markRects.length) {
    ctx.strokeStyle = colours.fg;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let k = 0; k < markRects.length; k += 4) {
      ctx.rect(Math.round(markRects[k] ?? 0) + 0.5, (markRects[k + 1] ?? 0) + 0.5, Math.max(1, Math.round(markRects[k + 2] ?? 0) - 1), (markRects[k + 3] ?? 0) - 1);
    }
    ctx.stroke();
  }
  ctx.font = FONT;
  ctx.textBaseline = "middle";
  for (const dark of [true, false]) {
    ctx.fillStyle = dark ? colours.textDark : colours.textLight;
    for (const job of labelJobs) if (job.dark === dark) ctx.fillText(job.text, job.x, job.y);
  }
}

function drawLane(ctx: CanvasRenderingContext2D, scene: Scene, data: WindowData, lane: Lane, top: number, stats: DrawStats): void {
  const plotW = plotWidth(scene);
  const k = plotW / (scene.view.end - scene.view.start);
  const off = data.t0 - scene.view.start;
  const x0 = scene.labelW;
  const relStart = scene.view.start - data.t0;
  const relEnd = scene.view.end - data.t0;
  const h = LANE_H - 2;
  const palette = scene.colours.palette;

  // Boxes first, so events drawn on top of a box stay visible.
  if (lane.bt.length) {
    let i = Math.max(0, lowerBound(lane.bt, relStart) - 1);
    for (; i < lane.bt.length; i++) {
      const t = lane.bt[i] ?? 0;
      if (t > relEnd) break;
      const d = lane.bd[i] ?? 0;
      if (t + d < relStart) continue;
      let x = x0 + (off + t) * k;
      let w = Math.max(1, d * k);
      if (x < x0 - 1) {
        w -= x0 - 1 - x;
        x = x0 - 1;
      }
      if (w > plotW + 2) w = plotW + 2;
      stats.boxes++;
      if (lane.bhl) {
        if ((lane.bhl[i] ?? 0) === 0) {
          dimRects.add(lane.bc[i] ?? 0, x, top, w, h);
          stats.dimmed++;
          continue;
        }
        stats.marked++;
        if (w < MARK_OUTLINE_BELOW_PX) markRects.push(x - Math.max(0, (MARK_MIN_PX - w) / 2), top, Math.max(w, MARK_MIN_PX), h);
      }
      const busy = lane.bbusy[i] ?? 0;
      const level = Math.min(ALPHA_LEVELS - 1, Math.floor(busy * ALPHA_LEVELS));
      boxRects.add((lane.bc[i] ?? 0) * ALPHA_LEVELS + level, x, top, w, h);
    }
  }
  if (lane.et.length) {
    let i = Math.max(0, lowerBound(lane.et, relStart) - 1);
    // An event starting before the view may still reach into it: step back over long ones.
    while (i > 0 && (lane.et[i - 1] ?? 0) + (lane.ed[i - 1] ?? 0) > relStart) i--;
    for (; i < lane.et.length; i++) {
      const t = lane.et[i] ?? 0;
      if (t > relEnd) break;
      const d = lane.ed[i] ?? 0;
      if (t + d < relStart) continue;
      let x = x0 + (off + t) * k;
      let w = d * k;
      if (x < x0 - 2) {
        w -= x0 - 2 - x;
        x = x0 - 2;
      }
      if (w > plotW + 4) w = plotW + 4;
      const c = lane.ec[i] ?? 0;
      stats.events++;
      if (lane.ehl) {
        if ((lane.ehl[i] ?? 0) === 0) {
          dimRects.add(c, x, top, w > 2.5 ? w - 0.5 : Math.max(w, 1), h);
          stats.dimmed++;
          continue;
        }
        stats.marked++;
        if (w < MARK_OUTLINE_BELOW_PX) markRects.push(x - Math.max(0, (MARK_MIN_PX - w) / 2), top, Math.max(w, MARK_MIN_PX), h);
      }
      eventRects.add(c, x, top, w > 2.5 ? w - 0.5 : Math.max(w, 1), h);
      if (w >= MIN_LABEL_PX) {
        const vx = Math.max(x, x0);
        const vw = Math.min(x + w, x0 + plotW) - vx;
        if (vw >= MIN_LABEL_PX) {
          const text = fitText(ctx, data.names[lane.en[i] ?? 0] ?? "", vw - 6);
          if (text) labelJobs.push({ x: vx + 3, y: top + h / 2 + 0.5, text, dark: palette.darkText[c] ?? true });
        }
      }
    }
  }
}

function counterSeriesMap(data: WindowData): Map<string, { values: Float64Array; unit: string }> {
  return new Map(data.counters.map((c) => [c.name, { values: c.values, unit: c.unit }]));
}

function drawCounter(ctx: CanvasRenderingContext2D, scene: Scene, data: WindowData, row: CounterRow, top: number,
                     series: Map<string, { values: Float64Array; unit: string }>, index: number): void {
  const colours = scene.colours;
  const base = top + row.h - 4;
  const ceil = top + 5;
  const scale = row.unit === "fraction" ? 1 : Math.max(1, scene.counterScale.get(row.key) ?? 1);
  const px = data.pxUs;
  const plotW = plotWidth(scene);
  const k = plotW / (scene.view.end - scene.view.start);
  const off = data.t0 - scene.view.start;
  const x0 = scene.labelW;
  // baseline
  ctx.fillStyle = colours.border;
  ctx.fillRect(x0, base, plotW, 1);
  for (const [si, s] of row.series.entries()) {
    const c = series.get(s.name);
    if (!c) continue;
    const v = c.values;
    const first = Math.max(0, Math.floor((scene.view.start - data.t0) / px) - 1);
    const last = Math.min(v.length, Math.ceil((scene.view.end - data.t0) / px) + 1);
    ctx.beginPath();
    let open = false;
    let lastX = 0;
    for (let i = first; i < last; i++) {
      const value = v[i] ?? NaN;
      const xa = x0 + (off + i * px) * k;
      const xb = x0 + (off + (i + 1) * px) * k;
      if (Number.isNaN(value)) {
        if (open && s.style === "area") {
          ctx.lineTo(lastX, base);
          ctx.closePath();
        }
        open = false;
        continue;
      }
      const y = base - (Math.min(value, scale) / scale) * (base - ceil);
      if (!open) {
        if (s.style === "area") {
          ctx.moveTo(xa, base);
          ctx.lineTo(xa, y);
        } else {
          ctx.moveTo(xa, y);
        }
        open = true;
      } else {
        ctx.lineTo(xa, y);
      }
      ctx.lineTo(xb, y);
      lastX = xb;
    }
    if (open && s.style === "area") {
      ctx.lineTo(lastX, base);
      ctx.closePath();
    }
    const palette = si === 0 ? colours.counterArea : colours.counterLine;
    const colour = palette[index % palette.length] ?? colours.accent;
    if (s.style === "area") {
      ctx.fillStyle = colour;
      ctx.fill();
    } else {
      ctx.strokeStyle = colour;
      ctx.lineWidth = 1.25;
      ctx.stroke();
    }
  }
}

/** Stable colours per kind of counter: utilization, SM efficiency, memory, anything else. */
function counterColour(row: CounterRow): number {
  if (row.label.includes("utilization")) return 0;
  if (row.label.includes("SM")) return 1;
  if (row.label.includes("memory")) return 2;
  return 3;
}

function flowEndPoint(scene: Scene, end: FlowEnd): { x: number; y: number } | null {
  const row = scene.layout.trackRows.get(end.track);
  if (!row) return null;
  const depth = end.depth ?? 0;
  const y = HEADER_H - scene.scrollTop + laneTop(row, row.collapsed ? 0 : depth) + (LANE_H - 2) / 2;
  return { x: timeToX(scene, end.t), y };
}

function drawArrow(ctx: CanvasRenderingContext2D, scene: Scene, arrow: FlowArrow, colour: string, width: number): void {
  const a = flowEndPoint(scene, arrow.from);
  const b = flowEndPoint(scene, arrow.to);
  if (!a || !b) return;
  const lo = Math.min(a.x, b.x);
  const hi = Math.max(a.x, b.x);
  if (hi < scene.labelW - 50 || lo > scene.width + 50) return;
  const midY = (a.y + b.y) / 2;
  ctx.strokeStyle = colour;
  ctx.fillStyle = colour;
  ctx.lineWidth = width;
  ctx.beginPath();
  ctx.moveTo(a.x, a.y);
  ctx.bezierCurveTo(a.x, midY, b.x, midY, b.x, b.y);
  ctx.stroke();
  // arrowhead along the last tangent (vertical when the ends are on different rows)
  const dir = b.y >= a.y ? 1 : -1;
  const tip = b.y - dir * 1;
  ctx.beginPath();
  if (Math.abs(b.y - a.y) < 2) {
    const hd = b.x >= a.x ? 1 : -1;
    ctx.moveTo(b.x, b.y);
    ctx.lineTo(b.x - hd * 7, b.y - 4);
    ctx.lineTo(b.x - hd * 7, b.y + 4);
  } else {
    ctx.moveTo(b.x, tip);
    ctx.lineTo(b.x - 4, tip - dir * 7);
    ctx.lineTo(b.x + 4, tip - dir * 7);
  }
  ctx.closePath();
  ctx.fill();
}

function drawRuler(ctx: CanvasRenderingContext2D, scene: Scene, stats: DrawStats): void {
  const { colours, labelW, width } = scene;
  const plotW = plotWidth(scene);
  ctx.fillStyle = colours.surface;
  ctx.fillRect(0, 0, width, HEADER_H);
  const span = scene.view.end - scene.view.start;
  const origin = scene.bounds?.[0] ?? scene.view.start;
  const step = niceStep((span / plotW) * 90);
  const unit = tickUnit(Math.max(Math.abs(scene.view.end - origin), Math.abs(scene.view.start - origin)));
  const first = Math.ceil((scene.view.start - origin) / step);
  ctx.save();
  ctx.beginPath();
  ctx.rect(labelW, 0, plotW, HEADER_H);
  ctx.clip();
  ctx.font = FONT_SMALL;
  ctx.textBaseline = "top";
  ctx.fillStyle = colours.muted;
  const minor = step / 5;
  const firstMinor = Math.ceil((scene.view.start - origin) / minor);
  ctx.beginPath();
  for (let i = firstMinor; ; i++) {
    const x = timeToX(scene, origin + i * minor);
    if (x > width) break;
    ctx.rect(Math.round(x), RULER_H - 4, 1, 4);
  }
  ctx.fillStyle = colours.grid;
  ctx.fill();
  ctx.fillStyle = colours.muted;
  for (let i = first; ; i++) {
    const t = origin + i * step;
    const x = timeToX(scene, t);
    if (x > width) break;
    ctx.fillRect(Math.round(x), RULER_H - 9, 1, 9);
    const label = formatTick(i * step, step, unit);
    ctx.fillText(label, Math.round(x) + 3, 4);
    stats.ticks.push(label);
  }
  // steps band
  const top = RULER_H;
  for (const [i, s] of scene.steps.entries()) {
    const xa = timeToX(scene, s.start);
    const xb = timeToX(scene, s.start + s.dur);
    if (xb < labelW || xa > width) continue;
    ctx.fillStyle = i % 2 === 0 ? colours.accentSoft : colours.stepShade;
    ctx.fillRect(xa, top + 1, Math.max(1, xb - xa), STEPS_H - 2);
    ctx.fillStyle = colours.accent;
    ctx.fillRect(Math.round(xa), top + 1, 1, STEPS_H - 2);
    const vx = Math.max(xa, labelW);
    const vw = Math.min(xb, width) - vx;
    if (vw > 24) {
      ctx.font = FONT_SMALL;
      ctx.textBaseline = "middle";
      ctx.fillStyle = colours.fg;
      const text = fitText(ctx, `Step ${s.name}`, vw - 8);
      if (text) {
        ctx.fillText(text, vx + 4, top + STEPS_H / 2);
        stats.steps.push(text);
      }
    }
  }
  ctx.restore();
  ctx.fillStyle = colours.border;
  ctx.fillRect(0, HEADER_H - 1, width, 1);
  ctx.fillRect(0, RULER_H, width, 1);
  // the corner above the labels: what the ruler counts from
  ctx.fillStyle = colours.surface2;
  ctx.fillRect(0, 0, labelW, HEADER_H - 1);
  ctx.fillStyle = colours.muted;
  ctx.font = FONT_SMALL;
  ctx.textBaseline = "middle";
  ctx.fillText("time since trace start", 10, RULER_H / 2);
  ctx.fillText("steps", 10, RULER_H + STEPS_H / 2);
  ctx.fillStyle = colours.border;
  ctx.fillRect(labelW - 1, 0, 1, HEADER_H);
}

function drawLabels(ctx: CanvasRenderingContext2D, scene: Scene, visible: Row[]): void {
  const { colours, labelW } = scene;
  ctx.fillStyle = colours.surface2;
  ctx.fillRect(0, HEADER_H, labelW, scene.height - HEADER_H);
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, HEADER_H, labelW, scene.height - HEADER_H);
  ctx.clip();
  ctx.textBaseline = "middle";
  for (const row of visible) {
    const top = HEADER_H - scene.scrollTop + row.y;
    if (row.kind === "process") {
      ctx.fillStyle = colours.surface;
      ctx.fillRect(0, top, labelW, row.h);
      ctx.fillStyle = colours.fg;
      ctx.font = FONT_BOLD;
      drawTriangle(ctx, 10, top + row.h / 2, !row.folded, colours.muted);
      ctx.fillStyle = colours.fg;
      const text = fitText(ctx, row.label, labelW - 30);
      if (text) ctx.fillText(text, 20, top + row.h / 2 + 0.5);
    } else if (row.kind === "track") {
      ctx.font = FONT;
      const y = top + 2 + (LANE_H - 2) / 2;
      if (row.track.depths > 1) drawTriangle(ctx, 20, y, !row.collapsed, colours.muted);
      ctx.fillStyle = colours.fg;
      const text = fitText(ctx, row.label, labelW - 38 - (aboveLine(row) === 0 ? ABOVE_W : 0));
      if (text) ctx.fillText(text, 30, y + 0.5);
      if (row.collapsed && row.track.depths > 1 && row.h >= LANE_H) {
        // what is folded away, under the label
        ctx.font = FONT_SMALL;
        ctx.fillStyle = colours.muted;
        const more = `+${row.track.depths - 1} level${row.track.depths > 2 ? "s" : ""} folded`;
        if (text && measure(ctx, text) + measure(ctx, more) + 44 < labelW - 8) ctx.fillText(more, labelW - 8 - measure(ctx, more), y + 0.5);
      }
      drawLevelsControl(ctx, scene, row, top);
      drawAboveControl(ctx, scene, row, top);
    } else {
      ctx.font = FONT;
      ctx.fillStyle = colours.fg;
      const text = fitText(ctx, row.label, labelW - 38);
      if (text) ctx.fillText(text, 30, top + 12);
      ctx.font = FONT_SMALL;
      ctx.fillStyle = colours.muted;
      const scale = row.unit === "fraction" ? "0–100%" : `max ${formatCounter(scene.counterScale.get(row.key) ?? 0, row.unit)}`;
      const sub = fitText(ctx, scale, labelW - 38);
      if (sub) ctx.fillText(sub, 30, top + 26);
    }
    ctx.fillStyle = colours.border;
    ctx.fillRect(0, top + row.h - 1, labelW, 1);
  }
  ctx.restore();
  ctx.fillStyle = colours.border;
  ctx.fillRect(labelW - 1, HEADER_H, 1, scene.height - HEADER_H);
}

/** "▸ 24 more levels" / "▴ show 4 levels" on the label of a deep thread's last lane (click: traceLayout.levels). */
function drawLevelsControl(ctx: CanvasRenderingContext2D, scene: Scene, row: TrackRow, top: number): void {
  if (row.levels === null) return;
  const hidden = row.track.depths - row.lanes;
  const text = row.levels === "more" ? `▸ ${hidden} more level${hidden === 1 ? "" : "s"}` : `▴ show ${HOST_LEVELS} levels`;
  ctx.font = FONT_SMALL;
  ctx.fillStyle = scene.colours.accent;
  const fitted = fitText(ctx, text, scene.labelW - 38);
  if (fitted) ctx.fillText(fitted, 30, top + 2 + (row.lanes - 1) * LANE_H + (LANE_H - 2) / 2 + 0.5);
}

/** Width of "▴ N above" where it shares the first lane's label with the thread's name (a row of 1–2 lanes). */
const ABOVE_W = 64;

/**
 * The label line of a thread opened below its top frames (a spawn job's frames above its steps, `skipped`) that
 * offers them back: the second lane's (free: the name is on the first, "more levels" on the last), or the first
 * lane's right end on a row of one or two lanes; -1 when nothing is skipped.
 */
function aboveLine(row: TrackRow): number {
  if (row.track.skipped <= 0) return -1;
  return row.lanes >= 3 ? 1 : 0;
}

/** "▴ 7 levels above": a thread that opens at its steps offers the frames left out above them. */
function drawAboveControl(ctx: CanvasRenderingContext2D, scene: Scene, row: TrackRow, top: number): void {
  const line = aboveLine(row);
  if (line < 0) return;
  const n = row.track.skipped;
  ctx.font = FONT_SMALL;
  ctx.fillStyle = scene.colours.accent;
  const y = top + 2 + line * LANE_H + (LANE_H - 2) / 2 + 0.5;
  if (line > 0) {
    const fitted = fitText(ctx, `▴ ${n} level${n === 1 ? "" : "s"} above`, scene.labelW - 38);
    if (fitted) ctx.fillText(fitted, 30, y);
    return;
  }
  const fitted = fitText(ctx, `▴ ${n} above`, ABOVE_W - 4);
  if (fitted) ctx.fillText(fitted, scene.labelW - 6 - measure(ctx, fitted), y);
}

function drawTriangle(ctx: CanvasRenderingContext2D, x: number, y: number, open: boolean, colour: string): void {
  ctx.fillStyle = colour;
  ctx.beginPath();
  if (open) {
    ctx.moveTo(x - 4, y - 2);
    ctx.lineTo(x + 4, y - 2);
    ctx.lineTo(x, y + 3);
  } else {
    ctx.moveTo(x - 2, y - 4);
    ctx.lineTo(x + 3, y);
    ctx.lineTo(x - 2, y + 4);
  }
  ctx.closePath();
  ctx.fill();
}

function outline(ctx: CanvasRenderingContext2D, scene: Scene, track: number | null, depth: number | null, start: number, dur: number,
                 colour: string, width: number): void {
  if (track === null) return;
  const row = scene.layout.trackRows.get(track);
  if (!row) return;
  const top = HEADER_H - scene.scrollTop + laneTop(row, row.collapsed ? 0 : (depth ?? 0));
  const xa = timeToX(scene, start);
  const xb = timeToX(scene, start + dur);
  const x = Math.max(xa, scene.labelW - 3);
  const w = Math.max(2, Math.min(xb, scene.width + 3) - x);
  ctx.strokeStyle = colour;
  ctx.lineWidth = width;
  ctx.strokeRect(x - width / 2, top - width / 2, w + width, LANE_H - 2 + width);
}

/** Draw a frame. The context is in CSS pixels (the caller set the devicePixelRatio transform). */
export function draw(ctx: CanvasRenderingContext2D, scene: Scene): DrawStats {
  const t0 = performance.now();
  const stats: DrawStats = { events: 0, boxes: 0, labels: 0, critical: 0, marked: 0, dimmed: 0, ms: 0, ticks: [], steps: [] };
  const { colours, width, height, labelW, layout } = scene;
  const plotW = plotWidth(scene);
  ctx.fillStyle = colours.surface;
  ctx.fillRect(0, 0, width, height);

  const visible = layout.rows.filter((r) => r.y + r.h > scene.scrollTop && r.y < scene.scrollTop + height - HEADER_H);

  ctx.save();
  ctx.beginPath();
  ctx.rect(labelW, HEADER_H, plotW, height - HEADER_H);
  ctx.clip();

  // step shading
  for (const [i, s] of scene.steps.entries()) {
    if (i % 2 === 1) continue;
    const xa = timeToX(scene, s.start);
    const xb = timeToX(scene, s.start + s.dur);
    if (xb < labelW || xa > width) continue;
    ctx.fillStyle = colours.stepShade;
    ctx.fillRect(xa, HEADER_H, xb - xa, height - HEADER_H);
  }
  // outside the trace
  if (scene.bounds) {
    const xa = timeToX(scene, scene.bounds[0]);
    const xb = timeToX(scene, scene.bounds[1]);
    ctx.fillStyle = colours.bg;
    if (xa > labelW) ctx.fillRect(labelW, HEADER_H, xa - labelW, height - HEADER_H);
    if (xb < width) ctx.fillRect(xb, HEADER_H, width - xb, height - HEADER_H);
  }
  // process header bands and row separators
  for (const row of visible) {
    const top = HEADER_H - scene.scrollTop + row.y;
    if (row.kind === "process") {
      ctx.fillStyle = colours.surface2;
      ctx.globalAlpha = 0.7;
      ctx.fillRect(labelW, top, plotW, row.h);
      ctx.globalAlpha = 1;
    }
    ctx.fillStyle = colours.grid;
    ctx.fillRect(labelW, top + row.h - 1, plotW, 1);
  }
  // grid lines at the ruler's ticks
  {
    const span = scene.view.end - scene.view.start;
    const origin = scene.bounds?.[0] ?? scene.view.start;
    const step = niceStep((span / plotW) * 90);
    ctx.beginPath();
    for (let i = Math.ceil((scene.view.start - origin) / step); ; i++) {
      const x = timeToX(scene, origin + i * step);
      if (x > width) break;
      ctx.rect(Math.round(x), HEADER_H, 1, height - HEADER_H);
    }
    ctx.fillStyle = colours.grid;
    ctx.fill();
  }

  const data = scene.data;
  if (data) {
    eventRects.clear();
    boxRects.clear();
    dimRects.clear();
    markRects.length = 0;
    labelJobs.length = 0;
    const series = counterSeriesMap(data);
    for (const row of visible) {
      const top = HEADER_H - scene.scrollTop + row.y;
      if (row.kind === "track") {
        const track = data.trackById.get(row.track.id);
        if (!track) continue;
        const lanes = row.collapsed ? 1 : row.lanes;
        for (let depth = 0; depth < lanes; depth++) {
          const lane = track.lanes[depth];
          const y = top + 2 + depth * LANE_H;
          if (!lane || y > height || y + LANE_H < HEADER_H) continue;
          drawLane(ctx, scene, data, lane, y, stats);
        }
      } else if (row.kind === "counter") {
        drawCounter(ctx, scene, data, row, top, series, counterColour(row));
      }
    }
    fillLanes(ctx, colours);
    stats.labels = labelJobs.length;

    if (scene.allFlows) {
      ctx.globalAlpha = 0.35;
      for (const f of data.flows) {
        drawArrow(ctx, scene, { from: { track: f[1], depth: locateDepth(data, f[0]), t: data.t0 + f[2] },
                                to: { track: f[4], depth: locateDepth(data, f[3]), t: data.t0 + f[5] } }, colours.muted, 1);
      }
      ctx.globalAlpha = 1;
    }
  }

  // the selected range
  if (scene.range) {
    const r = scene.range;
    const xa = timeToX(scene, r.start);
    const xb = timeToX(scene, r.end);
    ctx.fillStyle = colours.accentSoft;
    ctx.fillRect(xa, HEADER_H, xb - xa, height - HEADER_H);
    ctx.fillStyle = colours.accent;
    ctx.fillRect(Math.round(xa), HEADER_H, 1, height - HEADER_H);
    ctx.fillRect(Math.round(xb), HEADER_H, 1, height - HEADER_H);
    if (r.y0 !== null && r.y1 !== null) {
      ctx.strokeStyle = colours.accent;
      ctx.lineWidth = 1;
      ctx.setLineDash([4, 3]);
      ctx.strokeRect(xa + 0.5, HEADER_H - scene.scrollTop + r.y0 + 0.5, xb - xa - 1, r.y1 - r.y0 - 1);
      ctx.setLineDash([]);
    }
  }

  // hover and selection outlines, flows of the selection
  const hover = scene.hover;
  if (hover && (hover.kind === "event" || hover.kind === "box")) {
    outline(ctx, scene, hover.track, hover.depth, hover.start, hover.dur, colours.fg, 1);
  }
  for (const arrow of scene.arrows) drawArrow(ctx, scene, arrow, colours.accent, 1.6);
  if (data) stats.critical = drawCritical(ctx, scene, data);
  const sel = scene.selection;
  if (sel) outline(ctx, scene, sel.track, sel.depth, sel.start, sel.dur, colours.accent, 2.5);
  ctx.restore();

  drawRuler(ctx, scene, stats);
  if (scene.range) {
    // the range's span in the ruler
    const xa = Math.max(labelW, timeToX(scene, scene.range.start));
    const xb = Math.min(width, timeToX(scene, scene.range.end));
    if (xb > xa) {
      ctx.fillStyle = colours.accent;
      ctx.globalAlpha = 0.25;
      ctx.fillRect(xa, 0, xb - xa, RULER_H);
      ctx.globalAlpha = 1;
    }
  }
  drawLabels(ctx, scene, visible);
  stats.ms = performance.now() - t0;
  return stats;
}

/** Outline the critical path's events of the window and mark every segment in a band under the ruler. */
function drawCritical(ctx: CanvasRenderingContext2D, scene: Scene, data: WindowData): number {
  let outlined = 0;
  for (const m of scene.critical) {
    const xa = Math.max(scene.labelW, timeToX(scene, m.start));
    const xb = Math.min(scene.width, timeToX(scene, m.end));
    if (xb < scene.labelW || xa > scene.width) continue;
    ctx.fillStyle = CRITICAL_COLOURS[m.side];
    ctx.fillRect(xa, HEADER_H - 4, Math.max(1, xb - xa), 4);
    const at = m.id === null ? null : locate(data, m.id);
    if (at) {
      outline(ctx, scene, at.track, at.depth, at.start, at.dur, CRITICAL_COLOURS[m.side], 2);
      outlined++;
    }
  }
  return outlined;
}

function locateDepth(data: WindowData, id: number): number | null {
  // Build the id index only once per window (see traceData.locate).
  if (!data.index) return null;
  return data.index.get(id)?.depth ?? null;
}

// ------------------------------------------------------------------------------------------ hit testing

function hitLane(scene: Scene, data: WindowData, track: number, lane: Lane, x: number): Hit | null {
  const k = plotWidth(scene) / (scene.view.end - scene.view.start);
  const t = xToTime(scene, x) - data.t0;
  const tol = 2 / k;
  let best: Hit | null = null;
  let bestDist = Infinity;
  const i = lowerBound(lane.et, t);
  for (let j = Math.max(0, i - 2); j < Math.min(lane.et.length, i + 2); j++) {
    const s = lane.et[j] ?? 0;
    const d = lane.ed[j] ?? 0;
    const dist = t < s ? s - t : t > s + d ? t - (s + d) : 0;
    if (dist <= tol && dist < bestDist) {
      bestDist = dist;
      best = { kind: "event", id: lane.eid[j] ?? -1, track, depth: lane.depth, start: data.t0 + s, dur: d, name: data.names[lane.en[j] ?? 0] ?? "" };
    }
  }
  // a long event starting far before the cursor
  for (let j = i - 3; j >= 0 && best === null; j--) {
    const s = lane.et[j] ?? 0;
    const d = lane.ed[j] ?? 0;
    if (s + d >= t) {
      best = { kind: "event", id: lane.eid[j] ?? -1, track, depth: lane.depth, start: data.t0 + s, dur: d, name: data.names[lane.en[j] ?? 0] ?? "" };
    }
    if (i - j > 64) break;
  }
  if (best) return best;
  const b = lowerBound(lane.bt, t);
  for (let j = Math.max(0, b - 1); j < Math.min(lane.bt.length, b + 1); j++) {
    const s = lane.bt[j] ?? 0;
    const d = lane.bd[j] ?? 0;
    if (t >= s - tol && t <= s + d + tol) {
      return { kind: "box", track, depth: lane.depth, start: data.t0 + s, dur: d, count: lane.bcount[j] ?? 0,
               busy: lane.bbusy[j] ?? 0, name: data.names[lane.bn[j] ?? 0] ?? "" };
    }
  }
  return null;
}

export function hitTest(scene: Scene, x: number, y: number): Hit | null {
  if (y < 0 || x < 0 || x > scene.width || y > scene.height) return null;
  if (y < HEADER_H) {
    if (x < scene.labelW) return null;
    if (y >= RULER_H) {
      const t = xToTime(scene, x);
      const step = scene.steps.find((s) => t >= s.start && t <= s.start + s.dur);
      if (step) return { kind: "step", step };
    }
    return { kind: "ruler", t: xToTime(scene, x) };
  }
  const ry = y - HEADER_H + scene.scrollTop;
  const row = rowAt(scene.layout, ry);
  if (x < scene.labelW) {
    if (!row) return null;
    const firstLane = ry - row.y < LANE_H + 2;
    const toggle = row.kind === "process" || (row.kind === "track" && row.track.depths > 1 && firstLane);
    const levels = row.kind === "track" && !firstLane && ry >= laneTop(row, row.lanes - 1) ? row.levels : null;
    const line = row.kind === "track" ? aboveLine(row) : -1;
    const above = row.kind === "track" && line >= 0 && Math.floor((ry - row.y - 2) / LANE_H) === line &&
      (line > 0 || x >= scene.labelW - ABOVE_W);
    return { kind: "label", row, toggle: toggle && !above, levels: above ? null : levels, above };
  }
  const t = xToTime(scene, x);
  if (!row) return { kind: "empty", row: null, t };
  const data = scene.data;
  if (row.kind === "track" && data) {
    const track = data.trackById.get(row.track.id);
    const depth = Math.floor((ry - row.y - 2) / LANE_H);
    const lane = track?.lanes[depth];
    if (lane && depth >= 0 && depth < row.lanes) {
      const hit = hitLane(scene, data, row.track.id, lane, x);
      if (hit) return hit;
    }
  } else if (row.kind === "counter" && data) {
    const col = Math.floor((t - data.t0) / data.pxUs);
    const values = row.series.map((s) => {
      const c = data.counters.find((cc) => cc.name === s.name);
      return { name: s.name, unit: s.unit, value: c?.values[col] ?? NaN };
    });
    return { kind: "counter", row, t, values };
  }
  return { kind: "empty", row, t };
}

/** Events drawn on screen, in canvas CSS pixels (for tests and the debug hook). */
export interface ScreenEvent {
  id: number;
  name: string;
  track: number;
  kind: "cpu" | "gpu";
  depth: number;
  x: number;
  y: number;
  w: number;
  h: number;
}

export function eventsOnScreen(scene: Scene): ScreenEvent[] {
  const out: ScreenEvent[] = [];
  const data = scene.data;
  if (!data) return out;
  for (const row of scene.layout.rows) {
    if (row.kind !== "track") continue;
    const track = data.trackById.get(row.track.id);
    if (!track) continue;
    for (let depth = 0; depth < row.lanes; depth++) {
      const lane = track.lanes[depth];
      if (!lane) continue;
      const y = HEADER_H - scene.scrollTop + laneTop(row, depth);
      if (y < HEADER_H || y + LANE_H > scene.height) continue;
      for (let i = 0; i < lane.et.length; i++) {
        const xa = timeToX(scene, data.t0 + (lane.et[i] ?? 0));
        const xb = timeToX(scene, data.t0 + (lane.et[i] ?? 0) + (lane.ed[i] ?? 0));
        const x = Math.max(xa, scene.labelW);
        const w = Math.min(xb, scene.width) - x;
        if (w <= 0) continue;
        out.push({ id: lane.eid[i] ?? -1, name: data.names[lane.en[i] ?? 0] ?? "", track: row.track.id, kind: row.track.kind, depth, x, y, w, h: LANE_H - 2 });
      }
    }
  }
  return out;
}
