/**
 * The Memory view's snapshot mode (GET ./snapshot/summary, timeline, live, allocation, segments): an allocator
 * snapshot of the run, chosen in the Worker picker. It opens on the out-of-memory where the snapshot records one
 * (else the peak): the timeline of active memory (snapshotChart.ts) with that moment marked, what was live then
 * grouped by the frame that made it, by stack or by category, and the segments then. Hovering a band tells its
 * size, category, lifetime and stack (user frames first, library frames dimmed); a click pins it and lists its
 * neighbours at that moment; a click elsewhere moves the moment; a drag or the wheel zooms (a new window at the
 * canvas's detail), a double-click shows the whole history again.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatBytes } from "../../format";
import { loadView } from "../../loadView";
import { chartDiv } from "../common/charts";
import { csvFileName } from "../common/csv";
import { startCharts } from "../common/startCharts";
import type { Charts } from "../common/charts";
import { left } from "../common/ui";
import type { ViewContext } from "../types";
import { allocationCard, fragmentationFigure, LiveCard, SNAPSHOT_HELP, segmentsBody, stackList, summaryCard } from "./snapshotCards";
import { CHART_HEIGHT, type ChartMarks, SnapshotChart } from "./snapshotChart";
import {
  frameColor,
  momentLabel,
  type SnapshotAllocation,
  type SnapshotAllocationDetails,
  type SnapshotBand,
  type SnapshotSummary,
  type SnapshotWindow,
  windowOfColumns,
  zoomAround,
} from "./snapshotData";

declare global {
  interface Window {
    /** what the browser tests read: where the bands are drawn, and the page's moment and pin */
    __ptpSnapshot?: { bandsOnScreen(): ReturnType<SnapshotChart["bandsOnScreen"]>; state(): { moment: number | null; pinned: number | null; start: number; end: number } };
  }
}

class SnapshotPage {
  readonly root: HTMLElement;
  private readonly chart: SnapshotChart;
  private readonly tooltip = h("div", { class: "ptp-trace-tooltip ptp-snap-tooltip", testid: "snapshot-tooltip" });
  private readonly status = h("span", { class: "ptp-muted", testid: "snapshot-status", attrs: { "aria-live": "polite" } });
  private readonly legend = h("div", { class: "ptp-snap-legend", testid: "snapshot-legend" });
  private readonly live: LiveCard;
  private readonly pinnedSlot = h("div", {});
  private readonly segments = h("div", { testid: "snapshot-segments" });
  private readonly fragDiv = chartDiv("snapshot-fragmentation", 220);
  private win: SnapshotWindow | null = null;
  private range: { start: number; end: number } | null = null;
  private moment: number | null;
  private pinned: number | null = null;
  private groupBy = "frame";
  private charts: Charts | null = null;
  private readonly seq = { window: 0, moment: 0, pin: 0, hover: 0 };
  private readonly details = new Map<number, SnapshotAllocationDetails>();
  private hoverTimer: number | undefined;
  private resizeTimer: number | undefined;

