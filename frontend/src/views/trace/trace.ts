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
import { ApiError, type QueryParams } from "../../api";
import { card } from "../../components";
import { computingLine, onComputing } from "../../computing";
import { h, replaceChildren } from "../../dom";
import { formatTime } from "../../format";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import { loadSources } from "../common/callStack";
import { CATEGORY_COLORS, highlightCategory, highlightText } from "../common/stepCategories";
import { copyText, inVsCode, showToast } from "../common/ui";
import { makePalette, parseWindow, locate, formatOffset, mergeSteps, formatBytesShort, formatCounter, firstMarkedLane, stepLane, stepOfRange, type Step, type TrackMeta, type WindowData } from "./traceData";
import { detailsPanel, errorPanel, helpOpen, hintPanel, loadingPanel, rangeLoading, rangePanel, rememberHelp, setPanel, type DetailsHooks, type RangeHooks } from "./traceDetails";
import { absoluteUrl, openInPerfetto, type ExportStatus } from "./traceExport";
import { parseTraceQuery, searchParams } from "./traceSearch";
import { HEADER_H, HOST_LEVELS, buildLayout, laneTop, type Layout, type Row } from "./traceLayout";
import { draw, eventsOnScreen, hitTest, plotWidth, xToTime, type Colours, type CriticalMark, type FlowArrow, type Hit, type RangeMark, type Scene, type ViewRange } from "./traceRenderer";
import type { CriticalPathResponse } from "../common/apiTypes";
import type { EventBrief, TraceEventResponse, TraceRangeResponse, TraceSearchResponse, TraceWindowResponse } from "./traceTypes";
import type { ViewContext } from "../types";

const FETCH_DEBOUNCE_MS = 100;
const FETCH_MAX_WAIT_MS = 300;
/** share of the view fetched beyond each edge */
const FETCH_MARGIN = 0.5;
const MAX_WIDTH_PX = 8192;
const MIN_SPAN_US = 0.05;
const SEARCH_PAGE = 100;
const ANIMATE_MS = 180;
const KEY_HOLD_MS = 140;

interface Selected {
  id: number;
  name: string;
  track: number | null;
  depth: number | null;
  start: number;
  dur: number;
  details: TraceEventResponse | null;
}

