/**
 * The Trace view: the timeline of one span, served in windows at screen resolution
 * (`./trace/window`), drawn on a canvas by ./traceRenderer.
 *
 * Navigation redraws at once from the last answer (transformed to the new view) and asks for the new
 * window debounced (100 ms, at most 300 ms late while the view keeps moving), cancelling stale
 * requests; the last good frame stays while a window loads. Windows are fetched with half a view of
 * margin on each side, so small pans need no request at all.
 *
 * TraceView owns the page's state (traceState.ts), fetches the windows (traceFetcher.ts), lays out the tracks and
 * moves the view (traceViewport.ts); its controllers do the rest: input (traceInput.ts), the selection and side
 * panel (traceSelection.ts), the range (traceRange.ts), the toolbar (traceToolbar.ts), the search
 * (traceSearchController.ts), the critical path (traceCriticalPath.ts) and the painting (tracePainter.ts).
 *
 * Read-only debug hook (documented in docs/guide/trace.md, used by the browser tests):
 * `window.__ptpTrace = { visibleRange(), selected(), stats(), eventsOnScreen() }` in the plugin frame.
 */
import { ApiError } from "../../api";
import { card } from "../../components";
import { h, replaceChildren } from "../../dom";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import { loadSources } from "../common/callStack";
import { highlightCategory } from "../common/stepCategories";
import { firstMarkedLane, locate, parseWindow, stepLane, stepOfRange, type EventBrief, type TraceWindowResponse, type WindowData } from "./traceData";
import { HEADER_H, HOST_LEVELS, buildLayout, laneTop, type Row } from "./traceLayout";
import { eventsOnScreen, type Hit, type Scene } from "./traceRenderer";
import { CriticalPath } from "./traceCriticalPath";
import { toolbar as traceToolbar, type TraceElements, traceElements } from "./traceElements";
import { SearchController } from "./traceSearchController";
import { covers, WindowFetcher, windowQuery, type WindowQuery } from "./traceFetcher";
import { TraceInput } from "./traceInput";
import { readColours, TracePainter } from "./tracePainter";
import { TraceRange } from "./traceRange";
import { TraceSelection } from "./traceSelection";
import { type TraceActions, TraceState } from "./traceState";
import { TraceToolbar } from "./traceToolbar";
import { anchorX, type Axis, clampView, panView, plotWidth, pxToUs, type ViewRange, zoomView } from "./traceViewport";
import type { ViewContext } from "../types";

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

