/**
 * The Trace view's input: the wheel (Perfetto's model), W/A/S/D held or tapped, F, Escape and /, a drag that pans
 * (or, with Shift or the select mode, draws a range), clicks on events, merged boxes, steps and the track labels,
 * and the hover tooltip. It turns each gesture into an action of the view (traceState.TraceActions).
 */
import { h, replaceChildren } from "../../dom";
import { formatTime } from "../../format";
import { formatCounter, formatOffset } from "./traceData";
import type { TraceElements } from "./traceElements";
import { HEADER_H } from "./traceLayout";
import { hitTest, type Hit } from "./traceRenderer";
import type { TraceActions, TraceState } from "./traceState";
import { KEY_HOLD_MS, keyMotion, plotWidth, type ViewRange, xToTime } from "./traceViewport";

interface PointerState {
  mode: "pending" | "pan" | "select" | "label";
  x: number;
  y: number;
  view: ViewRange;
  scrollTop: number;
  id: number;
  shift: boolean;
}

/** A wheel delta in CSS pixels, whatever unit the browser gave it in (lines: 16 px; pages: `pageSize`). */
export function wheelPixels(e: Pick<WheelEvent, "deltaMode">, delta: number, pageSize: number): number {
  if (e.deltaMode === 1) return delta * 16;
  if (e.deltaMode === 2) return delta * pageSize;
  return delta;
}

/** What the tooltip says of a hit (null: no tooltip); times are offsets from `origin`, the trace's start. */
export function tooltipContent(hit: Hit | null, origin: number): HTMLElement | null {
  if (hit?.kind === "event") {
    return h("div", {}, h("div", { class: "ptp-trace-tip-name" }, hit.name),
      h("div", { class: "ptp-muted" }, `${formatTime(hit.dur)} · at ${formatOffset(hit.start - origin)}`));
  }
  if (hit?.kind === "box") {
    return h("div", {}, h("div", { class: "ptp-trace-tip-name" }, `${hit.count.toLocaleString("en-US")} events`),
      h("div", {}, "mostly ", h("b", {}, hit.name)),
      h("div", { class: "ptp-muted" }, `${formatTime(hit.dur)} span · ${Math.round(hit.busy * 100)}% busy · click to zoom in`));
  }
  if (hit?.kind === "counter") {
    return h("div", {}, h("div", { class: "ptp-trace-tip-name" }, hit.row.key),
      hit.values.map((v) => h("div", {}, `${v.name.slice(hit.row.key.length).trim() || "value"}: ${formatCounter(v.value, v.unit)}`)),
      h("div", { class: "ptp-muted" }, `at ${formatOffset(hit.t - origin)}`));
  }
  if (hit?.kind === "step") {
    return h("div", {}, h("div", { class: "ptp-trace-tip-name" }, `Step ${hit.step.name}`),
      h("div", { class: "ptp-muted" }, `${formatTime(hit.step.dur)} · click to fit`));
  }
  return null;
}

/** Whether a hit is something a click acts on (the pointer cursor). */
function clickable(hit: Hit | null): boolean {
  if (!hit) return false;
  if (hit.kind === "event" || hit.kind === "box" || hit.kind === "step") return true;
  return hit.kind === "label" && (hit.toggle || hit.levels !== null || hit.above);
}

/** What identifies a hit for redrawing the hover (a different key: redraw). */
function hoverKey(hit: Hit | null): string {
  if (!hit) return "null";
  if (hit.kind === "event") return JSON.stringify(["e", hit.id]);
  if (hit.kind === "box") return JSON.stringify(["b", hit.track, hit.depth, hit.start]);
  return JSON.stringify([hit.kind]);
}

export class TraceInput {
  private pointer: PointerState | null = null;
  private mouse: { x: number; y: number } | null = null;
  /** W/A/S/D held, since when */
  private readonly keys = new Map<string, number>();
  private lastFrame = 0;

  constructor(private readonly el: TraceElements, private readonly s: TraceState, private readonly act: TraceActions) {}

  /** The pointer's x over the canvas (null: not over it), the anchor of a keyboard zoom. */
  get mouseX(): number | null {
    return this.mouse?.x ?? null;
  }

  /** Wire the canvas and its scroller (listeners removed with `cleanups`). */
  wire(cleanups: (() => void)[]): void {
    const { canvas, scroller } = this.el;
    const listen = <K extends keyof HTMLElementEventMap>(target: HTMLElement, type: K, fn: (e: HTMLElementEventMap[K]) => void,
                                                         opts?: AddEventListenerOptions): void => {
      target.addEventListener(type, fn, opts);
      cleanups.push(() => { target.removeEventListener(type, fn, opts); });
    };
    listen(scroller, "wheel", (e) => { this.onWheel(e); }, { passive: false });
    listen(scroller, "scroll", () => {
      this.hideTooltip();
      this.act.markDirty();
    });
    listen(scroller, "keydown", (e) => { this.onKeyDown(e); });
    listen(scroller, "keyup", (e) => { this.keys.delete(e.key.toLowerCase()); });
    listen(scroller, "blur", () => { this.keys.clear(); });
    listen(canvas, "pointerdown", (e) => { this.onPointerDown(e); });
    listen(canvas, "pointermove", (e) => { this.onPointerMove(e); });
    listen(canvas, "pointerup", (e) => { this.onPointerUp(e); });
    listen(canvas, "pointercancel", () => {
      this.pointer = null;
      this.act.markDirty();
    });
    listen(canvas, "pointerleave", () => {
      this.mouse = null;
      if (!this.pointer) {
        this.s.hover = null;
        this.hideTooltip();
        this.act.markDirty();
      }
    });
    listen(canvas, "dblclick", (e) => { this.onDoubleClick(e); });
  }