  constructor(private readonly ctx: ViewContext, private readonly summary: SnapshotSummary, private readonly onDevice: (device: number) => void) {
    this.moment = summary.focus.position;
    this.chart = new SnapshotChart({
      onHover: (t, c, at) => { this.hover(t, c, at); },
      onPick: (t, p) => { this.pick(t, p); },
      onZoom: (cols, factor, c) => { this.zoom(cols, factor, c); },
    });
    this.chart.el.appendChild(this.tooltip);
    const csvName = (what: string) => (): string => csvFileName(what, ctx.run, summary.file, `entry${this.moment ?? 0}`);
    this.live = new LiveCard(csvName, (by) => { this.groupBy = by; void this.loadMoment(); }, (a) => { void this.pin(a.id); });
    this.root = h("div", { class: "ptp-view ptp-memory ptp-snapshot", testid: "snapshot-view", dataset: { file: summary.file, device: String(summary.device), position: String(this.moment) } },
      summaryCard(summary, this.deviceSelect(), (p) => { this.setMoment(p); }),
      card({ testid: "card-snapshot-timeline" },
        h("div", { class: "ptp-card-head" }, h("h3", {}, "Active memory over time"), infoIcon("Each allocation is a band from its alloc to its free, stacked in allocation order and coloured by the frame that made it; grey: allocations too small to draw one by one at this zoom; dashed: reserved bytes."),
          h("span", { class: "ptp-toolbar-gap" }), this.status,
          h("button", { class: "ptp-button", testid: "snapshot-reset", attrs: { type: "button" }, onClick: () => { this.zoom(null, 1, 0); } }, "Whole history")),
        this.chart.el, this.legend,
        h("p", { class: "ptp-muted ptp-card-foot" }, "Hover a band for its size, lifetime and stack; click it to pin it (and see what lay around it); click elsewhere to look at that moment; drag across or use the wheel to zoom, double-click for the whole history.")),
      this.live.el, this.pinnedSlot,
      card({ testid: "card-snapshot-segments" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Segments at the moment"), infoIcon(SNAPSHOT_HELP.fragmentation)), this.segments, this.fragDiv),
    );
  }

  private deviceSelect(): HTMLElement | null {
    const devices = this.summary.devices;
    if (devices.length < 2) return null;
    const select = h("select", { testid: "snapshot-device", attrs: { "aria-label": "Device" }, onChange: () => { this.onDevice(Number(select.value)); } },
      devices.map((d) => h("option", { attrs: { value: d.device, selected: d.device === this.summary.device } }, `${d.label} (${d.entries} entries)`)));
    return h("label", { class: "ptp-picker" }, "Device", select);
  }

  private query(): { run: string; snapshot: string; device: number } {
    return { run: this.ctx.run, snapshot: this.ctx.snapshot ?? "", device: this.summary.device };
  }

  start(): void {
    window.__ptpSnapshot = {
      bandsOnScreen: () => this.chart.bandsOnScreen(),
      state: () => ({ moment: this.moment, pinned: this.pinned, start: this.win?.start ?? 0, end: this.win?.end ?? 0 }),
    };
    this.ctx.onResize(({ width }) => {
      window.clearTimeout(this.resizeTimer);
      this.resizeTimer = window.setTimeout(() => { this.resized(width); }, 120);
    });
    this.resized(this.root.clientWidth || 900);
    void this.loadMoment();
    void this.drawFragmentation();
  }

  private resized(width: number): void {
    const before = this.chart.columns();
    this.chart.resize(Math.max(320, width - 36));
    if (!this.win || this.chart.columns() !== before) void this.loadWindow();
  }

  private marks(): ChartMarks {
    return { peak: this.summary.peak.position, oom: this.summary.oom?.position ?? null, moment: this.moment, pinned: this.pinned, startUs: this.summary.start_us };
  }

  private async loadWindow(): Promise<void> {
    const my = ++this.seq.window;
    this.status.textContent = "Loading…";
    this.chart.el.dataset["loading"] = "true";
    try {
      const win = await this.ctx.api.get("snapshot/timeline", {
        ...this.query(), width_px: this.chart.columns(), height_px: CHART_HEIGHT, ...(this.range ?? {}),
        ...(this.pinned !== null ? { pin: this.pinned } : {}),
      }, { signal: this.ctx.signal });
      if (my !== this.seq.window || left(this.ctx)) return;
      this.win = win;
      this.chart.set(win, this.marks());
      this.status.textContent = win.positions === 0
        ? "No history was recorded: below is what was live when the snapshot was taken."
        : `entries ${win.start.toLocaleString("en-US")}–${win.end.toLocaleString("en-US")} of ${win.positions.toLocaleString("en-US")}; bands of ${formatBytes(win.smaller_than_bytes)} and more`;
      this.drawLegend(win);
    } catch (err) {
      if (my !== this.seq.window || left(this.ctx)) return;
      this.status.textContent = `Could not load the timeline: ${err instanceof Error ? err.message : String(err)}`;
    } finally {
      if (my === this.seq.window) this.chart.el.dataset["loading"] = "false";
    }
  }

  /** The frames with the most bytes in the window's bands, with their colours. */
  private drawLegend(win: SnapshotWindow): void {
    const bytes = new Map<number, number>();
    for (const b of win.bands) bytes.set(b.frame, (bytes.get(b.frame) ?? 0) + b.size);
    const top = [...bytes.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10);
    replaceChildren(this.legend, top.map(([f]) => {
      const label = win.frames[f]?.label ?? "";
      return h("span", { class: "ptp-snap-legend-item", title: label }, h("span", { class: "ptp-snap-swatch", style: { background: frameColor(label) } }), label);
    }));
  }

  private zoom(cols: [number, number] | null, factor: number, column: number): void {
    const win = this.win;
    if (!win) return;
    if (cols) this.range = windowOfColumns(win, cols[0], cols[1]);
    else if (factor !== 1) this.range = zoomAround(win, column, factor);
    else this.range = null;
    if (this.range && this.range.start <= 0 && this.range.end >= win.positions - 1) this.range = null;
    void this.loadWindow();
  }

  setMoment(p: number): void {
    this.moment = p;
    this.root.dataset["position"] = String(p);
    const win = this.win;
    if (win && (p < win.start || p > win.end)) {
      const span = win.end - win.start;
      const start = Math.max(0, Math.min(p - Math.floor(span / 2), win.positions - 1 - span));
      this.range = { start, end: start + span };
      void this.loadWindow();
    } else {
      this.chart.set(win, this.marks());
    }
    void this.loadMoment();
    void this.drawFragmentation();
  }

  private pick(target: SnapshotBand | "other" | null, position: number): void {
    if (target && target !== "other") void this.pin(target.id);
    this.setMoment(position);
  }

  private async loadMoment(): Promise<void> {
    const my = ++this.seq.moment;
    const at = this.moment ?? this.summary.peak.position;
    try {
      const [live, segs] = await Promise.all([
        this.ctx.api.get("snapshot/live", { ...this.query(), at, group_by: this.groupBy as "frame" }, { signal: this.ctx.signal }),
        this.ctx.api.get("snapshot/segments", { ...this.query(), at }, { signal: this.ctx.signal }),
      ]);
      if (my !== this.seq.moment || left(this.ctx)) return;
      const why = at === this.summary.oom?.position ? " (the out-of-memory)" : at === this.summary.peak.position ? " (the peak)" : "";
      this.live.set(live, `At ${momentLabel(at, live.time_us, this.summary.start_us)}${why}`, this.summary.start_us);
      replaceChildren(this.segments, segmentsBody(segs));
    } catch (err) {
      if (my !== this.seq.moment || left(this.ctx)) return;
      replaceChildren(this.segments, h("p", { class: "ptp-error-text" }, `Could not load that moment: ${err instanceof Error ? err.message : String(err)}`));
    }
  }

  private async details_(id: number, at: number | null): Promise<SnapshotAllocationDetails> {
    const key = id * 1e7 + (at ?? -1);
    const known = this.details.get(key);
    if (known) return known;
    const d = await this.ctx.api.get("snapshot/allocation", { ...this.query(), id, ...(at !== null ? { at } : {}) }, { signal: this.ctx.signal });
    if (this.details.size > 500) this.details.clear();
    this.details.set(key, d);
    return d;
  }

  private async pin(id: number | null): Promise<void> {
    const my = ++this.seq.pin;
    this.pinned = id;
    this.root.dataset["pinned"] = id === null ? "" : String(id);
    this.chart.set(this.win, this.marks());
    if (id === null) {
      replaceChildren(this.pinnedSlot);
      return;
    }
    if (this.win && !this.win.bands.some((b) => b.id === id)) void this.loadWindow();
    try {
      const d = await this.details_(id, this.moment);
      if (my !== this.seq.pin || left(this.ctx)) return;
      replaceChildren(this.pinnedSlot, allocationCard(d, this.summary.start_us, (a: SnapshotAllocation) => { void this.pin(a.id); }, () => { void this.pin(null); }));
    } catch (err) {
      if (my !== this.seq.pin || left(this.ctx)) return;
      replaceChildren(this.pinnedSlot, h("p", { class: "ptp-error-text" }, `Could not load that allocation: ${err instanceof Error ? err.message : String(err)}`));
    }
  }

  private hover(target: SnapshotBand | "other" | null, column: number, at: { x: number; y: number }): void {
    window.clearTimeout(this.hoverTimer);
    const tip = this.tooltip;
    const win = this.win;
    if (!target || !win) {
      tip.style.display = "none";
      delete tip.dataset["id"];
      return;
    }
    tip.style.display = "block";
    tip.style.left = `${Math.min(at.x + 14, this.chart.el.clientWidth - 380)}px`;
    tip.style.top = `${Math.max(0, at.y - 10)}px`;
    if (target === "other") {
      tip.dataset["id"] = "other";
      replaceChildren(tip, h("div", { class: "ptp-trace-tip-name" }, `${formatBytes(win.other_bytes[column] ?? 0)} in allocations smaller than ${formatBytes(win.smaller_than_bytes)}`),
        h("div", { class: "ptp-muted" }, "Not drawn one by one at this zoom: zoom in, or see the live set below."));
      return;
    }
    const label = win.frames[target.frame]?.label ?? "";
    tip.dataset["id"] = String(target.id);
    const stack = h("div", { class: "ptp-snap-tip-stack" }, h("span", { class: "ptp-muted" }, "…"));
    replaceChildren(tip,
      h("div", { class: "ptp-trace-tip-name", testid: "snapshot-tip-frame" }, h("span", { class: "ptp-snap-swatch", style: { background: frameColor(label) } }), label),
      h("div", {}, `${formatBytes(target.size)} · ${target.category.replace("_", " ")}`),
      h("div", { class: "ptp-muted", testid: "snapshot-tip-life" }, `${momentLabel(target.start, null, null)} → ${target.end >= win.positions ? "live at the end" : momentLabel(target.end, null, null)}`),
      stack);
    const my = ++this.seq.hover;
    this.hoverTimer = window.setTimeout(() => {
      void this.details_(target.id, null).then((d) => {
        if (my !== this.seq.hover || tip.dataset["id"] !== String(target.id)) return;
        replaceChildren(stack, h("div", { class: "ptp-muted" }, `lived ${d.lifetime_us !== null ? `${(d.lifetime_us / 1000).toFixed(2)} ms` : "to the end"}`), stackList(d.stack, 8));
      }).catch(() => { stack.textContent = ""; });
    }, 120);
  }

  private async drawFragmentation(): Promise<void> {
    if (!this.charts) {
      this.charts = await startCharts(this.ctx, this.fragDiv, () => undefined, "The fragmentation chart");
    }
    if (!this.charts || left(this.ctx)) return;
    await this.charts.draw(this.fragDiv, () => fragmentationFigure(this.summary, this.moment));
  }

  dispose(): void {
    window.clearTimeout(this.hoverTimer);
    window.clearTimeout(this.resizeTimer);
    this.charts?.dispose();
    if (window.__ptpSnapshot) delete window.__ptpSnapshot;
  }
}

/** The snapshot mode of the Memory view, for `ctx.snapshot`: one device's page at a time (the device picker
 * replaces it with another's). */
export async function renderSnapshot(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  let current: SnapshotPage | null = null;
  const show = async (device?: number): Promise<boolean> => {
    const query = { run: ctx.run, snapshot: ctx.snapshot ?? "", ...(device !== undefined ? { device } : {}) };
    const loaded = await loadView(ctx, container, {
      summary: () => ctx.api.get("snapshot/summary", query, { signal: ctx.signal }),
    }, { what: "the allocator snapshot" });
    if (!loaded) return false;
    current?.dispose();
    current = new SnapshotPage(ctx, loaded.summary, (d) => { void show(d); });
    replaceChildren(container, current.root);
    current.start();
    return true;
  };
  if (!(await show())) return undefined;
  return () => { current?.dispose(); };
}
