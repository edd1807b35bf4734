/**
 * The Trace view's painting: the canvas sized to its box (device pixels), one frame per animation frame when
 * something changed (held keys and glides advance there), the scene handed to ./traceRenderer, the readout of the
 * visible range, and the drawing statistics the debug hook reports.
 */
import { formatTime } from "../../format";
import { formatOffset, makePalette } from "./traceData";
import type { TraceElements } from "./traceElements";
import { HEADER_H } from "./traceLayout";
import { draw, type Colours, type Scene } from "./traceRenderer";
import type { TraceActions, TraceState } from "./traceState";
import { glideAt } from "./traceViewport";

function cssVar(style: CSSStyleDeclaration, name: string, fallback: string): string {
  const v = style.getPropertyValue(name).trim();
  return v || fallback;
}

/** The theme's colours, from the page's CSS variables (fallbacks for either theme). */
export function readColours(dark: boolean): Colours {
  const style = getComputedStyle(document.documentElement);
  return {
    bg: cssVar(style, "--ptp-bg", dark ? "#202124" : "#f5f5f5"),
    surface: cssVar(style, "--ptp-surface", dark ? "#2b2c2f" : "#ffffff"),
    surface2: cssVar(style, "--ptp-surface-2", dark ? "#303134" : "#fafafa"),
    border: cssVar(style, "--ptp-border", dark ? "#444548" : "#e0e0e0"),
    fg: cssVar(style, "--ptp-fg", dark ? "#e8eaed" : "#212121"),
    muted: cssVar(style, "--ptp-fg-muted", dark ? "#a9acb1" : "#616161"),
    accent: cssVar(style, "--ptp-accent", dark ? "#ff9f43" : "#f57c00"),
    accentSoft: cssVar(style, "--ptp-accent-soft", "rgba(245, 124, 0, 0.12)"),
    grid: dark ? "rgba(255, 255, 255, 0.07)" : "rgba(0, 0, 0, 0.07)",
    stepShade: dark ? "rgba(255, 255, 255, 0.035)" : "rgba(0, 0, 0, 0.03)",
    textDark: "#1b1b1b",
    textLight: "#f4f4f4",
    counterArea: dark
      ? ["rgba(138, 180, 248, 0.55)", "rgba(129, 201, 149, 0.55)", "rgba(197, 138, 249, 0.5)", "rgba(253, 214, 99, 0.5)"]
      : ["rgba(26, 115, 232, 0.45)", "rgba(30, 142, 62, 0.42)", "rgba(142, 36, 170, 0.35)", "rgba(227, 116, 0, 0.4)"],
    counterLine: dark ? ["#8ab4f8", "#81c995", "#d7aefb", "#fdd663"] : ["#1a73e8", "#1e8e3e", "#7b1fa2", "#e37400"],
    palette: makePalette(dark),
    dark,
  };
}

export interface PainterHooks {
  /** the scene to draw (null: nothing yet) */
  scene(): Scene | null;
  /** a frame at `now` for the held keys; true while some are held */
  heldKeys(now: number): boolean;
  /** the canvas width changed: the window may need more pixels */
  widthChanged(): void;
  aborted(): boolean;
}

export class TracePainter {
  readonly stats = {
    mountedAt: performance.now(),
    firstPaintAt: 0,
    fetches: 0,
    windows: 0,
    lastFetchMs: 0,
    /** main-thread time to take in the last answer (parse into typed arrays, layout, steps) */
    lastAcceptMs: 0,
    frames: 0,
    drawMsTotal: 0,
    lastDraw: { events: 0, boxes: 0, labels: 0, ms: 0, ticks: [] as string[], steps: [] as string[] },
    lastWindow: null as null | { t0: number; t1: number; px_us: number; events: number; boxes: number; width_px: number },
  };
  private dirty = true;
  private raf = 0;

  constructor(private readonly el: TraceElements, private readonly s: TraceState, private readonly act: Pick<TraceActions, "setView">,
    private readonly hooks: PainterHooks) {}

  stop(): void {
    cancelAnimationFrame(this.raf);
  }

  markDirty(): void {
    this.dirty = true;
    if (this.raf === 0) this.raf = requestAnimationFrame((t) => { this.frame(t); });
  }

  /** Size the viewport to the window's height below it and the canvas to the viewport, in device pixels. */
  resize(): void {
    const el = this.el;
    if (window.innerHeight === 0 || !el.viewport.isConnected) return;
    const rect = el.viewport.getBoundingClientRect();
    const docTop = rect.top + window.scrollY;
    const height = Math.max(320, Math.floor(window.innerHeight - docTop - 34));
    el.viewport.style.height = `${height}px`;
    el.side.style.maxHeight = `${height + 26}px`;
    const width = Math.floor(el.scroller.clientWidth);
    if (width <= 0) return;
    const dpr = window.devicePixelRatio || 1;
    const s = this.s;
    if (width !== s.width || height !== s.height || dpr !== s.dpr) {
      const widthChanged = width !== s.width;
      s.width = width;
      s.height = height;
      s.dpr = dpr;
      el.canvas.style.width = `${width}px`;
      el.canvas.style.height = `${height}px`;
      el.canvas.width = Math.round(width * dpr);
      el.canvas.height = Math.round(height * dpr);
      this.updateSpacer();
      if (widthChanged) this.hooks.widthChanged();
    }
    this.markDirty();
  }

  /** The scroller's spacer: as tall as the rows, so the native scrollbar scrolls them. */
  updateSpacer(): void {
    this.el.spacer.style.height = `${Math.max(0, HEADER_H + this.s.layout.height + 8 - this.s.height)}px`;
  }

  updateReadout(): void {
    const v = this.s.view;
    if (!v) return;
    const origin = this.s.bounds?.[0] ?? v.start;
    this.el.readout.textContent = `Showing ${formatOffset(v.start - origin)} to ${formatOffset(v.end - origin)} (${formatTime(v.end - v.start)})`;
  }

  private frame(now: number): void {
    this.raf = 0;
    if (this.hooks.aborted()) return;
    let again = this.hooks.heldKeys(now);
    const a = this.s.anim;
    if (a) {
      const at = glideAt(a, now);
      this.s.view = at.view;
      this.dirty = true;
      if (at.done) {
        this.s.anim = null;
        this.act.setView(a.to);
      } else {
        again = true;
        this.updateReadout();
      }
    }
    if (this.dirty) {
      this.dirty = false;
      this.paint();
    }
    if (again) this.raf = requestAnimationFrame((t) => { this.frame(t); });
  }

  private paint(): void {
    const scene = this.hooks.scene();
    if (!scene) return;
    const g = this.el.canvas.getContext("2d", { alpha: false });
    if (!g) return;
    g.setTransform(this.s.dpr, 0, 0, this.s.dpr, 0, 0);
    const drawn = draw(g, scene);
    this.stats.frames++;
    this.stats.drawMsTotal += drawn.ms;
    this.stats.lastDraw = drawn;
    if (this.s.data && this.stats.firstPaintAt === 0) {
      this.stats.firstPaintAt = performance.now();
      this.el.viewport.dataset["ready"] = "1";
    }
  }
}
