/**
 * The Trace view: the timeline of one span, served in windows at screen resolution
 * (`./trace/window`), drawn on a canvas by ./traceRenderer.
 *
 * Navigation redraws at once from the last answer (transformed to the new view) and asks for the new
 * window debounced (100 ms, at most 300 ms late while the view keeps moving), cancelling stale
 * requests; the last good frame stays while a window loads. Windows are fetched with half a view of
 * margin on each side, so small pans need no request at all.
 *
 * Read-only debug hook (documented in docs/guide/trace.md, used by the browser tests):
 * `window.__ptpTrace = { visibleRange(), selected(), stats(), eventsOnScreen() }` in the plugin frame.
 */
import { ApiError } from "../../api";
import { card } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatTime } from "../../format";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import { loadSources } from "../common/callStack";
import { type Category, CATEGORY_COLORS, highlightCategory, highlightText } from "../common/stepCategories";
import { copyText, inVsCode, showToast } from "../common/ui";
import { flowEnds, makePalette, parseWindow, locate, formatOffset, mergeSteps, formatBytesShort, formatCounter, firstMarkedLane, stepLane, stepOfRange, type Step, type TrackMeta, type WindowData } from "./traceData";
import { detailsPanel, errorPanel, helpOpen, hintPanel, loadingPanel, rangeLoading, rangePanel, rememberHelp, setPanel, type DetailsHooks, type RangeHooks } from "./traceDetails";
import { absoluteUrl, openInPerfetto, type ExportStatus } from "./traceExport";
import { HEADER_H, HOST_LEVELS, buildLayout, laneTop, type Layout, type Row } from "./traceLayout";
import { draw, eventsOnScreen, hitTest, type Colours, type FlowArrow, type Hit, type RangeMark, type Scene } from "./traceRenderer";
import { CriticalPath } from "./traceCriticalPath";
import { toolbar as traceToolbar, type TraceElements, traceElements } from "./traceElements";
import { SearchController } from "./traceSearchController";
import { covers, WindowFetcher, windowQuery, type WindowQuery } from "./traceFetcher";
import { anchorX, type Axis, clampView, type Glide, glideAt, keyMotion, KEY_HOLD_MS, panView, plotWidth, pxToUs, type ViewRange, xToTime, zoomView } from "./traceViewport";
import type { EventBrief, TraceEventResponse, TraceWindowResponse } from "./traceData";
import type { ViewContext } from "../types";
import type { Query } from "../../types";

/** share of the view fetched beyond each edge */

interface Selected {
  id: number;
  name: string;
  track: number | null;
  depth: number | null;
  start: number;
  dur: number;
  details: TraceEventResponse | null;
}


interface PointerState {
  mode: "pending" | "pan" | "select" | "label";
  x: number;
  y: number;
  view: ViewRange;
  scrollTop: number;
  id: number;
  shift: boolean;
}

interface TraceDebugHook {
  visibleRange(): { start: number; end: number; bounds: [number, number] | null } | null;
  selected(): { id: number; name: string; track: number | null; details: boolean } | null;
  stats(): Record<string, unknown>;
  /** events drawn as themselves, in canvas CSS pixels (x, y from the canvas' top-left corner) */
  eventsOnScreen(): ReturnType<typeof eventsOnScreen>;
  /** the box-selected time range, if any */
  selectedRange(): { start: number; end: number; tracks: number[] | null } | null;
  /** the rows of the track tree, y in canvas CSS pixels (negative or past the height when scrolled away) */
  rows(): { kind: string; label: string; track: number | null; y: number; h: number; collapsed: boolean }[];
}

declare global {
  interface Window {
    __ptpTrace?: TraceDebugHook;
  }
}

function cssVar(style: CSSStyleDeclaration, name: string, fallback: string): string {
  const v = style.getPropertyValue(name).trim();
  return v || fallback;
}