interface SearchState {
  query: string;
  total: number;
  index: number;
  pages: Map<number, EventBrief[]>;
  token: number;
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
  private readonly el;
  private readonly ids: QueryParams;
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
  private critical: CriticalMark[] = [];
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
  private fetchCtl: AbortController | null = null;
  private fetchTimer = 0;
  private fetchFirstAsked = 0;
  private urlTimer = 0;
  private pointer: PointerState | null = null;
  private mouse: { x: number; y: number } | null = null;
  private readonly keys = new Map<string, number>();
  private lastFrame = 0;
  private anim: { from: ViewRange; to: ViewRange; t0: number } | null = null;
  private pendingReveal: { id: number; track: number | null } | null = null;
  /** a search hit to reveal once the first window (and so the view) is known */
  private revealAfterLoad: EventBrief | null = null;
  private detailsToken = 0;
  private search: SearchState = { query: "", total: 0, index: -1, pages: new Map(), token: 0 };
  private searchTimer = 0;
  private stepsComplete = false;
  /** the step-breakdown category highlighted (URL key `cat`, from the Overview's breakdown); null: none */
  private category: string | null = null;
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
    this.el = {
      canvas: h("canvas", { class: "ptp-trace-canvas", testid: "trace-canvas" }),
      spacer: h("div", { class: "ptp-trace-spacer" }),
      scroller: h("div", {
        class: "ptp-trace-scroller",
        testid: "trace-scroller",
        attrs: { tabindex: 0, "aria-label": "Trace timeline: W/S zoom, A/D pan, wheel scrolls the tracks, Ctrl+wheel zooms, shift+wheel pans, drag pans, shift+drag selects a range" },
        role: "application",
      }),
      viewport: h("div", { class: "ptp-trace-viewport", testid: "trace-viewport" }),
      tooltip: h("div", { class: "ptp-trace-tooltip", testid: "trace-tooltip", attrs: { "aria-hidden": "true" } }),
      loading: h("div", { class: "ptp-trace-loading", testid: "trace-loading", attrs: { "aria-live": "polite" } },
                 h("span", { class: "ptp-spinner", attrs: { "aria-hidden": "true" } }), h("span", { testid: "trace-loading-text" }, "Loading…")),
      error: h("div", { class: "ptp-trace-overlay-error", testid: "trace-window-error" }),
      notice: h("div", { class: "ptp-trace-notice", testid: "trace-notice", attrs: { "aria-live": "polite" } }),
      highlight: h("div", { class: "ptp-trace-highlight", testid: "trace-highlight", attrs: { "aria-live": "polite" } }),
      details: h("section", { class: "ptp-trace-panel", testid: "trace-details-panel" }),
      rangePanel: h("section", { class: "ptp-trace-panel", testid: "trace-range-panel" }),
      side: h("aside", { class: "ptp-trace-side", testid: "trace-side" }),
      body: h("div", { class: "ptp-trace-body" }),
      helpButton: h("button", { class: "ptp-button", testid: "trace-help-toggle", title: "Show or hide the keyboard and mouse help",
                                attrs: { type: "button", "aria-label": "Keyboard help", "aria-pressed": "false" } }, "?"),
      readout: h("span", { class: "ptp-trace-readout", testid: "trace-readout" }),
      stepSelect: h("select", { class: "ptp-trace-select", testid: "trace-step-select", attrs: { "aria-label": "Fit a step" } }),
      pathSelect: h("select", { class: "ptp-trace-select", testid: "trace-critical-path", attrs: { "aria-label": "Highlight critical path", title: "Highlight the critical path of a step: the chain of host and GPU work that determined its duration" } }),
      pathSummary: h("span", { class: "ptp-trace-readout", testid: "trace-critical-summary", attrs: { "aria-live": "polite" } }),
      searchInput: h("input", {
        class: "ptp-search ptp-trace-search",
        testid: "trace-search",
        attrs: { type: "search", placeholder: "Search events (\"name\" exact)", "aria-label": "Search events by name: text finds names containing it, \"text\" in quotes the exact name",
                 title: "Names containing the text (any case); in double quotes, the exact name: \"nn.Module: Linear_1\" does not find Linear_10", spellcheck: "false" },
      }),
      searchCount: h("span", { class: "ptp-trace-count", testid: "trace-search-count", attrs: { "aria-live": "polite" } }),
      prevButton: h("button", { class: "ptp-button", testid: "trace-search-prev", title: "Previous match (Shift+Enter)", attrs: { type: "button", "aria-label": "Previous match" } }, "‹"),
      nextButton: h("button", { class: "ptp-button", testid: "trace-search-next", title: "Next match (Enter)", attrs: { type: "button", "aria-label": "Next match" } }, "›"),
      selectButton: h("button", { class: "ptp-button", testid: "trace-box-select", title: "Box select: drag to select a time range (or shift+drag in pan mode)", attrs: { type: "button", "aria-pressed": "false" } }, "Box select"),
      zoomSelection: h("button", { class: "ptp-button", testid: "trace-zoom-selection", title: "Zoom to the selected range", attrs: { type: "button", disabled: true } }, "Zoom to selection"),
      flowsToggle: h("input", { testid: "trace-all-flows", attrs: { type: "checkbox" } }),
      download: h("a", { class: "ptp-button", testid: "trace-download", attrs: { href: fileUrl, download: ctx.spanInfo.file || "trace.json", title: "Download the original trace file" } }, "Download trace"),
      perfetto: h("button", { class: "ptp-button", testid: "trace-perfetto", title: "Open this trace in ui.perfetto.dev (the file is sent from this browser, not uploaded)", attrs: { type: "button" } }, "Open in Perfetto"),
    };
    this.el.scroller.append(this.el.canvas, this.el.spacer);
    this.el.viewport.append(this.el.scroller, this.el.tooltip, this.el.loading, this.el.error);
    this.el.side.append(this.el.details, this.el.rangePanel);
    this.el.loading.hidden = true;
    this.el.error.hidden = true;
    this.el.notice.hidden = true;
    this.el.highlight.hidden = true;
    this.el.rangePanel.hidden = true;
  }

  // ------------------------------------------------------------------------------------------ mount

  /** Fit, steps, zoom, box select, flows, critical path; search; download, Perfetto and the help toggle. */
  private toolbar(): HTMLElement {
    const button = (label: string, title: string, testid: string, onClick: () => void): HTMLElement =>
      h("button", { class: "ptp-button", testid, title, attrs: { type: "button" }, onClick }, label);
    return h(
      "div",
      { class: "ptp-trace-toolbar", testid: "trace-toolbar" },
      h(
        "div",
        { class: "ptp-trace-group" },
        button("Fit", "Show the whole trace", "trace-fit", () => { this.fit(); }),
        this.el.stepSelect,
        button("−", "Zoom out (S)", "trace-zoom-out", () => { this.zoomAt(1.6, null); }),
        button("+", "Zoom in (W)", "trace-zoom-in", () => { this.zoomAt(1 / 1.6, null); }),
        this.el.selectButton,
        this.el.zoomSelection,
        h("label", { class: "ptp-trace-check", title: "Draw every launch → GPU flow of the window (the selected event's flows are always drawn)" }, this.el.flowsToggle, "All flows"),
        this.el.pathSelect,
        this.el.pathSummary,
      ),
      h(
        "div",
        { class: "ptp-trace-group ptp-trace-search-group" },
        this.el.searchInput,
        this.el.searchCount,
        this.el.prevButton,
        this.el.nextButton,
      ),
      h("div", { class: "ptp-trace-group ptp-trace-export" }, this.el.download, this.el.perfetto, this.el.helpButton),
    );
  }

  mount(): () => void {
    const ctx = this.ctx;
    const toolbar = this.toolbar();
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
      void this.runSearch(q, this.view === null ? "first" : "none");
    }
    return () => { this.destroy(); };
  }

  private destroy(): void {
    this.fetchCtl?.abort();
    this.exportStop?.();
    window.clearTimeout(this.fetchTimer);
    window.clearTimeout(this.urlTimer);
    window.clearTimeout(this.searchTimer);
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
  private showHighlight(category: string | null): void {
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
        loading: this.fetchCtl !== null,
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
    const { canvas, scroller, searchInput } = this.el;
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
    listen(this.el.pathSelect, "change", () => { void this.showCriticalPath(this.el.pathSelect.value); });
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
    listen(searchInput, "input", () => {
      window.clearTimeout(this.searchTimer);
      this.searchTimer = window.setTimeout(() => { void this.runSearch(searchInput.value, "none"); }, 300);
    });
    listen(searchInput, "keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        window.clearTimeout(this.searchTimer);
        const q = searchInput.value.trim();
        if (q !== this.search.query) void this.runSearch(q, e.shiftKey ? "last" : "first");
        else void this.stepSearch(e.shiftKey ? -1 : 1);
      } else if (e.key === "Escape") {
        searchInput.blur();
        scroller.focus({ preventScroll: true });
      }
    });
    listen(this.el.prevButton, "click", () => { void this.stepSearch(-1); });
    listen(this.el.nextButton, "click", () => { void this.stepSearch(1); });
    listen(this.el.perfetto, "click", () => { this.openPerfetto(); });
    listen(this.el.helpButton, "click", () => { this.setHelp(!this.help); });
    listen(this.el.download, "click", () => {
      if (inVsCode()) this.showFallback("download", "If nothing is downloaded (VS Code may block downloads from this panel), copy the file's link and open it in a browser:");
    });
    this.updateSearchCount();
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
    if (data.levelsKey !== this.lanesKey() || data.category !== this.category) return false;
    const span = v.end - v.start;
    const lo = Math.max(v.start, data.bounds[0]);
    const hi = Math.min(v.end, data.bounds[1]);
    const eps = span * 1e-6;
    if (hi > lo && (data.t0 > lo + eps || data.t1 < hi - eps)) return false;
    const ratio = data.pxUs / (span / plotWidth({ width: this.width, labelW: this.labelW() }));
    return ratio > 0.85 && ratio < 1.18;
  }

  private scheduleFetch(): void {
    const now = performance.now();
    if (this.fetchTimer === 0) this.fetchFirstAsked = now;
    window.clearTimeout(this.fetchTimer);
    const wait = now - this.fetchFirstAsked >= FETCH_MAX_WAIT_MS ? 0 : FETCH_DEBOUNCE_MS;
    this.fetchTimer = window.setTimeout(() => {
      this.fetchTimer = 0;
      this.requestWindow(false);
    }, wait);
  }

  private requestWindow(force: boolean): void {
    if (this.width <= 0) return;
    const plotW = plotWidth({ width: this.width, labelW: this.labelW() });
    const v = this.view;
    if (!force && this.data && v && this.covers(this.data, v)) return;
    const levelsKey = this.levelsKey();
    const lanesKey = this.lanesKey();
    const params: QueryParams = { ...this.ids };
    let widthPx = plotW;
    if (v) {
      const span = v.end - v.start;
      let s = v.start - span * FETCH_MARGIN;
      let e = v.end + span * FETCH_MARGIN;
      if (this.bounds) {
        s = Math.max(s, Math.min(v.start, this.bounds[0]));
        e = Math.min(e, Math.max(v.end, this.bounds[1]));
      }
      widthPx = Math.round((plotW * (e - s)) / span);
      if (widthPx > MAX_WIDTH_PX) {
        const extra = ((MAX_WIDTH_PX / plotW) * span - span) / 2;
        s = v.start - extra;
        e = v.end + extra;
        widthPx = MAX_WIDTH_PX;
      }
      params["start_us"] = s.toFixed(3);
      params["end_us"] = e.toFixed(3);
    }
    params["width_px"] = Math.max(1, Math.min(MAX_WIDTH_PX, widthPx));
    if (levelsKey) params["levels"] = levelsKey;
    const skipKey = this.skipKey();
    if (skipKey) params["skip"] = skipKey;
    if (!this.data) params["host_levels"] = HOST_LEVELS; // the tracks are not known yet: see adoptLevels
    const category = this.category;
    if (category !== null) params["category"] = category;
    this.fetchCtl?.abort();
    const controller = new AbortController();
    this.fetchCtl = controller;
    const onLeave = (): void => { controller.abort(); };
    this.ctx.signal.addEventListener("abort", onLeave, { once: true });
    this.stats.fetches++;
    const started = performance.now();
    // Only a slow answer shows the indicator, so quick ones do not flicker.
    const spinner = window.setTimeout(() => { if (this.fetchCtl === controller) this.el.loading.hidden = false; }, 150);
    // a big trace's index may still be computing (409 "computing", asked again by api.ts): say how far it is
    const stopComputing = onComputing((route, computing) => {
      if (route !== "trace/window" || !computing || this.fetchCtl !== controller) return;
      this.setLoadingText(computingLine(computing));
      this.el.loading.hidden = false;
    });
    this.ctx.api
      .getJSON<TraceWindowResponse>("trace/window", params, { signal: controller.signal, timeoutMs: 120_000 })
      .then((resp) => {
        if (this.fetchCtl !== controller) return;
        this.stats.lastFetchMs = performance.now() - started;
        this.stats.windows++;
        this.el.error.hidden = true;
        const t = performance.now();
        const data = parseWindow(resp, lanesKey, category);
        this.stats.lastWindow = { t0: data.t0, t1: data.t1, px_us: data.pxUs, events: data.eventCount, boxes: data.boxCount, width_px: Number(params["width_px"]) };
        this.accept(data);
        this.stats.lastAcceptMs = performance.now() - t;
      })
      .catch((err: unknown) => {
        if (controller.signal.aborted || this.ctx.signal.aborted) return;
        this.showWindowError(err);
      })
      .finally(() => {
        window.clearTimeout(spinner);
        stopComputing();
        this.ctx.signal.removeEventListener("abort", onLeave);
        if (this.fetchCtl === controller) {
          this.fetchCtl = null;
          this.el.loading.hidden = true;
          this.setLoadingText("Loading…");
        }
      });
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
    const names = this.steps.map((s) => s.name);
    this.fillPathPicker(names, []);
    // A trace without ProfilerStep#N shows one step "0" over the whole trace: ask the critical path what it offers
    // instead (its annotations), rather than walking one giant step.
    if (names.length <= 1 && (names[0] ?? "0") === "0") {
      this.ctx.api
        .getJSON<CriticalPathResponse>("critical_path", this.ids, { signal: this.ctx.signal })
        .then((resp) => { this.fillPathPicker(resp.steps, resp.annotations.map((a) => a.name)); })
        .catch(() => undefined);
    }
  }

  /** The critical-path picker: each step, each offered annotation (its first range) and the visible range. */
  private fillPathPicker(steps: string[], annotations: string[]): void {
    replaceChildren(
      this.el.pathSelect,
      h("option", { attrs: { value: "" } }, "Critical path…"),
      steps.map((n) => h("option", { attrs: { value: `step:${n}` } }, `Critical path of step ${n}`)),
      annotations.map((n) => h("option", { attrs: { value: `annotation:${n}` } }, `Critical path of ${n} (first)`)),
      h("option", { attrs: { value: "range" } }, "Critical path of the visible range"),
    );
    this.el.pathSelect.disabled = false;
  }

  /** The /critical_path query of a picker value: a step, an annotation or the visible range. */
  private pathQuery(value: string): Record<string, string | number> {
    if (value === "range") return { start_us: this.view?.start ?? 0, end_us: this.view?.end ?? 0 };
    const colon = value.indexOf(":");
    return { [value.slice(0, colon)]: value.slice(colon + 1) };
  }

  /** Fetch and overlay the critical path of a picker value (none: clear it), then fit what was walked. */
  private async showCriticalPath(value: string): Promise<void> {
    this.critical = [];
    this.el.pathSummary.textContent = "";
    this.markDirty();
    if (!value) return;
    let resp: CriticalPathResponse;
    try {
      resp = await this.ctx.api.getJSON<CriticalPathResponse>("critical_path", { ...this.ids, ...this.pathQuery(value) }, { signal: this.ctx.signal });
    } catch (err) {
      if (!this.ctx.signal.aborted) this.el.pathSummary.textContent = `Critical path unavailable: ${err instanceof Error ? err.message : String(err)}`;
      return;
    }
    if (this.ctx.signal.aborted || this.el.pathSelect.value !== value) return;
    const side = (c: string): CriticalMark["side"] =>
      c === "kernel" || c === "memcpy" || c === "memset" ? "gpu" : c === "cpu_op" || c === "annotation" || c === "runtime" || c === "launch" ? "host" : "wait";
    this.critical = resp.segments.map((s) => ({ start: s.start_us, end: s.end_us, id: s.id, side: side(s.category) }));
    const shares = [...resp.shares].sort((a, b) => b.us - a.us).slice(0, 4);
    const label = resp.scope.label.charAt(0).toUpperCase() + resp.scope.label.slice(1);
    this.el.pathSummary.textContent = `${label}: ${shares.map((s) => `${s.category.replace("_", " ")} ${(100 * s.share).toFixed(1)}%`).join(" · ")}`;
    this.el.pathSummary.title = resp.shares.map((s) => `${s.category}: ${formatTime(s.us)} (${(100 * s.share).toFixed(1)}%)`).join("\n");
    const dur = resp.end_us - resp.start_us;
    this.animateTo({ start: resp.start_us - dur * 0.02, end: resp.end_us + dur * 0.02 });
    this.markDirty();
  }

  /** A deep link opened a part of the trace: ask once, coarsely, for the whole trace's steps. */
  private fetchStepList(): void {
    this.stepsComplete = true;
    const collapsed = this.tracksMeta.map((t) => t.id).join(",");
    this.ctx.api
      .getJSON<TraceWindowResponse>("trace/window", { ...this.ids, width_px: 16, collapsed }, { signal: this.ctx.signal, timeoutMs: 120_000 })
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

  /** At least MIN_SPAN_US wide, at most 1.5 × the trace, centred within it; exact values pass unchanged. */
  private clampView(v: ViewRange): ViewRange {
    let { start, end } = v;
    const limit = this.bounds ? Math.max(MIN_SPAN_US, (this.bounds[1] - this.bounds[0]) * 1.5) : Infinity;
    if (!(end - start >= MIN_SPAN_US) || end - start > limit) {
      const c = (start + end) / 2;
      const span = Math.min(limit, Math.max(MIN_SPAN_US, Number.isFinite(end - start) ? end - start : MIN_SPAN_US));
      start = c - span / 2;
      end = c + span / 2;
    }
    if (this.bounds) {
      const c = (start + end) / 2;
      const shift = c < this.bounds[0] ? this.bounds[0] - c : c > this.bounds[1] ? this.bounds[1] - c : 0;
      start += shift;
      end += shift;
    }
    return { start, end };
  }

  private setView(v: ViewRange): void {
    this.view = this.clampView(v);
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
    this.anim = { from: { ...this.view }, to: this.clampView(target), t0: performance.now() };
    this.markDirty();
  }

  private fit(): void {
    if (this.bounds) this.animateTo({ start: this.bounds[0], end: this.bounds[1] });
  }

  private anchorX(x: number | null): number {
    const lw = this.labelW();
    if (x !== null && x >= lw && x <= this.width) return x;
    if (this.mouse && this.mouse.x >= lw) return this.mouse.x;
    return lw + (this.width - lw) / 2;
  }

  private zoomAt(factor: number, x: number | null): void {
    const v = this.view;
    if (!v) return;
    this.anim = null;
    const scene = { width: this.width, labelW: this.labelW(), view: v };
    const ax = this.anchorX(x);
    const t = xToTime(scene, ax);
    const span = v.end - v.start;
    const next = Math.max(MIN_SPAN_US, span * factor);
    const start = t - ((t - v.start) * next) / span;
    this.setView({ start, end: start + next });
  }

  private panBy(dt: number): void {
    const v = this.view;
    if (!v) return;
    this.anim = null;
    this.setView({ start: v.start + dt, end: v.end + dt });
  }

  private pxToUs(px: number): number {
    const v = this.view;
    if (!v) return 0;
    return (px * (v.end - v.start)) / plotWidth({ width: this.width, labelW: this.labelW() });
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
      .getJSON<TraceEventResponse>("trace/event", { ...this.ids, id: brief.id }, { signal: this.ctx.signal })
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
      for (const f of data.flows) {
        if (f[0] === sel.id || f[3] === sel.id) add(f[0], f[1], data.t0 + f[2], f[3], f[4], data.t0 + f[5]);
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
        void this.runSearch(name, "first");
      },
      scope,
    };
    setPanel(this.el.rangePanel, rangeLoading(r.start, r.end, hooks));
    this.updateSide();
    const params: QueryParams = { ...this.ids, start_us: r.start.toFixed(3), end_us: r.end.toFixed(3) };
    if (this.rangeTracks) params["tracks"] = this.rangeTracks.join(",");
    this.ctx.api
      .getJSON<TraceRangeResponse>("trace/range", params, { signal: this.ctx.signal, timeoutMs: 120_000 })
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

  // ------------------------------------------------------------------------------------------ search

  private updateSearchCount(): void {
    const s = this.search;
    const el = this.el.searchCount;
    if (!s.query) el.textContent = "";
    else if (s.total === 0) el.textContent = "no matches";
    else if (s.index < 0) el.textContent = `${s.total.toLocaleString("en-US")} ${parseTraceQuery(s.query).exact ? "exact " : ""}matches`;
    else el.textContent = `${(s.index + 1).toLocaleString("en-US")} of ${s.total.toLocaleString("en-US")}`;
    this.el.prevButton.disabled = s.total === 0;
    this.el.nextButton.disabled = s.total === 0;
  }

  private async searchPage(offset: number, token: number): Promise<EventBrief[] | null> {
    const cached = this.search.pages.get(offset);
    if (cached) return cached;
    const resp = await this.ctx.api.getJSON<TraceSearchResponse>(
      "trace/search", { ...this.ids, ...searchParams(parseTraceQuery(this.search.query)), offset, limit: SEARCH_PAGE },
      { signal: this.ctx.signal, timeoutMs: 120_000 });
    if (token !== this.search.token) return null;
    this.search.total = resp.total;
    const items = Array.isArray(resp.items) ? resp.items : [];
    this.search.pages.set(offset, items);
    return items;
  }

  private async runSearch(raw: string, jump: "none" | "first" | "last"): Promise<void> {
    const query = raw.trim();
    const token = ++this.search.token;
    this.search = { query, total: 0, index: -1, pages: new Map(), token };
    writeViewUrlState({ q: query || undefined });
    if (!parseTraceQuery(query).text) {
      this.updateSearchCount();
      return;
    }
    this.el.searchCount.textContent = "searching…";
    try {
      const items = await this.searchPage(0, token);
      if (!items) return;
      this.updateSearchCount();
      if (jump !== "none" && this.search.total > 0) await this.gotoHit(jump === "first" ? 0 : this.search.total - 1);
    } catch (err) {
      if (token !== this.search.token || this.ctx.signal.aborted) return;
      this.el.searchCount.textContent = "search failed";
      showToast(err instanceof Error ? err.message : String(err), "error");
    }
  }

  private async stepSearch(dir: 1 | -1): Promise<void> {
    const q = this.el.searchInput.value.trim();
    if (q !== this.search.query) {
      await this.runSearch(q, dir === 1 ? "first" : "last");
      return;
    }
    const s = this.search;
    if (s.total === 0) return;
    const next = s.index < 0 ? (dir === 1 ? 0 : s.total - 1) : (s.index + dir + s.total) % s.total;
    await this.gotoHit(next);
  }

  private async gotoHit(index: number): Promise<void> {
    const token = this.search.token;
    const offset = Math.floor(index / SEARCH_PAGE) * SEARCH_PAGE;
    const items = await this.searchPage(offset, token);
    if (!items || token !== this.search.token) return;
    const brief = items[index - offset];
    if (!brief) return;
    this.search.index = index;
    this.updateSearchCount();
    this.reveal(brief);
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
      critical: this.critical,
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
        const span = this.view.end - this.view.start;
        if (key === "w") this.zoomAt(Math.exp(-dt * 1.8), null);
        else if (key === "s") this.zoomAt(Math.exp(dt * 1.8), null);
        else if (key === "a") this.panBy(-span * dt * 1.1);
        else if (key === "d") this.panBy(span * dt * 1.1);
      }
      again = true;
    }
    this.lastFrame = now;
    if (this.anim) {
      const a = this.anim;
      const p = Math.min(1, (now - a.t0) / ANIMATE_MS);
      const e = 1 - (1 - p) ** 3;
      const fromSpan = a.from.end - a.from.start;
      const toSpan = a.to.end - a.to.start;
      const span = fromSpan * (toSpan / fromSpan) ** e;
      const fromC = a.from.start + fromSpan / 2;
      const toC = a.to.start + toSpan / 2;
      const c = fromC + (toC - fromC) * e;
      this.view = { start: c - span / 2, end: c + span / 2 };
      this.dirty = true;
      if (p >= 1) {
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