  /** A frame at `now`: the held keys zoom or pan continuously; true while some are held (another frame is due). */
  heldKeys(now: number): boolean {
    const v = this.s.view;
    let held = false;
    if (this.keys.size > 0 && v) {
      const dt = Math.min(0.05, Math.max(0, (now - this.lastFrame) / 1000));
      for (const [key, since] of this.keys) {
        if (now - since < KEY_HOLD_MS) continue;
        const view = this.s.view ?? v;
        const motion = keyMotion(key, view.end - view.start, dt);
        if (motion && "zoom" in motion) this.act.zoomAt(motion.zoom, null);
        else if (motion) this.act.panBy(motion.pan);
      }
      held = true;
    }
    this.lastFrame = now;
    return held;
  }

  private localXY(e: MouseEvent): { x: number; y: number } {
    const r = this.el.canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  /**
   * Perfetto's model: the wheel scrolls the tracks (natively), Ctrl/⌘ + wheel (and a trackpad pinch, which the
   * browser sends as Ctrl + wheel) zooms around the pointer, Shift + wheel and horizontal swipes pan.
   */
  private onWheel(e: WheelEvent): void {
    if (!this.s.view) return;
    const { x } = this.localXY(e);
    const dy = wheelPixels(e, e.deltaY, this.s.height);
    const dx = wheelPixels(e, e.deltaX, this.s.width);
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      this.act.zoomAt(Math.exp(Math.max(-300, Math.min(300, dy)) * 0.004), x);
    } else if (e.shiftKey || Math.abs(dx) > Math.abs(dy)) {
      e.preventDefault();
      this.act.panBy(this.act.pxToUs(e.shiftKey && dy !== 0 ? dy : dx));
    }
    // else: a plain vertical wheel scrolls the tracks (the scroller's own scrolling)
  }

  private onKeyDown(e: KeyboardEvent): void {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const key = e.key.toLowerCase();
    if (key === "w" || key === "s" || key === "a" || key === "d") {
      e.preventDefault();
      if (!e.repeat && !this.keys.has(key)) this.tapKey(key);
    } else if (key === "f") {
      e.preventDefault();
      this.act.zoomToSelected();
    } else if (key === "escape") {
      this.act.clearSelection();
      this.act.clearRange();
    } else if (key === "/") {
      e.preventDefault();
      this.el.searchInput.focus();
    }
  }

  /** A W/A/S/D press: one step at once; held past KEY_HOLD_MS, the frames go on (heldKeys). */
  private tapKey(key: string): void {
    this.keys.set(key, performance.now());
    const span = this.s.view ? this.s.view.end - this.s.view.start : 0;
    if (key === "w") this.act.zoomAt(0.8, null);
    else if (key === "s") this.act.zoomAt(1.25, null);
    else if (key === "a") this.act.panBy(-span * 0.1);
    else this.act.panBy(span * 0.1);
    this.lastFrame = performance.now();
    this.act.markDirty();
  }

  private onPointerDown(e: PointerEvent): void {
    if (e.button !== 0 || !this.s.view) return;
    const { x, y } = this.localXY(e);
    this.el.scroller.focus({ preventScroll: true });
    const inLabels = x < this.s.labelW() && y >= HEADER_H;
    const select = !inLabels && y >= HEADER_H && (e.shiftKey || this.s.mode === "select");
    this.pointer = {
      mode: inLabels ? "label" : select ? "select" : "pending",
      x,
      y,
      view: { ...this.s.view },
      scrollTop: this.el.scroller.scrollTop,
      id: e.pointerId,
      shift: e.shiftKey,
    };
    this.s.anim = null;
    try {
      this.el.canvas.setPointerCapture(e.pointerId);
    } catch {
      // capture is a nicety
    }
    if (select) e.preventDefault();
  }

  private onPointerMove(e: PointerEvent): void {
    const { x, y } = this.localXY(e);
    this.mouse = { x, y };
    const p = this.pointer;
    if (!p) {
      this.updateHover(x, y, e.clientX, e.clientY);
      return;
    }
    const dx = x - p.x;
    const dy = y - p.y;
    if (p.mode === "pending" && Math.hypot(dx, dy) > 4) p.mode = "pan";
    if (p.mode === "pan") {
      this.hideTooltip();
      const span = p.view.end - p.view.start;
      const dt = -(dx * span) / plotWidth({ width: this.s.width, labelW: this.s.labelW() });
      this.act.setView({ start: p.view.start + dt, end: p.view.end + dt });
      this.el.scroller.scrollTop = p.scrollTop - dy;
      this.updateCursor(null);
    } else if (p.mode === "select") {
      this.hideTooltip();
      this.dragRange(p, x, y);
    }
  }