function readColours(dark: boolean): Colours {
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

function num(value: string | undefined): number | null {
  if (value === undefined || value.trim() === "") return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

function wheelPixels(e: WheelEvent, delta: number, pageSize: number): number {
  if (e.deltaMode === 1) return delta * 16;
  if (e.deltaMode === 2) return delta * pageSize;
  return delta;
}

class TraceView {
  private readonly el: TraceElements;
  private readonly ids: { run: string; worker: string; span: string };
  private view: ViewRange | null = null;
  private bounds: [number, number] | null = null;
  private data: WindowData | null = null;
  private layout: Layout = { rows: [], height: 0, trackRows: new Map(), hiddenTracks: new Set() };
  private layoutKey = "";
  private tracksMeta: TrackMeta[] = [];
  /** lanes shown of each track that does not show all of them (1: collapsed) */
  private readonly levels = new Map<number, number>();
  /** levels left out above a track's first lane (a spawn job's frames above its steps), see adoptLevels */
  private readonly skips = new Map<number, number>();
  /** a step whose lane to scroll to once a window holds it (after a step-bar click or a step link) */
  private stepToReveal: string | null = null;
  /** after "▴ N levels above": the lane to keep on screen once the window with those levels comes */
  private stepLaneAfterReveal: { track: number; depth: number } | null = null;
  private readonly folded = new Set<string>();
  private steps: Step[] = [];
  private readonly criticalPath: CriticalPath;
  private readonly counterScale = new Map<string, number>();
  private selection: Selected | null = null;
  private arrows: FlowArrow[] = [];
  private hover: Hit | null = null;
  private range: RangeMark | null = null;
  private rangeToken = 0;
  private rangeTracks: number[] | null = null;
  private mode: "pan" | "select" = "pan";
  private allFlows = false;
  private colours: Colours;
  private width = 0;
  private height = 0;
  private dpr = 1;
  private dirty = true;
  private raf = 0;
  private readonly fetcher: WindowFetcher;
  private urlTimer = 0;
  private pointer: PointerState | null = null;
  private mouse: { x: number; y: number } | null = null;
  private readonly keys = new Map<string, number>();
  private lastFrame = 0;
  private anim: Glide | null = null;
  private pendingReveal: { id: number; track: number | null } | null = null;
  /** a search hit to reveal once the first window (and so the view) is known */
  private revealAfterLoad: EventBrief | null = null;
  private detailsToken = 0;
  private readonly search: SearchController;
  private stepsComplete = false;
  /** the step-breakdown category highlighted (URL key `cat`, from the Overview's breakdown); null: none */
  private category: Category | null = null;
  private exportStop: (() => void) | null = null;
  private readonly cleanups: (() => void)[] = [];
  private help = helpOpen();
  private readonly stats = {
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

  constructor(private readonly container: HTMLElement, private readonly ctx: ViewContext) {
    this.ids = { run: ctx.run, worker: ctx.worker, span: ctx.span };
    this.colours = readColours(ctx.theme === "dark");
    const fileUrl = ctx.api.url("trace/file", this.ids);
    this.el = traceElements(fileUrl, ctx.spanInfo.file || "trace.json");
    this.search = new SearchController(
      { input: this.el.searchInput, count: this.el.searchCount, prev: this.el.prevButton, next: this.el.nextButton },
      { api: ctx.api, ids: this.ids, signal: ctx.signal, reveal: (brief) => { this.reveal(brief); },
        leaveBox: () => { this.el.scroller.focus({ preventScroll: true }); } },
    );
    this.criticalPath = new CriticalPath(this.el.pathSelect, this.el.pathSummary, {
      api: ctx.api, ids: this.ids, signal: ctx.signal, view: () => this.view,
      show: (range) => { this.animateTo(range); this.markDirty(); }, redraw: () => { this.markDirty(); },
    });
    this.fetcher = new WindowFetcher({
      get: (query, signal) => ctx.api.get("trace/window", { ...this.ids, ...query }, { signal, timeoutMs: 120_000 }),
      leave: ctx.signal,
      loading: (text) => { this.showLoading(text); },
      answer: (resp, query, elapsedMs) => { this.takeWindow(resp, query, elapsedMs); },
      failed: (err) => { this.showWindowError(err); },
    });
  }

  // ------------------------------------------------------------------------------------------ mount

  mount(): () => void {
    const ctx = this.ctx;
    const toolbar = traceToolbar(this.el, { fit: () => { this.fit(); }, zoom: (factor) => { this.zoomAt(factor, null); } });
    replaceChildren(
      this.container,
      h(
        "div",
        { class: "ptp-trace", testid: "trace-view" },
        toolbar,
        this.el.highlight,
        this.el.notice,
        this.el.body,
      ),
    );
    this.el.body.append(h("div", { class: "ptp-trace-main" }, this.el.viewport, h("div", { class: "ptp-trace-status" }, this.el.readout)), this.el.side);
    this.showHint();
    this.wire();
    ctx.onThemeChange((theme) => {
      this.colours = readColours(theme === "dark");
      this.markDirty();
    });
    ctx.onResize(() => { this.resize(); });
    const onWinResize = (): void => { this.resize(); };
    window.addEventListener("resize", onWinResize);
    this.cleanups.push(() => { window.removeEventListener("resize", onWinResize); });
    const ro = new ResizeObserver(() => { this.resize(); });
    ro.observe(this.el.viewport);
    this.cleanups.push(() => { ro.disconnect(); });

    window.__ptpTrace = this.debugHook();

    // Deep link: a range and/or a search from the URL.
    const linked = readViewUrlState();
    const start = num(linked.start);
    const end = num(linked.end);
    if (start !== null && end !== null && end > start) this.view = { start, end };
    this.showHighlight(highlightCategory(linked.cat));
    this.resize();
    this.requestWindow(true);
    const q = linked.q?.trim();
    if (q) {
      this.el.searchInput.value = q;
      void this.search.run(q, this.view === null ? "first" : "none");
    }
    return () => { this.destroy(); };
  }

  private destroy(): void {
    this.fetcher.stop();
    this.exportStop?.();
    window.clearTimeout(this.urlTimer);
    this.search.stop();
    cancelAnimationFrame(this.raf);
    for (const fn of this.cleanups.splice(0)) fn();
    if (window.__ptpTrace) delete window.__ptpTrace;
    // The range and search belong to this page: a link to another page or span must not carry them.
    writeViewUrlState({ start: undefined, end: undefined, q: undefined, cat: undefined });
  }

  /**
   * Highlight a category of the step breakdown (null: none): the chip says what is highlighted and removes it; the
   * URL keeps it (`cat`), and the next window is asked with it so the server marks the category's events.
   */
  private showHighlight(category: Category | null): void {
    this.category = category;
    writeViewUrlState({ cat: category ?? undefined });
    const chip = this.el.highlight;
    if (category === null) {
      chip.hidden = true;
      replaceChildren(chip);
      return;
    }
    replaceChildren(
      chip,
      h("span", { class: "ptp-chip", testid: "trace-highlight-chip", dataset: { category } },
        h("span", { class: "ptp-swatch", style: { background: CATEGORY_COLORS[category] ?? "#9e9e9e" } }),
        h("span", { testid: "trace-highlight-text" }, highlightText(category)),
        h("button", {
          class: "ptp-chip-remove",
          testid: "trace-highlight-clear",
          attrs: { type: "button", title: "Stop highlighting: show every event in full", "aria-label": `Stop highlighting ${category}` },
          onClick: () => { this.clearHighlight(); },
        }, "✕")),
    );
    chip.hidden = false;
  }

  private clearHighlight(): void {
    this.showHighlight(null);
    for (const track of this.data?.tracks ?? []) {
      for (const lane of track.lanes) {
        if (lane) {
          lane.ehl = null;
          lane.bhl = null;
        }
      }
    }
    this.markDirty();
    this.requestWindow(true);
  }

  private debugHook(): TraceDebugHook {
    return {
      visibleRange: () => (this.view ? { start: this.view.start, end: this.view.end, bounds: this.bounds } : null),
      selected: () =>
        this.selection ? { id: this.selection.id, name: this.selection.name, track: this.selection.track, details: this.selection.details !== null } : null,
      stats: () => ({
        ...this.stats,
        loading: this.fetcher.busy,
        width: this.width,
        height: this.height,
        labelW: this.labelW(),
        firstPaintMs: this.stats.firstPaintAt ? this.stats.firstPaintAt - this.stats.mountedAt : null,
        avgDrawMs: this.stats.frames ? this.stats.drawMsTotal / this.stats.frames : null,
        tracks: this.layout.trackRows.size,
        arrows: this.arrows.length,
        rows: this.layout.rows.length,
        scrollTop: this.el.scroller.scrollTop,
      }),
      eventsOnScreen: () => {
        const scene = this.scene();
        return scene ? eventsOnScreen(scene) : [];
      },
      selectedRange: () => (this.range ? { start: this.range.start, end: this.range.end, tracks: this.rangeTracks } : null),
      rows: () =>
        this.layout.rows.map((r) => ({
          kind: r.kind,
          label: r.kind === "track" ? r.track.label : r.kind === "process" ? r.label : r.key,
          track: r.kind === "track" ? r.track.id : null,
          y: HEADER_H + r.y - this.el.scroller.scrollTop,
          h: r.h,
          collapsed: r.kind === "track" ? r.collapsed : r.kind === "process" ? r.folded : false,
        })),
    };
  }

  // ------------------------------------------------------------------------------------------ wiring

  private wire(): void {
    const { canvas, scroller } = this.el;
    const listen = <K extends keyof HTMLElementEventMap>(target: HTMLElement, type: K, fn: (e: HTMLElementEventMap[K]) => void,
                                                         opts?: AddEventListenerOptions): void => {
      target.addEventListener(type, fn, opts);
      this.cleanups.push(() => { target.removeEventListener(type, fn, opts); });
    };
    listen(scroller, "wheel", (e) => { this.onWheel(e); }, { passive: false });
    listen(scroller, "scroll", () => {
      this.hideTooltip();
      this.markDirty();
    });
    listen(scroller, "keydown", (e) => { this.onKeyDown(e); });
    listen(scroller, "keyup", (e) => { this.keys.delete(e.key.toLowerCase()); });
    listen(scroller, "blur", () => { this.keys.clear(); });
    listen(canvas, "pointerdown", (e) => { this.onPointerDown(e); });
    listen(canvas, "pointermove", (e) => { this.onPointerMove(e); });
    listen(canvas, "pointerup", (e) => { this.onPointerUp(e); });
    listen(canvas, "pointercancel", () => {
      this.pointer = null;
      this.markDirty();
    });
    listen(canvas, "pointerleave", () => {
      this.mouse = null;
      if (!this.pointer) {
        this.hover = null;
        this.hideTooltip();
        this.markDirty();
      }
    });
    listen(canvas, "dblclick", (e) => { this.onDoubleClick(e); });

    listen(this.el.stepSelect, "change", () => {
      const i = Number(this.el.stepSelect.value);
      const s = this.steps[i];
      this.el.stepSelect.value = "";
      if (s) this.animateTo({ start: s.start - s.dur * 0.02, end: s.start + s.dur * 1.02 });
      scroller.focus({ preventScroll: true });
    });
    listen(this.el.pathSelect, "change", () => { void this.criticalPath.show(this.el.pathSelect.value); });
    listen(this.el.selectButton, "click", () => {
      this.mode = this.mode === "pan" ? "select" : "pan";
      this.el.selectButton.setAttribute("aria-pressed", String(this.mode === "select"));
      this.el.selectButton.classList.toggle("ptp-button-on", this.mode === "select");
      this.updateCursor(null);
    });
    listen(this.el.zoomSelection, "click", () => { this.zoomToRange(); });
    listen(this.el.flowsToggle, "change", () => {
      this.allFlows = this.el.flowsToggle.checked;
      if (this.allFlows && this.data) locate(this.data, -1);
      this.markDirty();
    });
    this.search.wire(this.cleanups);
    listen(this.el.perfetto, "click", () => { this.openPerfetto(); });
    listen(this.el.helpButton, "click", () => { this.setHelp(!this.help); });
    listen(this.el.download, "click", () => {
      if (inVsCode()) this.showFallback("download", "If nothing is downloaded (VS Code may block downloads from this panel), copy the file's link and open it in a browser:");
    });
  }

  // ------------------------------------------------------------------------------------------ sizing

  private labelW(): number {
    return Math.round(Math.min(260, Math.max(150, this.width * 0.17)));
  }

  private resize(): void {
    if (window.innerHeight === 0 || !this.el.viewport.isConnected) return;
    const rect = this.el.viewport.getBoundingClientRect();
    const docTop = rect.top + window.scrollY;
    const height = Math.max(320, Math.floor(window.innerHeight - docTop - 34));
    this.el.viewport.style.height = `${height}px`;
    this.el.side.style.maxHeight = `${height + 26}px`;
    const width = Math.floor(this.el.scroller.clientWidth);
    if (width <= 0) return;
    const dpr = window.devicePixelRatio || 1;
    if (width !== this.width || height !== this.height || dpr !== this.dpr) {
      const widthChanged = width !== this.width;
      this.width = width;
      this.height = height;
      this.dpr = dpr;
      const c = this.el.canvas;
      c.style.width = `${width}px`;
      c.style.height = `${height}px`;
      c.width = Math.round(width * dpr);
      c.height = Math.round(height * dpr);
      this.updateSpacer();
      if (widthChanged) this.scheduleFetch();
    }
    this.markDirty();
  }

  private updateSpacer(): void {
    this.el.spacer.style.height = `${Math.max(0, HEADER_H + this.layout.height + 8 - this.height)}px`;
  }

  // ------------------------------------------------------------------------------------------ fetching

  /** The `levels=` parameter: each limited track's lane count, folded processes' tracks at one. */
  private levelsKey(): string {
    const limits = new Map(this.levels);
    for (const id of this.layout.hiddenTracks) limits.set(id, 1);
    return [...limits].sort((a, b) => a[0] - b[0]).map(([id, n]) => `${id}:${n}`).join(",");
  }

  /** The `skip=` parameter: the levels left out above each track's first lane (see adoptLevels). */
  private skipKey(): string {
    return [...this.skips].filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]).map(([id, n]) => `${id}:${n}`).join(",");
  }

  /** What a window's lanes depend on: the levels and the skipped levels asked for. */
  private lanesKey(): string {
    return `${this.levelsKey()}|${this.skipKey()}`;
  }

  private covers(data: WindowData, v: ViewRange): boolean {
    return covers(data, v, { width: this.width, labelW: this.labelW() }, this.lanesKey(), this.category);
  }

  private scheduleFetch(): void {
    this.fetcher.schedule(() => { this.requestWindow(false); });
  }

  /** Ask for the window of the view (unless the one in hand covers it, or `force`). */
  private requestWindow(force: boolean): void {
    if (this.width <= 0) return;
    const v = this.view;
    if (!force && this.data && v && this.covers(this.data, v)) return;
    this.stats.fetches++;
    this.fetcher.fetch(windowQuery({
      view: v, bounds: this.bounds, plotW: plotWidth({ width: this.width, labelW: this.labelW() }),
      levelsKey: this.levelsKey(), skipKey: this.skipKey(), first: !this.data, hostLevels: HOST_LEVELS,
      category: this.category,
    }));
  }

  /** The newest window's answer (the fetcher drops stale ones): parsed, then taken in. */
  private takeWindow(resp: TraceWindowResponse, query: WindowQuery, elapsedMs: number): void {
    this.stats.lastFetchMs = elapsedMs;
    this.stats.windows++;
    this.el.error.hidden = true;
    const t = performance.now();
    const data = parseWindow(resp, `${query.levels ?? ""}|${query.skip ?? ""}`, query.category ?? null);
    this.stats.lastWindow = { t0: data.t0, t1: data.t1, px_us: data.pxUs, events: data.eventCount, boxes: data.boxCount, width_px: query.width_px ?? 0 };
    this.accept(data);
    this.stats.lastAcceptMs = performance.now() - t;
  }

  private showLoading(text: string | null | undefined): void {
    if (text === null) {
      this.el.loading.hidden = true;
      this.setLoadingText("Loading…");
      return;
    }
    if (text !== undefined) this.setLoadingText(text);
    this.el.loading.hidden = false;
  }

  private setLoadingText(text: string): void {
    const label = this.el.loading.querySelector("[data-testid='trace-loading-text']");
    if (label) label.textContent = text;
  }

  private showWindowError(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    if (!this.data) {
      const title = err instanceof ApiError && err.status === 409 ? "Still loading" : "Could not load the timeline";
      replaceChildren(this.container, card({ class: err instanceof ApiError && err.status === 409 ? "ptp-warn-card" : "ptp-error-card", testid: "error-card", title }, h("p", { class: "ptp-break" }, message)));
      return;
    }
    replaceChildren(this.el.error, h("span", {}, `Could not load this part of the timeline: ${message}`), " ",
      h("button", { class: "ptp-link-button", attrs: { type: "button" }, onClick: () => { this.requestWindow(true); } }, "Retry"));
    this.el.error.hidden = false;
  }

  private accept(data: WindowData): void {
    const firstAnswer = this.data === null;
    this.data = data;
    this.bounds = data.bounds;
    this.takeSteps(data.steps, firstAnswer && this.view === null);
    for (const c of data.counters) {
      if (c.unit === "fraction") continue;
      const key = c.name.replace(/ (allocated|reserved)$/, "");
      this.counterScale.set(key, Math.max(this.counterScale.get(key) ?? 0, c.max));
    }
    const meta = data.tracks.map((t) => ({ id: t.id, kind: t.kind, label: t.label, process: t.process, depths: t.depths, skipped: t.skipped }));
    const key = JSON.stringify([meta, data.counters.map((c) => c.name)]);
    if (key !== this.layoutKey) {
      this.layoutKey = key;
      this.tracksMeta = meta;
      if (firstAnswer) this.adoptLevels(data);
      this.relayout();
    }
    if (firstAnswer && this.view) {
      // A highlight link (a breakdown category): the first lane of marked events on screen; a link to a step (the
      // Overview's step bar): its thread's step lane.
      const marked = this.category !== null ? firstMarkedLane(data) : null;
      const step = marked ? null : stepOfRange(data.steps, this.view.start, this.view.end);
      if (marked) this.scrollToLane(marked.track, marked.depth);
      if (step) this.stepToReveal = step.name;
    }
    if (this.stepToReveal !== null) {
      const at = stepLane(data, this.stepToReveal);
      if (at) {
        this.stepToReveal = null;
        this.scrollToLane(at.track, at.depth);
      }
    }
    const keep = this.stepLaneAfterReveal;
    if (keep && data.trackById.get(keep.track)?.skipped === 0) {
      this.stepLaneAfterReveal = null;
      this.scrollToLane(keep.track, keep.depth);
    }
    if (!this.view) this.view = { start: data.bounds[0], end: data.bounds[1] };
    if (this.revealAfterLoad) {
      const brief = this.revealAfterLoad;
      this.revealAfterLoad = null;
      this.reveal(brief);
    }
    if (firstAnswer && !this.stepsComplete) this.fetchStepList();
    if (this.allFlows) locate(data, -1);
    if (this.selection) {
      const loc = locate(data, this.selection.id);
      if (loc) this.selection.depth = loc.depth;
      this.arrows = this.selectionArrows();
    }
    if (this.pendingReveal) {
      const loc = locate(data, this.pendingReveal.id);
      if (loc) {
        this.scrollToLane(loc.track, loc.depth);
        this.pendingReveal = null;
      }
    }
    this.updateReadout();
    this.markDirty();
    // The view may have moved on while this window was loading.
    if (!this.covers(data, this.view)) this.scheduleFetch();
  }

  /**
   * Deep host threads (long Python stacks) open a few levels deep: the first window was asked with
   * `host_levels`, so the server already sent those lanes only; take them as the tracks' levels.
   */
  private adoptLevels(data: WindowData): void {
    for (const t of data.tracks) if (t.shown < t.depths && t.shown > 1) this.levels.set(t.id, t.shown);
    // A spawn job's main thread opens at its steps: the server left out the frames above (skipped); keep them out.
    for (const t of data.tracks) if (t.skipped > 0) this.skips.set(t.id, t.skipped);
    data.levelsKey = this.lanesKey();
  }

  /** Take in the steps of an answer (each step once: see traceData.mergeSteps) and refill the step pickers. */
  private takeSteps(steps: Step[], complete: boolean): void {
    if (complete) this.stepsComplete = true;
    const merged = mergeSteps(this.steps, steps);
    if (merged.length === this.steps.length && this.el.stepSelect.options.length > 0) return; // nothing new
    this.steps = merged;
    this.fillStepPickers();
  }

  private fillStepPickers(): void {
    const select = this.el.stepSelect;
    replaceChildren(
      select,
      h("option", { attrs: { value: "" } }, this.steps.length ? "Fit step…" : "No steps"),
      this.steps.map((s, i) => h("option", { attrs: { value: String(i) } }, `Step ${s.name} · ${formatTime(s.dur)}`)),
    );
    select.value = "";
    select.disabled = this.steps.length === 0;
    // A trace without ProfilerStep#N shows one step "0" over the whole trace: the picker offers its annotations
    this.criticalPath.offer(this.steps.map((s) => s.name));
  }

  /** A deep link opened a part of the trace: ask once, coarsely, for the whole trace's steps. */
  private fetchStepList(): void {
    this.stepsComplete = true;
    const collapsed = this.tracksMeta.map((t) => t.id).join(",");
    this.ctx.api
      .get("trace/window", { ...this.ids, width_px: 16, collapsed }, { signal: this.ctx.signal, timeoutMs: 120_000 })
      .then((resp) => {
        const steps = (Array.isArray(resp.steps) ? resp.steps : []).map(([name, t, d]) => ({ name, start: resp.t0 + t, dur: d }));
        this.takeSteps(steps, true);
        this.markDirty();
      })
      .catch(() => undefined);
  }

  private relayout(): void {
    const counters = this.data?.counters.map((c) => ({ name: c.name, unit: c.unit })) ?? [];
    this.layout = buildLayout(this.tracksMeta, counters, this.levels, this.folded);
    this.updateSpacer();
    this.markDirty();
  }

  // ------------------------------------------------------------------------------------------ view changes

  private setView(v: ViewRange): void {
    this.view = clampView(v, this.bounds);
    this.updateReadout();
    this.markDirty();
    this.scheduleFetch();
    window.clearTimeout(this.urlTimer);
    this.urlTimer = window.setTimeout(() => {
      if (this.view && !this.ctx.signal.aborted) writeViewUrlState({ start: this.view.start.toFixed(3), end: this.view.end.toFixed(3) });
    }, 350);
  }

  private animateTo(target: ViewRange): void {
    if (!this.view) {
      this.setView(target);
      return;
    }
    this.anim = { from: { ...this.view }, to: clampView(target, this.bounds), t0: performance.now() };
    this.markDirty();
  }

  private fit(): void {
    if (this.bounds) this.animateTo({ start: this.bounds[0], end: this.bounds[1] });
  }

  /** The time axis of the current view (null before the first window). */
  private axis(): Axis | null {
    return this.view ? { width: this.width, labelW: this.labelW(), view: this.view } : null;
  }

  private zoomAt(factor: number, x: number | null): void {
    const axis = this.axis();
    if (!axis) return;
    this.anim = null;
    this.setView(zoomView(axis, factor, anchorX(axis, x, this.mouse?.x ?? null)));
  }

  private panBy(dt: number): void {
    if (!this.view) return;
    this.anim = null;
    this.setView(panView(this.view, dt));
  }

  private pxToUs(px: number): number {
    const axis = this.axis();
    return axis ? pxToUs(axis, px) : 0;
  }

  // ------------------------------------------------------------------------------------------ input

  private localXY(e: MouseEvent): { x: number; y: number } {
    const r = this.el.canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  /**
   * Perfetto's model: the wheel scrolls the tracks (natively), Ctrl/⌘ + wheel (and a trackpad pinch, which the
   * browser sends as Ctrl + wheel) zooms around the pointer, Shift + wheel and horizontal swipes pan.
   */
  private onWheel(e: WheelEvent): void {
    if (!this.view) return;
    const { x } = this.localXY(e);
    const dy = wheelPixels(e, e.deltaY, this.height);
    const dx = wheelPixels(e, e.deltaX, this.width);
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      this.zoomAt(Math.exp(Math.max(-300, Math.min(300, dy)) * 0.004), x);
    } else if (e.shiftKey || Math.abs(dx) > Math.abs(dy)) {
      e.preventDefault();
      this.panBy(this.pxToUs(e.shiftKey && dy !== 0 ? dy : dx));
    }
    // else: a plain vertical wheel scrolls the tracks (the scroller's own scrolling)
  }

  private onKeyDown(e: KeyboardEvent): void {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const key = e.key.toLowerCase();
    if (key === "w" || key === "s" || key === "a" || key === "d") {
      e.preventDefault();
      if (!e.repeat && !this.keys.has(key)) {
        this.keys.set(key, performance.now());
        const span = this.view ? this.view.end - this.view.start : 0;
        if (key === "w") this.zoomAt(0.8, null);
        else if (key === "s") this.zoomAt(1.25, null);
        else if (key === "a") this.panBy(-span * 0.1);
        else this.panBy(span * 0.1);
        this.lastFrame = performance.now();
        this.markDirty();
      }
    } else if (key === "f") {
      e.preventDefault();
      this.zoomToSelected();
    } else if (key === "escape") {
      this.clearSelection();
      this.clearRange();
    } else if (key === "/") {
      e.preventDefault();
      this.el.searchInput.focus();
    }
  }

  private onPointerDown(e: PointerEvent): void {
    if (e.button !== 0 || !this.view) return;
    const { x, y } = this.localXY(e);
    this.el.scroller.focus({ preventScroll: true });
    const inLabels = x < this.labelW() && y >= HEADER_H;
    const select = !inLabels && y >= HEADER_H && (e.shiftKey || this.mode === "select");
    this.pointer = {
      mode: inLabels ? "label" : select ? "select" : "pending",
      x,
      y,
      view: { ...this.view },
      scrollTop: this.el.scroller.scrollTop,
      id: e.pointerId,
      shift: e.shiftKey,
    };
    this.anim = null;
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
      const dt = -(dx * span) / plotWidth({ width: this.width, labelW: this.labelW() });
      this.setView({ start: p.view.start + dt, end: p.view.end + dt });
      this.el.scroller.scrollTop = p.scrollTop - dy;
      this.updateCursor(null);
    } else if (p.mode === "select") {
      this.hideTooltip();
      const scene = { width: this.width, labelW: this.labelW(), view: this.view ?? p.view };
      const lw = this.labelW();
      const ta = xToTime(scene, Math.max(lw, Math.min(this.width, p.x)));
      const tb = xToTime(scene, Math.max(lw, Math.min(this.width, x)));
      const st = this.el.scroller.scrollTop;
      const ya = p.y - HEADER_H + p.scrollTop;
      const yb = Math.max(0, y - HEADER_H + st);
      this.range = { start: Math.min(ta, tb), end: Math.max(ta, tb), y0: Math.max(0, Math.min(ya, yb)), y1: Math.max(ya, yb) };
      this.markDirty();
    }
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
      if (Math.abs(x - p.x) < 3) {
        this.clearRange();
      } else {
        this.commitRange();
      }
      return;
    }
    if (p.mode === "pan") {
      this.updateCursor(null);
      return;
    }
    const scene = this.scene();
    if (!scene) return;
    const hit = hitTest(scene, x, y);
    if (!hit) return;
    if (hit.kind === "label") {
      if (hit.above && hit.row.kind === "track") this.showAbove(hit.row.track.id, hit.row.lanes);
      else if (hit.levels && hit.row.kind === "track") this.showLevels(hit.row.track.id, hit.levels);
      else if (hit.toggle) this.toggleRow(hit.row);
    } else if (hit.kind === "event") {
      this.select({ id: hit.id, name: hit.name, start_us: hit.start, dur_us: hit.dur, track: hit.track }, hit.depth);
    } else if (hit.kind === "box") {
      // A box of merged events: zoom until they come apart.
      const pad = Math.max(hit.dur * 0.15, this.pxToUs(20));
      this.animateTo({ start: hit.start - pad, end: hit.start + hit.dur + pad });
    } else if (hit.kind === "step") {
      this.animateTo({ start: hit.step.start - hit.step.dur * 0.02, end: hit.step.start + hit.step.dur * 1.02 });
      this.revealStep(hit.step.name);
    } else if (hit.kind === "empty") {
      this.clearSelection();
    }
  }

  private onDoubleClick(e: MouseEvent): void {
    const scene = this.scene();
    if (!scene) return;
    const { x, y } = this.localXY(e);
    const hit = hitTest(scene, x, y);
    if (hit?.kind === "event") this.zoomToEvent(hit.start, hit.dur);
  }

  private toggleRow(row: Row): void {
    if (row.kind === "process") {
      if (this.folded.has(row.key)) this.folded.delete(row.key);
      else this.folded.add(row.key);
    } else if (row.kind === "track") {
      if (row.lanes > 1) this.levels.set(row.track.id, 1);
      else this.levels.delete(row.track.id);
    } else {
      return;
    }
    this.relayout();
    this.requestWindow(true);
  }

  /** "▴ N levels above" of a thread opened at its steps: the frames above come back, the lanes shown stay. */
  private showAbove(track: number, lanes: number): void {
    const skipped = this.skips.get(track) ?? 0;
    this.skips.delete(track);
    if (this.levels.has(track)) this.levels.set(track, lanes + skipped);
    // the new window's track has the levels above: keep the step's lane, which was the first, on screen
    this.stepLaneAfterReveal = { track, depth: skipped };
    this.requestWindow(true);
  }

  /** The expand control of a deep thread: every level ("more"), or back to the first HOST_LEVELS ("fewer"). */
  private showLevels(track: number, levels: "more" | "fewer"): void {
    if (levels === "more") this.levels.delete(track);
    else this.levels.set(track, HOST_LEVELS);
    this.relayout();
    this.requestWindow(true);
  }

  private updateCursor(hit: Hit | null): void {
    const c = this.el.canvas;
    if (this.pointer?.mode === "pan") c.style.cursor = "grabbing";
    else if (this.mode === "select") c.style.cursor = "crosshair";
    else if (hit && (hit.kind === "event" || hit.kind === "box" || hit.kind === "step" || (hit.kind === "label" && (hit.toggle || hit.levels !== null || hit.above)))) c.style.cursor = "pointer";
    else c.style.cursor = "grab";
  }

  private updateHover(x: number, y: number, clientX: number, clientY: number): void {
    const scene = this.scene();
    const hit = scene ? hitTest(scene, x, y) : null;
    const changed = JSON.stringify(this.hoverKey(hit)) !== JSON.stringify(this.hoverKey(this.hover));
    this.hover = hit;
    this.updateCursor(hit);
    if (changed) this.markDirty();
    this.showTooltip(hit, clientX, clientY);
  }

  private hoverKey(hit: Hit | null): unknown {
    if (!hit) return null;
    if (hit.kind === "event") return ["e", hit.id];
    if (hit.kind === "box") return ["b", hit.track, hit.depth, hit.start];
    return [hit.kind];
  }

  private showTooltip(hit: Hit | null, clientX: number, clientY: number): void {
    const tip = this.el.tooltip;
    const origin = this.bounds?.[0] ?? 0;
    let content: HTMLElement | null = null;
    if (hit?.kind === "event") {
      content = h("div", {}, h("div", { class: "ptp-trace-tip-name" }, hit.name),
        h("div", { class: "ptp-muted" }, `${formatTime(hit.dur)} · at ${formatOffset(hit.start - origin)}`));
    } else if (hit?.kind === "box") {
      content = h("div", {}, h("div", { class: "ptp-trace-tip-name" }, `${hit.count.toLocaleString("en-US")} events`),
        h("div", {}, "mostly ", h("b", {}, hit.name)),
        h("div", { class: "ptp-muted" }, `${formatTime(hit.dur)} span · ${Math.round(hit.busy * 100)}% busy · click to zoom in`));
    } else if (hit?.kind === "counter") {
      content = h("div", {}, h("div", { class: "ptp-trace-tip-name" }, hit.row.key),
        hit.values.map((v) => h("div", {}, `${v.name.slice(hit.row.key.length).trim() || "value"}: ${formatCounter(v.value, v.unit)}`)),
        h("div", { class: "ptp-muted" }, `at ${formatOffset(hit.t - origin)}`));
    } else if (hit?.kind === "step") {
      content = h("div", {}, h("div", { class: "ptp-trace-tip-name" }, `Step ${hit.step.name}`),
        h("div", { class: "ptp-muted" }, `${formatTime(hit.step.dur)} · click to fit`));
    }
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

  private hideTooltip(): void {
    this.el.tooltip.style.display = "none";
  }

  // ------------------------------------------------------------------------------------------ side panel

  /** With nothing selected, the side shows the keyboard help, unless the user closed it. */
  private showHint(): void {
    setPanel(this.el.details, this.help ? hintPanel(() => { this.setHelp(false); }) : null);
    this.el.helpButton.setAttribute("aria-pressed", String(this.help));
    this.updateSide();
  }

  private setHelp(open: boolean): void {
    this.help = open;
    rememberHelp(open);
    if (this.selection) this.el.helpButton.setAttribute("aria-pressed", String(open));
    else this.showHint();
  }

  /** An empty side column is removed, so the timeline takes the width. */
  private updateSide(): void {
    const empty = this.el.details.hidden && this.el.rangePanel.hidden;
    if (this.el.side.hidden === empty) return;
    this.el.side.hidden = empty;
    this.el.body.classList.toggle("ptp-trace-body-wide", empty);
    this.resize();
  }

  // ------------------------------------------------------------------------------------------ selection

  private select(brief: EventBrief, depth: number | null = null): void {
    const token = ++this.detailsToken;
    this.selection = { id: brief.id, name: brief.name, track: brief.track, depth, start: brief.start_us, dur: brief.dur_us, details: null };
    this.arrows = this.selectionArrows();
    this.markDirty();
    setPanel(this.el.details, loadingPanel(brief.name));
    this.updateSide();
    this.ctx.api
      .get("trace/event", { ...this.ids, id: brief.id }, { signal: this.ctx.signal })
      .then((ev) => {
        if (token !== this.detailsToken || !this.selection) return;
        this.selection.details = ev;
        this.selection.track = ev.track;
        this.selection.start = ev.start_us;
        this.selection.dur = ev.dur_us;
        this.arrows = this.selectionArrows();
        setPanel(this.el.details, detailsPanel(ev, this.detailsHooks()));
        this.markDirty();
      })
      .catch((err: unknown) => {
        if (token !== this.detailsToken || this.ctx.signal.aborted) return;
        setPanel(this.el.details, errorPanel(err instanceof Error ? err.message : String(err)));
      });
  }

  private clearSelection(): void {
    if (!this.selection) return;
    this.detailsToken++;
    this.selection = null;
    this.arrows = [];
    this.showHint();
    this.markDirty();
  }

  private detailsHooks(): DetailsHooks {
    return {
      traceStart: this.bounds?.[0] ?? 0,
      trackLabel: (id) => (id === null ? "—" : (this.tracksMeta.find((t) => t.id === id)?.label ?? `track ${id}`)),
      reveal: (b) => { this.reveal(b); },
      zoomToSelected: () => { this.zoomToSelected(); },
    };
  }

  /** Flow arrows to and from the selected event: the window's flows, else the details' partners. */
  private selectionArrows(): FlowArrow[] {
    const sel = this.selection;
    if (!sel) return [];
    const data = this.data;
    const depthOf = (id: number): number | null => (data ? (locate(data, id)?.depth ?? null) : null);
    const out: FlowArrow[] = [];
    const seen = new Set<string>();
    const add = (src: number, srcTrack: number | null, srcT: number, dst: number, dstTrack: number | null, dstT: number): void => {
      const key = `${src}>${dst}`;
      if (seen.has(key) || srcTrack === null || dstTrack === null) return;
      seen.add(key);
      out.push({ from: { track: srcTrack, depth: src === sel.id ? sel.depth : depthOf(src), t: srcT },
                 to: { track: dstTrack, depth: dst === sel.id ? sel.depth : depthOf(dst), t: dstT } });
    };
    if (data) {
      for (const flow of data.flows) {
        const f = flowEnds(flow);
        if (f.srcId === sel.id || f.dstId === sel.id) add(f.srcId, f.srcTrack, data.t0 + f.srcT, f.dstId, f.dstTrack, data.t0 + f.dstT);
      }
    }
    const d = sel.details;
    if (d) {
      if (d.launched_by) add(d.launched_by.id, d.launched_by.track, d.launched_by.start_us, d.id, d.track, d.start_us);
      for (const k of d.launched ?? []) add(d.id, d.track, d.start_us, k.id, k.track, k.start_us);
    }
    return out;
  }

  /** Select an event and bring it into view (zooming in when it would be too thin to see). */
  private reveal(brief: EventBrief): void {
    if (!this.view || !this.data) {
      this.revealAfterLoad = brief;
      this.select(brief);
      return;
    }
    if (brief.track !== null) {
      const meta = this.tracksMeta.find((t) => t.id === brief.track);
      let changed = false;
      if (meta && this.folded.has(meta.process)) {
        this.folded.delete(meta.process);
        changed = true;
      }
      if (meta && this.levels.has(meta.id)) {
        this.levels.delete(meta.id);
        changed = true;
      }
      if (changed) this.relayout();
    }
    const loc = locate(this.data, brief.id);
    this.select(brief, loc?.depth ?? null);
    this.pendingReveal = { id: brief.id, track: brief.track };
    const v = this.view;
    const span = v.end - v.start;
    const pxPerUs = plotWidth({ width: this.width, labelW: this.labelW() }) / span;
    let target: ViewRange = v;
    if (brief.dur_us * pxPerUs < 4) {
      const next = Math.max(brief.dur_us * 12, 20);
      const c = brief.start_us + brief.dur_us / 2;
      target = { start: c - next / 2, end: c + next / 2 };
    } else if (brief.dur_us > span * 0.9) {
      target = { start: brief.start_us - brief.dur_us * 0.1, end: brief.start_us + brief.dur_us * 1.1 };
    } else if (brief.start_us < v.start || brief.start_us + brief.dur_us > v.end) {
      const c = brief.start_us + brief.dur_us / 2;
      target = { start: c - span / 2, end: c + span / 2 };
    }
    if (target !== v) this.animateTo(target);
    else this.requestWindow(false);
    if (brief.track !== null) this.scrollToLane(brief.track, loc?.depth ?? 0, loc === null);
    if (loc) this.pendingReveal = null;
  }

  /** Scroll to the lane of step `name` (its thread), now if the window has it, else when the next one comes. */
  private revealStep(name: string): void {
    const at = this.data ? stepLane(this.data, name) : null;
    if (at) this.scrollToLane(at.track, at.depth);
    this.stepToReveal = at ? null : name;
  }

  private scrollToLane(track: number, depth: number, rough = false): void {
    const row = this.layout.trackRows.get(track);
    if (!row) return;
    const y = laneTop(row, depth);
    const sc = this.el.scroller;
    const visible = this.height - HEADER_H;
    if (y < sc.scrollTop + 4 || y + 20 > sc.scrollTop + visible - 4) {
      sc.scrollTop = Math.max(0, (rough ? row.y : y) - visible / 3);
    }
  }

  private zoomToEvent(start: number, dur: number): void {
    const pad = Math.max(dur * 0.12, 0.05);
    this.animateTo({ start: start - pad, end: start + dur + pad });
  }

  private zoomToSelected(): void {
    if (this.selection) this.zoomToEvent(this.selection.start, this.selection.dur);
  }

  // ------------------------------------------------------------------------------------------ range

  private commitRange(): void {
    const r = this.range;
    if (!r) return;
    const tracks = new Set<number>();
    let all = r.y0 === null || r.y1 === null;
    if (!all) {
      for (const row of this.layout.rows) {
        if (row.y + row.h <= (r.y0 ?? 0) || row.y >= (r.y1 ?? 0)) continue;
        if (row.kind === "track") tracks.add(row.track.id);
        else if (row.kind === "process") for (const id of row.trackIds) if (row.folded) tracks.add(id);
      }
      if (tracks.size === 0 || tracks.size >= this.tracksMeta.length) all = true;
    }
    if (all) this.range = { ...r, y0: null, y1: null };
    this.rangeTracks = all ? null : [...tracks].sort((a, b) => a - b);
    this.el.zoomSelection.disabled = false;
    const token = ++this.rangeToken;
    const scope = all ? "all tracks" : `${tracks.size} track${tracks.size === 1 ? "" : "s"}`;
    const hooks: RangeHooks = {
      traceStart: this.bounds?.[0] ?? 0,
      zoom: () => { this.zoomToRange(); },
      clear: () => { this.clearRange(); },
      search: (name) => {
        this.el.searchInput.value = name;
        void this.search.run(name, "first");
      },
      scope,
    };
    setPanel(this.el.rangePanel, rangeLoading(r.start, r.end, hooks));
    this.updateSide();
    const params: Query<"trace/range"> = { ...this.ids, start_us: Number(r.start.toFixed(3)), end_us: Number(r.end.toFixed(3)) };
    if (this.rangeTracks) params.tracks = this.rangeTracks.join(",");
    this.ctx.api
      .get("trace/range", params, { signal: this.ctx.signal, timeoutMs: 120_000 })
      .then((resp) => {
        if (token !== this.rangeToken) return;
        setPanel(this.el.rangePanel, rangePanel(resp, hooks));
      })
      .catch((err: unknown) => {
        if (token !== this.rangeToken || this.ctx.signal.aborted) return;
        setPanel(this.el.rangePanel, errorPanel(err instanceof Error ? err.message : String(err)));
      });
    this.markDirty();
  }

  private clearRange(): void {
    this.rangeToken++;
    this.range = null;
    this.rangeTracks = null;
    this.el.zoomSelection.disabled = true;
    setPanel(this.el.rangePanel, null);
    this.updateSide();
    this.markDirty();
  }

  private zoomToRange(): void {
    const r = this.range;
    if (!r) return;
    const pad = (r.end - r.start) * 0.03;
    this.animateTo({ start: r.start - pad, end: r.end + pad });
  }

  // ------------------------------------------------------------------------------------------ export

  private showNotice(kind: "info" | "error", ...children: (Node | string)[]): void {
    const n = this.el.notice;
    replaceChildren(
      n,
      h("div", { class: "ptp-trace-notice-body" }, ...children),
      h("button", { class: "ptp-link-button", testid: "trace-notice-close", attrs: { type: "button", "aria-label": "Dismiss" }, onClick: () => { n.hidden = true; } }, "Dismiss"),
    );
    n.dataset["kind"] = kind;
    n.hidden = false;
  }

  private showFallback(testid: string, message: string): void {
    const url = absoluteUrl(this.ctx.api.url("trace/file", this.ids));
    const link = h("input", { class: "ptp-trace-file-input ptp-mono", testid: "trace-file-link", attrs: { type: "text", readonly: true, "aria-label": "Direct link to the trace file" } });
    link.value = url;
    link.addEventListener("focus", () => { link.select(); });
    this.showNotice(
      "info",
      h("span", { testid }, message),
      h(
        "div",
        { class: "ptp-trace-fallback" },
        link,
        h("button", {
          class: "ptp-button ptp-button-small",
          testid: "trace-copy-link",
          attrs: { type: "button" },
          onClick: () => {
            link.select();
            void copyText(url).then((ok) => { showToast(ok ? "Copied the link to the trace file" : "Copying is blocked here: select the link and press Ctrl+C", ok ? "ok" : "error"); });
          },
        }, "Copy link"),
      ),
    );
  }

  private openPerfetto(): void {
    this.exportStop?.();
    const file = this.ctx.spanInfo.file || "trace.json";
    this.exportStop = openInPerfetto({
      fileUrl: this.ctx.api.url("trace/file", this.ids),
      fileName: file,
      title: `${this.ctx.run} · ${this.ctx.worker} · span ${this.ctx.span}`,
      signal: this.ctx.signal,
      onStatus: (s: ExportStatus) => {
        if (s.state === "blocked") {
          this.showFallback(
            "perfetto-blocked",
            `Perfetto could not be opened: this page may not open new windows (as inside VS Code). ${s.detail} ` +
              "Download the trace, or copy its link and open it in a browser, then load it at ui.perfetto.dev (Open trace file).",
          );
        } else if (s.state === "waiting") {
          this.showNotice("info", h("span", { testid: "perfetto-waiting" }, "Waiting for Perfetto to open…"));
        } else if (s.state === "sending") {
          this.showNotice("info", h("span", { testid: "perfetto-sending" }, `Sending ${formatBytesShort(this.ctx.spanInfo.size_bytes)} to Perfetto…`));
        } else if (s.state === "sent") {
          this.showNotice("info", h("span", { testid: "perfetto-sent" }, `Sent ${formatBytesShort(s.bytes)} to Perfetto: switch to its tab.`));
        } else {
          this.showFallback("perfetto-failed", `Perfetto did not receive the trace: ${s.detail}`);
        }
      },
    });
  }

  // ------------------------------------------------------------------------------------------ drawing

  private updateReadout(): void {
    const v = this.view;
    if (!v) return;
    const origin = this.bounds?.[0] ?? v.start;
    this.el.readout.textContent = `Showing ${formatOffset(v.start - origin)} to ${formatOffset(v.end - origin)} (${formatTime(v.end - v.start)})`;
  }

  private scene(): Scene | null {
    if (!this.view || this.width <= 0 || this.height <= 0) return null;
    return {
      width: this.width,
      height: this.height,
      labelW: this.labelW(),
      scrollTop: this.el.scroller.scrollTop,
      view: this.view,
      bounds: this.bounds,
      data: this.data,
      layout: this.layout,
      steps: this.steps,
      counterScale: this.counterScale,
      selection: this.selection ? { id: this.selection.id, track: this.selection.track, depth: this.selection.depth, start: this.selection.start, dur: this.selection.dur } : null,
      arrows: this.arrows,
      allFlows: this.allFlows,
      hover: this.hover,
      range: this.range,
      colours: this.colours,
      critical: this.criticalPath.marks,
    };
  }

  private markDirty(): void {
    this.dirty = true;
    if (this.raf === 0) this.raf = requestAnimationFrame((t) => { this.frame(t); });
  }

  private frame(now: number): void {
    this.raf = 0;
    if (this.ctx.signal.aborted) return;
    let again = false;
    // held W/A/S/D keys: continuous zoom / pan
    if (this.keys.size > 0 && this.view) {
      const dt = Math.min(0.05, Math.max(0, (now - this.lastFrame) / 1000));
      for (const [key, since] of this.keys) {
        if (now - since < KEY_HOLD_MS) continue;
        const motion = keyMotion(key, this.view.end - this.view.start, dt);
        if (motion && "zoom" in motion) this.zoomAt(motion.zoom, null);
        else if (motion) this.panBy(motion.pan);
      }
      again = true;
    }
    this.lastFrame = now;
    if (this.anim) {
      const a = this.anim;
      const at = glideAt(a, now);
      this.view = at.view;
      this.dirty = true;
      if (at.done) {
        this.anim = null;
        this.setView(a.to);
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
    const scene = this.scene();
    if (!scene) return;
    const g = this.el.canvas.getContext("2d", { alpha: false });
    if (!g) return;
    g.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    const s = draw(g, scene);
    this.stats.frames++;
    this.stats.drawMsTotal += s.ms;
    this.stats.lastDraw = s;
    if (this.data && this.stats.firstPaintAt === 0) {
      this.stats.firstPaintAt = performance.now();
      this.el.viewport.dataset["ready"] = "1";
    }
  }
}

export function render(container: HTMLElement, ctx: ViewContext): () => void {
  void loadSources(ctx); // classifies the frames of the details' call stacks (the user's first)
  const view = new TraceView(container, ctx);
  return view.mount();
}
