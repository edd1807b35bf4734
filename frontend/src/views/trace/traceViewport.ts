/**
 * The Trace view's time axis, as Perfetto keeps its time scale apart from its panels: which microseconds the plot
 * shows, how a pixel maps to a time, and how a zoom, a pan, a held key or an animation moves the range. Pure (no
 * DOM, no state): TraceView holds the range and asks these functions for the next one; frontend/test/
 * traceViewport.test.ts checks them.
 */

/** The visible time range, absolute µs. */
export interface ViewRange {
  start: number;
  end: number;
}

/** What maps time to pixels: the canvas width, the track labels' column, the range. */
export interface Axis {
  width: number;
  labelW: number;
  view: ViewRange;
}

/** The narrowest range the view zooms to (50 ns). */
export const MIN_SPAN_US = 0.05;
/** How long fit, zoom-to and reveal take to glide to their range. */
export const ANIMATE_MS = 180;
/** A W/A/S/D key held at least this long moves the view continuously, every frame. */
export const KEY_HOLD_MS = 140;

export function plotWidth(axis: Pick<Axis, "width" | "labelW">): number {
  return Math.max(1, axis.width - axis.labelW);
}

export function timeToX(axis: Axis, t: number): number {
  return axis.labelW + ((t - axis.view.start) * plotWidth(axis)) / (axis.view.end - axis.view.start);
}

export function xToTime(axis: Axis, x: number): number {
  return axis.view.start + ((x - axis.labelW) * (axis.view.end - axis.view.start)) / plotWidth(axis);
}

/** A distance of `px` pixels as microseconds at the current zoom. */
export function pxToUs(axis: Axis, px: number): number {
  return (px * (axis.view.end - axis.view.start)) / plotWidth(axis);
}

/**
 * A range the view may show: at least MIN_SPAN_US wide, at most 1.5 × the trace (`bounds`), its centre within the
 * trace; a range that is all that already comes back unchanged (so exact values survive a round trip).
 */
export function clampView(v: ViewRange, bounds: readonly [number, number] | null): ViewRange {
  let { start, end } = v;
  const limit = bounds ? Math.max(MIN_SPAN_US, (bounds[1] - bounds[0]) * 1.5) : Infinity;
  if (!(end - start >= MIN_SPAN_US) || end - start > limit) {
    const c = (start + end) / 2;
    const span = Math.min(limit, Math.max(MIN_SPAN_US, Number.isFinite(end - start) ? end - start : MIN_SPAN_US));
    start = c - span / 2;
    end = c + span / 2;
  }
  if (bounds) {
    const c = (start + end) / 2;
    const shift = c < bounds[0] ? bounds[0] - c : c > bounds[1] ? bounds[1] - c : 0;
    start += shift;
    end += shift;
  }
  return { start, end };
}

/** The pixel a zoom keeps in place: the pointer's `x` when over the plot, else the mouse's, else the centre. */
export function anchorX(axis: Pick<Axis, "width" | "labelW">, x: number | null, mouseX: number | null): number {
  if (x !== null && x >= axis.labelW && x <= axis.width) return x;
  if (mouseX !== null && mouseX >= axis.labelW) return mouseX;
  return axis.labelW + (axis.width - axis.labelW) / 2;
}

/** The range `factor` times as wide (< 1 zooms in), the time under pixel `x` staying under it. */
export function zoomView(axis: Axis, factor: number, x: number): ViewRange {
  const v = axis.view;
  const t = xToTime(axis, x);
  const span = v.end - v.start;
  const next = Math.max(MIN_SPAN_US, span * factor);
  const start = t - ((t - v.start) * next) / span;
  return { start, end: start + next };
}

export function panView(v: ViewRange, dt: number): ViewRange {
  return { start: v.start + dt, end: v.end + dt };
}

/** A glide from one range to another, started at `t0` (a `performance.now()` time). */
export interface Glide {
  from: ViewRange;
  to: ViewRange;
  t0: number;
}

/**
 * Where a glide is at `now`: the span changes geometrically and the centre linearly, both eased (cubic out), so a
 * zoom by 1000× looks as even as one by 2×; `done` once ANIMATE_MS have passed (then `view` is `to`).
 */
export function glideAt(g: Glide, now: number): { view: ViewRange; done: boolean } {
  const p = Math.min(1, (now - g.t0) / ANIMATE_MS);
  if (p >= 1) return { view: g.to, done: true };
  const e = 1 - (1 - p) ** 3;
  const fromSpan = g.from.end - g.from.start;
  const toSpan = g.to.end - g.to.start;
  const span = fromSpan * (toSpan / fromSpan) ** e;
  const fromC = g.from.start + fromSpan / 2;
  const toC = g.to.start + toSpan / 2;
  const c = fromC + (toC - fromC) * e;
  return { view: { start: c - span / 2, end: c + span / 2 }, done: false };
}

/**
 * What a held key does over `dt` seconds of a frame: W/S zoom in/out by e^(∓1.8·dt) around the anchor, A/D pan
 * by 1.1 spans per second; null for another key.
 */
export function keyMotion(key: string, span: number, dt: number): { zoom: number } | { pan: number } | null {
  if (key === "w") return { zoom: Math.exp(-dt * 1.8) };
  if (key === "s") return { zoom: Math.exp(dt * 1.8) };
  if (key === "a") return { pan: -span * dt * 1.1 };
  if (key === "d") return { pan: span * dt * 1.1 };
  return null;
}