  /** A range drawn from where the drag began to (x, y): its times and the rows it spans. */
  private dragRange(p: PointerState, x: number, y: number): void {
    const lw = this.s.labelW();
    const scene = { width: this.s.width, labelW: lw, view: this.s.view ?? p.view };
    const ta = xToTime(scene, Math.max(lw, Math.min(this.s.width, p.x)));
    const tb = xToTime(scene, Math.max(lw, Math.min(this.s.width, x)));
    const ya = p.y - HEADER_H + p.scrollTop;
    const yb = Math.max(0, y - HEADER_H + this.el.scroller.scrollTop);
    this.s.range = { start: Math.min(ta, tb), end: Math.max(ta, tb), y0: Math.max(0, Math.min(ya, yb)), y1: Math.max(ya, yb) };
    this.act.markDirty();
  }

  private onPointerUp(e: PointerEvent): void {
    const p = this.pointer;
    this.pointer = null;
    try {
      this.el.canvas.releasePointerCapture(e.pointerId);
    } catch {
      // not captured
    }
    if (!p) return;
    const { x, y } = this.localXY(e);
    if (p.mode === "select") {
      if (Math.abs(x - p.x) < 3) this.act.clearRange();
      else this.act.commitRange();
      return;
    }
    if (p.mode === "pan") {
      this.updateCursor(null);
      return;
    }
    const scene = this.act.scene();
    const hit = scene ? hitTest(scene, x, y) : null;
    if (hit) this.click(hit);
  }

  /** A click (not a drag) on what `hit` is. */
  private click(hit: Hit): void {
    if (hit.kind === "label") {
      if (hit.above && hit.row.kind === "track") this.act.showAbove(hit.row.track.id, hit.row.lanes);
      else if (hit.levels && hit.row.kind === "track") this.act.showLevels(hit.row.track.id, hit.levels);
      else if (hit.toggle) this.act.toggleRow(hit.row);
    } else if (hit.kind === "event") {
      this.act.select({ id: hit.id, name: hit.name, start_us: hit.start, dur_us: hit.dur, track: hit.track }, hit.depth);
    } else if (hit.kind === "box") {
      // A box of merged events: zoom until they come apart.
      const pad = Math.max(hit.dur * 0.15, this.act.pxToUs(20));
      this.act.animateTo({ start: hit.start - pad, end: hit.start + hit.dur + pad });
    } else if (hit.kind === "step") {
      this.act.animateTo({ start: hit.step.start - hit.step.dur * 0.02, end: hit.step.start + hit.step.dur * 1.02 });
      this.act.revealStep(hit.step.name);
    } else if (hit.kind === "empty") {
      this.act.clearSelection();
    }
  }

  private onDoubleClick(e: MouseEvent): void {
    const scene = this.act.scene();
    if (!scene) return;
    const { x, y } = this.localXY(e);
    const hit = hitTest(scene, x, y);
    if (hit?.kind === "event") this.act.zoomToEvent(hit.start, hit.dur);
  }

  updateCursor(hit: Hit | null): void {
    const c = this.el.canvas;
    if (this.pointer?.mode === "pan") c.style.cursor = "grabbing";
    else if (this.s.mode === "select") c.style.cursor = "crosshair";
    else if (clickable(hit)) c.style.cursor = "pointer";
    else c.style.cursor = "grab";
  }

  private updateHover(x: number, y: number, clientX: number, clientY: number): void {
    const scene = this.act.scene();
    const hit = scene ? hitTest(scene, x, y) : null;
    const changed = hoverKey(hit) !== hoverKey(this.s.hover);
    this.s.hover = hit;
    this.updateCursor(hit);
    if (changed) this.act.markDirty();
    this.showTooltip(hit, clientX, clientY);
  }

  private showTooltip(hit: Hit | null, clientX: number, clientY: number): void {
    const tip = this.el.tooltip;
    const content = tooltipContent(hit, this.s.bounds?.[0] ?? 0);
    if (!content) {
      this.hideTooltip();
      return;
    }
    replaceChildren(tip, content);
    tip.style.display = "block";
    const vr = this.el.viewport.getBoundingClientRect();
    const tw = tip.offsetWidth;
    const th = tip.offsetHeight;
    let left = clientX - vr.left + 14;
    let top = clientY - vr.top + 16;
    if (left + tw > vr.width - 4) left = Math.max(4, clientX - vr.left - tw - 10);
    if (top + th > vr.height - 4) top = Math.max(4, clientY - vr.top - th - 10);
    tip.style.transform = `translate(${Math.round(left)}px, ${Math.round(top)}px)`;
  }

  hideTooltip(): void {
    this.el.tooltip.style.display = "none";
  }
}