function num(value: string | undefined): number | null {
  if (value === undefined || value.trim() === "") return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

/** The read-only hook the browser tests and docs/guide/trace.md use: what the page shows, from its state. */
function debugHook(s: TraceState, el: TraceElements, stats: TracePainter["stats"],
  fetcher: Pick<WindowFetcher, "busy" | "scheduled">, scene: () => Scene | null): TraceDebugHook {
  return {
    visibleRange: () => (s.view ? { start: s.view.start, end: s.view.end, bounds: s.bounds } : null),
    selected: () => (s.selection ? { id: s.selection.id, name: s.selection.name, track: s.selection.track, details: s.selection.details !== null } : null),
    stats: () => ({
      ...stats,
      loading: fetcher.busy,
      // a window asked for that waits for its debounce, and a zoom or pan still gliding: with `loading`, what a
      // test waits out before it reads what the view settled on
      scheduled: fetcher.scheduled,
      animating: s.anim !== null,
      width: s.width,
      height: s.height,
      labelW: s.labelW(),
      firstPaintMs: stats.firstPaintAt ? stats.firstPaintAt - stats.mountedAt : null,
      avgDrawMs: stats.frames ? stats.drawMsTotal / stats.frames : null,
      tracks: s.layout.trackRows.size,
      arrows: s.arrows.length,
      rows: s.layout.rows.length,
      scrollTop: el.scroller.scrollTop,
    }),
    eventsOnScreen: () => {
      const drawn = scene();
      return drawn ? eventsOnScreen(drawn) : [];
    },
    selectedRange: () => (s.range ? { start: s.range.start, end: s.range.end, tracks: s.rangeTracks } : null),
    rows: () => s.layout.rows.map((r) => ({
      kind: r.kind,
      label: r.kind === "track" ? r.track.label : r.kind === "process" ? r.label : r.key,
      track: r.kind === "track" ? r.track.id : null,
      y: HEADER_H + r.y - el.scroller.scrollTop,
      h: r.h,
      collapsed: r.kind === "track" ? r.collapsed : r.kind === "process" ? r.folded : false,
    })),
  };
}

class TraceView implements TraceActions {
  private readonly el: TraceElements;
  private readonly ids: { run: string; worker: string; span: string };
  private readonly s: TraceState;
  private layoutKey = "";
  /** a step whose lane to scroll to once a window holds it (after a step-bar click or a step link) */
  private stepToReveal: string | null = null;
  /** after "▴ N levels above": the lane to keep on screen once the window with those levels comes */
  private stepLaneAfterReveal: { track: number; depth: number } | null = null;
  private urlTimer = 0;
  private readonly cleanups: (() => void)[] = [];
  private readonly fetcher: WindowFetcher;
  private readonly search: SearchController;
  private readonly criticalPath: CriticalPath;
  private readonly input: TraceInput;
  private readonly selection: TraceSelection;
  private readonly ranges: TraceRange;
  private readonly toolbar: TraceToolbar;
  private readonly painter: TracePainter;

  constructor(private readonly container: HTMLElement, private readonly ctx: ViewContext) {
    this.ids = { run: ctx.run, worker: ctx.worker, span: ctx.span };
    this.s = new TraceState(readColours(ctx.theme === "dark"));
    this.el = traceElements(ctx.api.url("trace/file", this.ids), ctx.spanInfo.file || "trace.json");
    const fetching = { api: ctx.api, ids: this.ids, signal: ctx.signal };
    this.search = new SearchController(
      { input: this.el.searchInput, count: this.el.searchCount, prev: this.el.prevButton, next: this.el.nextButton },
      { ...fetching, reveal: (brief) => { this.reveal(brief); }, leaveBox: () => { this.el.scroller.focus({ preventScroll: true }); } },
    );
    this.criticalPath = new CriticalPath(this.el.pathSelect, this.el.pathSummary, {
      ...fetching, view: () => this.s.view,
      show: (range) => { this.animateTo(range); this.markDirty(); }, redraw: () => { this.markDirty(); },
    });
    this.input = new TraceInput(this.el, this.s, this);
    this.selection = new TraceSelection(this.el, this.s, this, fetching);
    this.ranges = new TraceRange(this.el, this.s, this, fetching);
    this.toolbar = new TraceToolbar(this.el, this.s, this, {
      ...fetching, spanInfo: ctx.spanInfo, title: `${ctx.run} · ${ctx.worker} · span ${ctx.span}`,
      criticalPath: this.criticalPath, toggleHelp: () => { this.selection.toggleHelp(); },
    });
    this.painter = new TracePainter(this.el, this.s, this, {
      scene: () => this.scene(), heldKeys: (now) => this.input.heldKeys(now),
      widthChanged: () => { this.scheduleFetch(); }, aborted: () => ctx.signal.aborted,
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
    replaceChildren(this.container, h("div", { class: "ptp-trace", testid: "trace-view" }, toolbar, this.el.highlight, this.el.notice, this.el.body));
    this.el.body.append(h("div", { class: "ptp-trace-main" }, this.el.viewport, h("div", { class: "ptp-trace-status" }, this.el.readout)), this.el.side);
    this.selection.showHint();
    this.input.wire(this.cleanups);
    this.toolbar.wire(this.cleanups);
    this.search.wire(this.cleanups);
    ctx.onThemeChange((theme) => {
      this.s.colours = readColours(theme === "dark");
      this.markDirty();
    });
    ctx.onResize(() => { this.resize(); });
    const onWinResize = (): void => { this.resize(); };
    window.addEventListener("resize", onWinResize);
    this.cleanups.push(() => { window.removeEventListener("resize", onWinResize); });
    const ro = new ResizeObserver(() => { this.resize(); });
    ro.observe(this.el.viewport);
    this.cleanups.push(() => { ro.disconnect(); });
    window.__ptpTrace = debugHook(this.s, this.el, this.painter.stats, this.fetcher, () => this.scene());
    this.openLink();
    return () => { this.destroy(); };
  }

  /** Deep link: a range, a highlighted category and/or a search from the URL. */
  private openLink(): void {
    const linked = readViewUrlState();
    const start = num(linked.start);
    const end = num(linked.end);
    if (start !== null && end !== null && end > start) this.s.view = { start, end };
    this.toolbar.showHighlight(highlightCategory(linked.cat));
    this.resize();
    this.requestWindow(true);
    const q = linked.q?.trim();
    if (q) {
      this.el.searchInput.value = q;
      void this.search.run(q, this.s.view === null ? "first" : "none");
    }
  }

  private destroy(): void {
    this.fetcher.stop();
    this.toolbar.stop();
    window.clearTimeout(this.urlTimer);
    this.search.stop();
    this.painter.stop();
    for (const fn of this.cleanups.splice(0)) fn();
    if (window.__ptpTrace) delete window.__ptpTrace;
    // The range and search belong to this page: a link to another page or span must not carry them.
    writeViewUrlState({ start: undefined, end: undefined, q: undefined, cat: undefined });
  }

  // ------------------------------------------------------------------------------------------ fetching

  /** The `levels=` parameter: each limited track's lane count, folded processes' tracks at one. */
  private levelsKey(): string {
    const limits = new Map(this.s.levels);
    for (const id of this.s.layout.hiddenTracks) limits.set(id, 1);
    return [...limits].sort((a, b) => a[0] - b[0]).map(([id, n]) => `${id}:${n}`).join(",");
  }

  /** The `skip=` parameter: the levels left out above each track's first lane (see adoptLevels). */
  private skipKey(): string {
    return [...this.s.skips].filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]).map(([id, n]) => `${id}:${n}`).join(",");
  }

  private covers(data: WindowData, v: ViewRange): boolean {
    return covers(data, v, { width: this.s.width, labelW: this.s.labelW() }, `${this.levelsKey()}|${this.skipKey()}`, this.s.category);
  }

  private scheduleFetch(): void {
    this.fetcher.schedule(() => { this.requestWindow(false); });
  }

  requestWindow(force: boolean): void {
    const s = this.s;
    if (s.width <= 0) return;
    if (!force && s.data && s.view && this.covers(s.data, s.view)) return;
    this.painter.stats.fetches++;
    this.fetcher.fetch(windowQuery({
      view: s.view, bounds: s.bounds, plotW: plotWidth({ width: s.width, labelW: s.labelW() }),
      levelsKey: this.levelsKey(), skipKey: this.skipKey(), first: !s.data, hostLevels: HOST_LEVELS, category: s.category,
    }));
  }

  /** The newest window's answer (the fetcher drops stale ones): parsed, then taken in. */
  private takeWindow(resp: TraceWindowResponse, query: WindowQuery, elapsedMs: number): void {
    const stats = this.painter.stats;
    stats.lastFetchMs = elapsedMs;
    stats.windows++;
    this.el.error.hidden = true;
    const t = performance.now();
    const data = parseWindow(resp, `${query.levels ?? ""}|${query.skip ?? ""}`, query.category ?? null);
    stats.lastWindow = { t0: data.t0, t1: data.t1, px_us: data.pxUs, events: data.eventCount, boxes: data.boxCount, width_px: query.width_px ?? 0 };
    this.accept(data);
    stats.lastAcceptMs = performance.now() - t;
  }

  private showLoading(text: string | null | undefined): void {
    const label = this.el.loading.querySelector("[data-testid='trace-loading-text']");
    if (label && text !== undefined) label.textContent = text ?? "Loading…";
    this.el.loading.hidden = text === null;
  }

  private showWindowError(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    if (!this.s.data) {
      const computing = err instanceof ApiError && err.status === 409;
      const title = computing ? "Still loading" : "Could not load the timeline";
      replaceChildren(this.container, card({ class: computing ? "ptp-warn-card" : "ptp-error-card", testid: "error-card", title }, h("p", { class: "ptp-break" }, message)));
      return;
    }
    replaceChildren(this.el.error, h("span", {}, `Could not load this part of the timeline: ${message}`), " ",
      h("button", { class: "ptp-link-button", attrs: { type: "button" }, onClick: () => { this.requestWindow(true); } }, "Retry"));
    this.el.error.hidden = false;
  }

  private accept(data: WindowData): void {
    const s = this.s;
    const firstAnswer = s.data === null;
    s.data = data;
    s.bounds = data.bounds;
    this.toolbar.takeSteps(data.steps, firstAnswer && s.view === null);
    for (const c of data.counters) {
      if (c.unit === "fraction") continue;
      const key = c.name.replace(/ (allocated|reserved)$/, "");
      s.counterScale.set(key, Math.max(s.counterScale.get(key) ?? 0, c.max));
    }
    const meta = data.tracks.map((t) => ({ id: t.id, kind: t.kind, label: t.label, process: t.process, depths: t.depths, skipped: t.skipped }));
    const key = JSON.stringify([meta, data.counters.map((c) => c.name)]);
    if (key !== this.layoutKey) {
      this.layoutKey = key;
      s.tracksMeta = meta;
      if (firstAnswer) this.adoptLevels(data);
      this.relayout();
    }
    this.scrollToLinked(data, firstAnswer);
    if (!s.view) s.view = { start: data.bounds[0], end: data.bounds[1] };
    if (firstAnswer) this.toolbar.fetchStepList();
    if (s.allFlows) locate(data, -1);
    this.selection.onWindow(data);
    this.painter.updateReadout();
    this.markDirty();
    // The view may have moved on while this window was loading.
    if (!this.covers(data, s.view)) this.scheduleFetch();
  }

  /** The lane a link or a click asked for, once a window holds it. */
  private scrollToLinked(data: WindowData, firstAnswer: boolean): void {
    const view = this.s.view;
    if (firstAnswer && view) {
      // A highlight link (a breakdown category): the first lane of marked events on screen; a link to a step (the
      // Overview's step bar): its thread's step lane.
      const marked = this.s.category !== null ? firstMarkedLane(data) : null;
      const step = marked ? null : stepOfRange(data.steps, view.start, view.end);
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
  }

  /**
   * Deep host threads (long Python stacks) open a few levels deep: the first window was asked with
   * `host_levels`, so the server already sent those lanes only; take them as the tracks' levels.
   */
  private adoptLevels(data: WindowData): void {
    for (const t of data.tracks) if (t.shown < t.depths && t.shown > 1) this.s.levels.set(t.id, t.shown);
    // A spawn job's main thread opens at its steps: the server left out the frames above (skipped); keep them out.
    for (const t of data.tracks) if (t.skipped > 0) this.s.skips.set(t.id, t.skipped);
    data.levelsKey = `${this.levelsKey()}|${this.skipKey()}`;
  }

  relayout(): void {
    const counters = this.s.data?.counters.map((c) => ({ name: c.name, unit: c.unit })) ?? [];
    this.s.layout = buildLayout(this.s.tracksMeta, counters, this.s.levels, this.s.folded);
    this.painter.updateSpacer();
    this.markDirty();
  }

  toggleRow(row: Row): void {
    const s = this.s;
    if (row.kind === "process") {
      if (s.folded.has(row.key)) s.folded.delete(row.key);
      else s.folded.add(row.key);
    } else if (row.kind === "track") {
      if (row.lanes > 1) s.levels.set(row.track.id, 1);
      else s.levels.delete(row.track.id);
    } else {
      return;
    }
    this.relayout();
    this.requestWindow(true);
  }

  /** "▴ N levels above" of a thread opened at its steps: the frames above come back, the lanes shown stay. */
  showAbove(track: number, lanes: number): void {
    const skipped = this.s.skips.get(track) ?? 0;
    this.s.skips.delete(track);
    if (this.s.levels.has(track)) this.s.levels.set(track, lanes + skipped);
    // the new window's track has the levels above: keep the step's lane, which was the first, on screen
    this.stepLaneAfterReveal = { track, depth: skipped };
    this.requestWindow(true);
  }

  /** The expand control of a deep thread: every level ("more"), or back to the first HOST_LEVELS ("fewer"). */
  showLevels(track: number, levels: "more" | "fewer"): void {
    if (levels === "more") this.s.levels.delete(track);
    else this.s.levels.set(track, HOST_LEVELS);
    this.relayout();
    this.requestWindow(true);
  }

  // ------------------------------------------------------------------------------------------ view changes

  setView(v: ViewRange): void {
    this.s.view = clampView(v, this.s.bounds);
    this.painter.updateReadout();
    this.markDirty();
    this.scheduleFetch();
    window.clearTimeout(this.urlTimer);
    this.urlTimer = window.setTimeout(() => {
      const view = this.s.view;
      if (view && !this.ctx.signal.aborted) writeViewUrlState({ start: view.start.toFixed(3), end: view.end.toFixed(3) });
    }, 350);
  }

  animateTo(target: ViewRange): void {
    if (!this.s.view) {
      this.setView(target);
      return;
    }
    this.s.anim = { from: { ...this.s.view }, to: clampView(target, this.s.bounds), t0: performance.now() };
    this.markDirty();
  }

  fit(): void {
    if (this.s.bounds) this.animateTo({ start: this.s.bounds[0], end: this.s.bounds[1] });
  }

  /** The time axis of the current view (null before the first window). */
  private axis(): Axis | null {
    return this.s.view ? { width: this.s.width, labelW: this.s.labelW(), view: this.s.view } : null;
  }

  zoomAt(factor: number, x: number | null): void {
    const axis = this.axis();
    if (!axis) return;
    this.s.anim = null;
    this.setView(zoomView(axis, factor, anchorX(axis, x, this.input.mouseX)));
  }

  panBy(dt: number): void {
    if (!this.s.view) return;
    this.s.anim = null;
    this.setView(panView(this.s.view, dt));
  }

  pxToUs(px: number): number {
    const axis = this.axis();
    return axis ? pxToUs(axis, px) : 0;
  }

  /** Scroll to the lane of step `name` (its thread), now if the window has it, else when the next one comes. */
  revealStep(name: string): void {
    const at = this.s.data ? stepLane(this.s.data, name) : null;
    if (at) this.scrollToLane(at.track, at.depth);
    this.stepToReveal = at ? null : name;
  }

  scrollToLane(track: number, depth: number, rough = false): void {
    const row = this.s.layout.trackRows.get(track);
    if (!row) return;
    const y = laneTop(row, depth);
    const sc = this.el.scroller;
    const visible = this.s.height - HEADER_H;
    if (y < sc.scrollTop + 4 || y + 20 > sc.scrollTop + visible - 4) sc.scrollTop = Math.max(0, (rough ? row.y : y) - visible / 3);
  }

  // ------------------------------------------------------------------------------------------ the controllers' actions

  reveal(brief: EventBrief): void { this.selection.reveal(brief); }
  select(brief: EventBrief, depth: number | null = null): void { this.selection.select(brief, depth); }
  clearSelection(): void { this.selection.clear(); }
  zoomToSelected(): void { this.selection.zoomToSelected(); }
  zoomToEvent(start: number, dur: number): void { this.selection.zoomToEvent(start, dur); }
  updateSide(): void { this.selection.updateSide(); }
  commitRange(): void { this.ranges.commit(); }
  clearRange(): void { this.ranges.clear(); }
  zoomToRange(): void { this.ranges.zoomTo(); }
  updateCursor(hit: Hit | null): void { this.input.updateCursor(hit); }
  hideTooltip(): void { this.input.hideTooltip(); }
  markDirty(): void { this.painter.markDirty(); }
  resize(): void { this.painter.resize(); }

  runSearch(query: string): void {
    this.el.searchInput.value = query;
    void this.search.run(query, "first");
  }

  scene(): Scene | null {
    const s = this.s;
    if (!s.view || s.width <= 0 || s.height <= 0) return null;
    const sel = s.selection;
    return {
      width: s.width, height: s.height, labelW: s.labelW(), scrollTop: this.el.scroller.scrollTop, view: s.view,
      bounds: s.bounds, data: s.data, layout: s.layout, steps: s.steps, counterScale: s.counterScale,
      selection: sel ? { id: sel.id, track: sel.track, depth: sel.depth, start: sel.start, dur: sel.dur } : null,
      arrows: s.arrows, allFlows: s.allFlows, hover: s.hover, range: s.range, colours: s.colours, critical: this.criticalPath.marks,
    };
  }
}

export function render(container: HTMLElement, ctx: ViewContext): () => void {
  void loadSources(ctx); // classifies the frames of the details' call stacks (the user's first)
  const view = new TraceView(container, ctx);
  return view.mount();
}
