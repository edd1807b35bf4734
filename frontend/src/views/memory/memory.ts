/**
 * The Memory page (GET ./memory/curve, ./memory/events, ./memory/stats): a device picker, the
 * allocated/reserved memory of the device over time as a step plot with its peak marked, and two
 * tables (allocation/free pairs, statistics per operator). Zooming the chart's x-axis (drag across
 * it) selects a time range: both tables are then re-queried for that range (absolute µs); Reset or
 * a double-click goes back to the whole trace. Clicking an event row marks its allocation and
 * release on the chart. Times are ms from the trace start.
 *
 * The events table is paged on the server (memoryEvents.ts): a sort, a search, the size filter, the device, the
 * range or the peak's instant asks for one page; the CSV export asks for every matching row, page by page.
 */
import { card, infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { formatBytes, formatDuration, formatExactUs, formatInt, formatMs, isNum } from "../../format";
import { loadView } from "../common/loadView";
import type { PlotlyHTMLElement } from "plotly.js-dist-min";
import type { Theme } from "../../theme";
import { type Charts, chartDiv, type Figure } from "../common/charts";
import { loadSources } from "../common/callStack";
import { bytesColumn } from "../common/columns";
import { csvFileName } from "../common/csv";
import { startCharts } from "../common/startCharts";
import { clampedName, type Column, DataTable, type ServerQuery } from "../common/table";
import { left, spanGet } from "../common/ui";
import { memoryCategoriesCard } from "./memoryCategories";
import { memoryFigure } from "./memoryChart";
import {
  type CurveDevice,
  type CurveResponse,
  defaultDevice,
  deviceList,
  eventKey,
  type MemoryEvent,
  type MemoryStat,
  minBytesOf,
  normalizeCurve,
  peakLabel,
  peakOf,
  rangeFileSuffix,
  rangeText,
  relayoutRange,
  rowsOf,
  SIZE_UNITS,
  timeOrigin,
} from "./memoryData";
import { type EventsPage, eventsParams, type EventsWhere, everyRow, normalizeEventsPage } from "./memoryEvents";
import { inRangeColumn, LIVE_HELP, liveSummary, stackExpand } from "./memoryLive";
import { renderSnapshot } from "./snapshot";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import type { ViewContext } from "../types";

export const MEMORY_HELP = {
  operator:
    "The operator that made the allocation (the deepest one on its thread). Allocator primitives are shown with their caller: \"caller (aten::empty…)\".",
  size: "Bytes allocated.",
  alloc: "When the memory was allocated, in ms from the trace start.",
  free: "When the memory was released, in ms from the trace start.",
  lifetime: "Release time − allocation time.",
  calls: "Calls of the operator that allocated or released memory on this device (in the selected range).",
  sizeIncrease:
    "Bytes allocated minus bytes released during the operator, including the operators it calls. Negative when it released more than it allocated.",
  selfSizeIncrease:
    "Bytes allocated minus bytes released by the operator itself (self = not in the operators it calls).",
  allocCount: "Number of allocations during the operator, including those of the operators it calls.",
  selfAllocCount: "Number of allocations made by the operator itself (self = not in the operators it calls).",
  allocSize: "Bytes allocated during the operator, including the operators it calls (releases not subtracted).",
  selfAllocSize: "Bytes allocated by the operator itself (self = not in the operators it calls; releases not subtracted).",
  allocated: "Memory held by live tensors (PyTorch's \"Total Allocated\").",
  reserved: "Memory the caching allocator holds from the device, allocated or cached for reuse (\"Total Reserved\").",
};

function tag(text: string, testid: string, title: string): HTMLElement {
  return h("span", { class: "ptp-tag ptp-tag-muted", testid, title }, text);
}

/** A time column of the events table: ms from the trace start, a tag where the trace does not hold the time. */
function timeColumn(key: string, label: string, help: string, origin: number, get: (e: MemoryEvent) => number | null, missing: { tag: string; testid: string; title: string; cell: string }): Column<MemoryEvent> {
  return {
    key,
    label,
    help,
    numeric: true,
    value: (e) => {
      const t = get(e);
      return isNum(t) ? t - origin : null;
    },
    render: (e) => {
      const t = get(e);
      return isNum(t) ? formatMs(t - origin) : tag(missing.tag, missing.testid, missing.title);
    },
    title: (e) => {
      const t = get(e);
      return isNum(t) ? `${formatExactUs(t - origin)} from the trace start (absolute ${formatExactUs(t)})` : missing.cell;
    },
    csvHeader: `${label} (us from trace start)`,
  };
}

/** The columns of the events table; `isMarked` tells the row marked on the chart. */
function eventColumns(origin: number, isMarked: (e: MemoryEvent) => boolean): Column<MemoryEvent>[] {
  const markCell = (e: MemoryEvent): Child =>
    h(
      "span",
      { class: "ptp-mem-op" },
      isMarked(e) ? h("span", { class: "ptp-mem-marked", testid: "memory-marked", title: "Marked on the chart", attrs: { "aria-label": "marked on the chart" } }) : null,
      clampedName(e.name, "memory-op"),
    );
  return [
    { key: "name", label: "Operator", help: MEMORY_HELP.operator, value: (e) => e.name, render: markCell, title: (e) => e.name, cls: "ptp-name-col" },
    {
      key: "size",
      label: "Size",
      help: MEMORY_HELP.size,
      numeric: true,
      value: (e) => e.size_bytes,
      text: (e) => formatBytes(e.size_bytes),
      exact: (e) => `${formatInt(e.size_bytes)} bytes`,
      csvHeader: "Size (bytes)",
    },
    timeColumn("alloc", "Allocation time", MEMORY_HELP.alloc, origin, (e) => e.alloc_us, {
      tag: "allocated before trace", testid: "badge-before-trace", title: "Released in the trace, but allocated before it started.", cell: "Allocated before the trace started.",
    }),
    timeColumn("free", "Release time", MEMORY_HELP.free, origin, (e) => e.free_us, {
      tag: "not freed in trace", testid: "badge-not-freed", title: "Still allocated when the trace ended.", cell: "Not released before the trace ended.",
    }),
    {
      key: "lifetime",
      label: "Lifetime",
      help: MEMORY_HELP.lifetime,
      numeric: true,
      value: (e) => (isNum(e.lifetime_us) ? e.lifetime_us : null),
      text: (e) => formatDuration(e.lifetime_us),
      title: (e) =>
        isNum(e.lifetime_us)
          ? `${formatExactUs(e.lifetime_us)}\n${MEMORY_HELP.lifetime}`
          : e.free_us === null
            ? "Unknown: not released inside the trace."
            : "Unknown: allocated before the trace started.",
      csvHeader: "Lifetime (us)",
    },
  ];
}

function countCol(key: string, label: string, help: string, get: (s: MemoryStat) => number): Column<MemoryStat> {
  return { key, label, help, numeric: true, value: get, text: (s) => formatInt(get(s)) };
}

const STAT_COLUMNS: Column<MemoryStat>[] = [
  { key: "name", label: "Operator", value: (s) => s.name, render: (s) => clampedName(s.name, "memory-stat-op"), title: (s) => s.name, cls: "ptp-name-col" },
  countCol("calls", "Calls", MEMORY_HELP.calls, (s) => s.calls),
  bytesColumn<MemoryStat>("size_increase", "Size increase", MEMORY_HELP.sizeIncrease, (s) => s.size_increase_bytes, true),
  bytesColumn<MemoryStat>("self_size_increase", "Self size increase", MEMORY_HELP.selfSizeIncrease, (s) => s.self_size_increase_bytes, true),
  countCol("allocation_count", "Allocation count", MEMORY_HELP.allocCount, (s) => s.allocation_count),
  countCol("self_allocation_count", "Self allocation count", MEMORY_HELP.selfAllocCount, (s) => s.self_allocation_count),
  bytesColumn<MemoryStat>("allocation_size", "Allocation size", MEMORY_HELP.allocSize, (s) => s.allocation_size_bytes),
  bytesColumn<MemoryStat>("self_allocation_size", "Self allocation size", MEMORY_HELP.selfAllocSize, (s) => s.self_allocation_size_bytes),
];

/** What the page loaded: the curves, the first page of events (all devices: which devices have events) and the
 * whole trace's statistics. */
interface MemoryData {
  curve: CurveResponse;
  firstEvents: EventsPage;
  allStats: MemoryStat[];
}

interface State {
  device: string;
  /** selected range, absolute µs; null = whole trace */
  range: [number, number] | null;
  minBytes: number;
  marked: MemoryEvent | null;
  /** statistics of the selected range (null = use the whole-trace rows) */
  rangeStats: MemoryStat[] | null;
  /** the instant whose live allocations the events table shows (absolute µs), null otherwise */
  liveAt: number | null;
}

function emptyCard(reason: string | null): HTMLElement {
  return card(
    { class: "ptp-empty", testid: "memory-empty", title: "No memory data" },
    h("p", { testid: "memory-reason" }, reason ?? "The trace has no memory records."),
    h("p", { class: "ptp-muted" }, "Record with ", h("code", {}, "torch.profiler.profile(profile_memory=True)"), " to see memory over time."),
  );
}

/** The curve card's controls and places, built once; the page fills them. */
interface CurveCard {
  el: HTMLElement;
  deviceSelect: HTMLSelectElement;
  peakEl: HTMLElement;
  rangeEl: HTMLElement;
  resetBtn: HTMLButtonElement;
  statusEl: HTMLElement;
  curveDiv: HTMLElement;
  noCurve: HTMLElement;
}

function curveCard(devices: readonly string[], device: string, hasCurves: boolean, on: { device: () => void; peakLive: () => void; reset: () => void }): CurveCard {
  const deviceSelect = h(
    "select",
    { testid: "memory-device", attrs: { "aria-label": "Device" }, onChange: on.device },
    devices.map((d) => h("option", { attrs: { value: d, selected: d === device } }, d)),
  );
  const peakEl = h("span", { class: "ptp-mem-peak", testid: "memory-peak" });
  const peakLive = h(
    "button",
    { class: "ptp-button", testid: "memory-peak-live", title: LIVE_HELP.live, attrs: { type: "button" }, onClick: on.peakLive },
    "Allocations live at the peak",
  );
  const rangeEl = h("span", { class: "ptp-muted", testid: "memory-range", attrs: { "aria-live": "polite" } });
  const resetBtn = h(
    "button",
    { class: "ptp-button", testid: "memory-reset", title: "Show the whole trace again (or double-click the chart)", attrs: { type: "button" }, onClick: on.reset },
    "Reset",
  );
  const statusEl = h("span", { class: "ptp-muted ptp-break", testid: "memory-status", attrs: { "aria-live": "polite" } });
  const curveDiv = chartDiv("memory-curve", 360);
  const noCurve = h("div", { class: "ptp-note", testid: "memory-reason" });
  const hint = h(
    "p",
    { class: "ptp-muted ptp-card-foot" },
    "Drag across the chart to list only that time range in the tables below; double-click the chart or press Reset for the whole trace. Click a row of Memory events to mark its allocation and release here.",
  );
  const el = card(
    { testid: "card-memory-curve" },
    h(
      "div",
      { class: "ptp-card-head" },
      h("h3", {}, "Memory usage"),
      h("label", { class: "ptp-picker" }, "Device", deviceSelect),
      peakEl,
      hasCurves ? peakLive : null,
      h("span", { class: "ptp-toolbar-gap" }),
      rangeEl,
      resetBtn,
    ),
    curveDiv,
    noCurve,
    hasCurves ? hint : null,
    statusEl,
  );
  return { el, deviceSelect, peakEl, rangeEl, resetBtn, statusEl, curveDiv, noCurve };
}

/** The "Min size" filter of the events table: a number and its unit (KiB at first). */
function minSizeFilter(onChange: (bytes: number) => void): HTMLElement {
  const changed = (): void => { onChange(minBytesOf(minInput.value, unitSelect.value)); };
  const minInput = h("input", {
    testid: "memory-min-size",
    attrs: { type: "number", min: 0, step: "any", value: 0, "aria-label": "Minimum size" },
    onInput: changed,
  });
  const unitSelect = h(
    "select",
    { testid: "memory-min-size-unit", attrs: { "aria-label": "Unit of the minimum size" }, onChange: changed },
    SIZE_UNITS.map((u) => h("option", { attrs: { value: u.bytes, selected: u.label === "KiB" } }, u.label)),
  );
  return h("label", { class: "ptp-picker", title: "Hide allocations smaller than this" }, "Min size", minInput, unitSelect);
}

/** Calls `onRow` with the row of `table` a click lands on (not on a control inside it). */
function onRowClick<R>(table: DataTable<R>, onRow: (row: R) => void): void {
  table.el.addEventListener("click", (ev) => {
    const target = ev.target;
    if (!(target instanceof Element) || target.closest("button, a, input, select, textarea")) return;
    const tr = target.closest("tr");
    const tbody = tr?.parentElement;
    if (!tr || !tbody || tbody.tagName !== "TBODY" || tr.dataset["testid"] !== "row") return;
    const index = [...tbody.children].filter((c) => c instanceof HTMLElement && c.dataset["testid"] === "row").indexOf(tr);
    const row = table.visibleRows()[index];
    if (row) onRow(row);
  });
}

function tableCard(testid: string, title: string, help: string, sub: string, table: HTMLElement): HTMLElement {
  return card(
    { testid },
    h("div", { class: "ptp-card-head" }, h("h3", {}, title), infoIcon(help)),
    h("p", { class: "ptp-muted ptp-card-sub" }, sub),
    table,
  );
}

/**
 * The page once loaded: the chosen device, range, size filter and mark (`state`), the cards that show them, and
 * the requests of a selected range (the newest one wins: `seq`).
 */
class MemoryPage {
  readonly root: HTMLElement;
  private readonly state: State;
  private readonly origin: number;
  private readonly hasCurves: boolean;
  private readonly head: CurveCard;
  private readonly eventsTable: DataTable<MemoryEvent>;
  private readonly statsTable: DataTable<MemoryStat>;
  private readonly eventsRangeTag = h("span", { class: "ptp-muted", testid: "memory-events-range" });
  private readonly statsRangeTag = h("span", { class: "ptp-muted", testid: "memory-stats-range" });
  private readonly eventsCard: HTMLElement;
  private readonly eventColumns: Column<MemoryEvent>[];
  private readonly categories: ReturnType<typeof memoryCategoriesCard>;
  private charts: Charts | null = null;
  private listening = false;
  private reloadTimer: number | undefined;
  private reloadCtl: AbortController | null = null;
  private seq = 0;
  /** the newest request of an events page wins */
  private eventsSeq = 0;
  private eventsCtl: AbortController | null = null;

  constructor(private readonly ctx: ViewContext, private readonly data: MemoryData, devices: readonly string[], first: string) {
    this.origin = timeOrigin(data.curve, data.firstEvents.rows);
    this.hasCurves = Object.values(data.curve.devices).some((d) => d.points.length > 0);
    this.state = { device: first, range: null, minBytes: 0, marked: null, rangeStats: null, liveAt: null };
    this.head = curveCard(devices, first, this.hasCurves, {
      device: () => { this.setDevice(this.head.deviceSelect.value); },
      peakLive: () => { void this.showLiveAtPeak(); },
      reset: () => { this.setRange(null, true); },
    });
    const csvName = (what: string) => (): string =>
      csvFileName(what, ctx.run, ctx.worker, `span${ctx.span}`, this.state.device, rangeFileSuffix(this.state.range, this.origin));
    this.eventsTable = new DataTable<MemoryEvent>({
      testid: "memory-events-table",
      csvName: csvName("memory_events"),
      controls: [minSizeFilter((bytes) => { this.setMinBytes(bytes); }), this.eventsRangeTag],
      pageSize: 20,
      emptyText: "No allocations on this device in the selected range.",
      server: {
        fetch: (q) => { void this.fetchEvents(q, this.where()); },
        exportRows: async (q) => { const where = this.where(); return everyRow(q, (p) => this.getEvents(where, p)); },
      },
    });
    // A click on a row marks that allocation on the chart (again: unmark).
    onRowClick(this.eventsTable, (row) => { this.toggleMark(row); });
    this.eventColumns = eventColumns(this.origin, (e) => this.state.marked !== null && eventKey(this.state.marked) === eventKey(e));
    this.statsTable = new DataTable<MemoryStat>({
      testid: "memory-stats-table",
      csvName: csvName("memory_stats"),
      controls: this.statsRangeTag,
      emptyText: "No operator allocated or released memory on this device in the selected range.",
    });
    this.eventsCard = tableCard("card-memory-events", "Memory events",
      "Each allocation paired with its release (same device and address). Times are ms from the trace start.",
      "Allocations paired with their releases. Click a row to mark it on the chart.", this.eventsTable.el);
    const statsCard = tableCard("card-memory-stats", "Memory statistics",
      "Per operator name: \"self\" counts allocations made in the operator itself; the other columns include the operators it calls. Size increase = allocations − releases.",
      "Per operator name on the selected device; self = in the operator itself, not in the operators it calls.", this.statsTable.el);
    this.categories = memoryCategoriesCard(ctx, first, this.origin);
    this.root = h(
      "div",
      { class: "ptp-view ptp-memory", testid: "memory-view", dataset: { device: first, loading: "false", startUs: "", endUs: "" } },
      this.head.el,
      this.categories.el,
      this.hasCurves || data.firstEvents.total > 0 ? this.eventsCard : null,
      statsCard,
    );
  }

  /** Show the tables and the curve; a link from the Overview's evidence may name a device and a time range (absolute µs). */
  start(): void {
    const linked = readViewUrlState();
    if (linked.device !== undefined || linked.start !== undefined) {
      if (linked.device !== undefined && linked.device in this.data.curve.devices) {
        this.state.device = linked.device;
        this.head.deviceSelect.value = linked.device;
        this.root.dataset["device"] = linked.device;
        this.categories.setDevice(linked.device);
      }
      const lo = Number(linked.start);
      const hi = Number(linked.end);
      writeViewUrlState({ device: undefined, start: undefined, end: undefined });
      if (Number.isFinite(lo) && Number.isFinite(hi) && hi > lo) this.setRange([lo, hi], false);
    }
    this.updateRangeUi();
    void this.applyEvents();
    this.applyStats();
    this.updateCurve();
  }

  /** Draw the curve once plotly is loaded (a page without curves draws nothing). Null when the user left. */
  async drawCharts(): Promise<(() => void) | undefined> {
    if (this.hasCurves) {
      await startCharts(this.ctx, this.head.curveDiv, (charts) => {
        this.charts = charts;
        this.updateCurve();
      }, "The chart");
      if (left(this.ctx)) return undefined;
    }
    return () => {
      window.clearTimeout(this.reloadTimer);
      this.reloadCtl?.abort();
      this.eventsCtl?.abort();
      this.charts?.dispose();
      this.categories.dispose();
    };
  }

  private setDevice(device: string): void {
    this.state.device = device;
    this.state.marked = null;
    this.root.dataset["device"] = device;
    this.categories.setDevice(device);
    this.updateCurve();
    void this.applyEvents();
    this.applyStats();
  }

  private setMinBytes(bytes: number): void {
    if (bytes === this.state.minBytes) return;
    this.state.minBytes = bytes;
    void this.applyEvents();
  }

  private toggleMark(row: MemoryEvent): void {
    const { marked } = this.state;
    this.state.marked = marked && eventKey(marked) === eventKey(row) ? null : row;
    this.eventsTable.refresh();
    this.redrawCurve();
  }

  private updateRangeUi(): void {
    const { range } = this.state;
    const text = rangeText(range, this.origin);
    this.head.rangeEl.textContent = range ? `Range ${text}` : this.hasCurves ? "Whole trace" : "";
    this.head.resetBtn.disabled = range === null && this.state.liveAt === null;
    this.head.resetBtn.hidden = !this.hasCurves;
    const label = range ? `Range: ${text}` : "";
    this.eventsRangeTag.textContent = label;
    this.statsRangeTag.textContent = label;
    this.root.dataset["startUs"] = range ? String(range[0]) : "";
    this.root.dataset["endUs"] = range ? String(range[1]) : "";
  }

  /** Which pairs the events table lists now. */
  private where(): EventsWhere {
    const { device, range, liveAt, minBytes } = this.state;
    return { device, range, liveAt, minBytes };
  }

  /** One page of events (`where`, `q`): aborted when the page is left; dropped (never shown) when a newer request
   * made it moot (`signal`: a page is cheap to answer, so the request itself is let finish). */
  private async getEvents(where: EventsWhere, q: ServerQuery, signal?: AbortSignal): Promise<EventsPage> {
    const raw = await spanGet(this.ctx, "memory/events", eventsParams(where, q));
    if (signal?.aborted) throw new DOMException("superseded", "AbortError");
    return normalizeEventsPage(raw);
  }

  /** Ask for the first page of the events table again (a filter, the device or the range changed), keeping its
   * sort and search; `defaultSort`: the server's default sort (largest first at an instant, else by time). */
  private applyEvents(defaultSort = false): Promise<EventsPage | null> {
    const q = this.eventsTable.query(0);
    return this.fetchEvents(defaultSort ? { ...q, sort: null } : q, this.where());
  }

  /** Ask for a page and show it, unless a newer request came meanwhile; the page shown, null otherwise (then the
   * table keeps the rows it had and the status says why on a failure). */
  private async fetchEvents(q: ServerQuery, where: EventsWhere): Promise<EventsPage | null> {
    const my = ++this.eventsSeq;
    this.eventsCtl?.abort();
    const ctl = new AbortController();
    this.eventsCtl = ctl;
    this.eventsTable.el.dataset["loading"] = "true";
    try {
      const page = await this.getEvents(where, q, ctl.signal);
      if (my !== this.eventsSeq || left(this.ctx)) return null;
      this.showEvents(page, where);
      return page;
    } catch (err) {
      if (my !== this.eventsSeq || left(this.ctx)) return null;
      this.eventsTable.el.dataset["loading"] = "false";
      this.head.statusEl.textContent = `Could not load the memory events: ${err instanceof Error ? err.message : String(err)} The table still shows the previous rows.`;
      return null;
    }
  }

  private showEvents(page: EventsPage, where: EventsWhere): void {
    const { state } = this;
    if (state.marked && state.marked.device !== state.device) state.marked = null;
    this.eventsTable.setData({
      columns: where.range && where.liveAt === null ? [...this.eventColumns, inRangeColumn()] : this.eventColumns,
      rows: page.rows,
      page: { offset: page.offset, total: page.total, unfiltered: page.unfiltered },
      searches: [{ key: "name", label: "Search operators", placeholder: "Search operator names", text: (e) => e.name }],
      sort: page.sort,
      expand: stackExpand,
      rowKey: eventKey,
    });
    this.root.dataset["events"] = String(page.total);
    if (where.liveAt !== null) this.liveTag(page, where.liveAt);
  }

  /** The range tag at an instant: how many allocations are live then, over every page, and what they hold. */
  private liveTag(page: EventsPage, at: number): void {
    const live = { count: page.unfiltered, bytes: page.unfilteredBytes, allocatedBytes: page.allocatedBytes };
    this.eventsRangeTag.textContent = liveSummary(live, `the peak (${formatMs(at - this.origin)})`);
  }

  private applyStats(): void {
    const rows = (this.state.rangeStats ?? this.data.allStats).filter((s) => s.device === this.state.device);
    this.statsTable.setData({
      columns: STAT_COLUMNS,
      rows,
      searches: [{ key: "name", label: "Search operators", placeholder: "Search operator names", text: (s) => s.name }],
      sort: { key: "allocation_size", dir: "desc" },
      rowKey: (s) => `${s.device}\u0000${s.name}`,
    });
    this.root.dataset["stats"] = String(rows.length);
  }

  /** The events table lists the allocations live at the device's peak (what the peak is made of), largest first. */
  private async showLiveAtPeak(): Promise<void> {
    const dev = this.device();
    if (!dev) return;
    const peak = peakOf(dev);
    ++this.seq; // a range still loading is moot
    this.reloadCtl?.abort();
    const status = this.head.statusEl;
    status.textContent = "Loading the allocations live at the peak…";
    const where = { ...this.where(), range: null, liveAt: peak.t };
    const page = await this.fetchEvents({ ...this.eventsTable.query(0), sort: null }, where);
    if (!page || left(this.ctx)) return;
    Object.assign(this.state, { range: null, liveAt: peak.t, rangeStats: null });
    status.textContent = "";
    this.updateRangeUi();
    this.liveTag(page, peak.t); // updateRangeUi cleared it
    this.head.rangeEl.textContent = `Live at the peak, ${formatMs(peak.t - this.origin)}`;
    this.applyStats();
    this.eventsCard.scrollIntoView({ block: "start", behavior: "smooth" });
  }

  private setRange(range: [number, number] | null, redraw: boolean): void {
    const { state } = this;
    const same = range === null ? state.range === null && state.liveAt === null : state.range !== null && state.range[0] === range[0] && state.range[1] === range[1];
    if (same && !redraw) return;
    state.range = range;
    state.liveAt = null;
    this.updateRangeUi();
    if (redraw) this.redrawCurve();
    if (same) return;
    this.root.dataset["loading"] = "true";
    window.clearTimeout(this.reloadTimer);
    this.reloadTimer = window.setTimeout(() => {
      void this.reload();
    }, 150);
  }

  /** Both tables for the selected range (or the whole trace's rows again); a failure keeps the previous rows. */
  private async reload(): Promise<void> {
    const { ctx } = this;
    const my = ++this.seq;
    this.reloadCtl?.abort();
    this.reloadCtl = null;
    const range = this.state.range;
    const status = this.head.statusEl;
    if (!range) {
      this.state.rangeStats = null;
      status.textContent = "";
      this.applyStats();
      await this.applyEvents();
      if (my === this.seq) this.root.dataset["loading"] = "false";
      return;
    }
    const ctl = new AbortController();
    this.reloadCtl = ctl;
    const onLeave = (): void => {
      ctl.abort();
    };
    ctx.signal.addEventListener("abort", onLeave, { once: true });
    status.textContent = "Loading the selected range…";
    const params = { run: ctx.run, worker: ctx.worker, span: ctx.span, start_us: range[0], end_us: range[1] };
    try {
      const [events, s] = await Promise.all([
        this.applyEvents(),
        ctx.api.get("memory/stats", params, { signal: ctl.signal }),
      ]);
      if (my !== this.seq || left(ctx)) return;
      this.state.rangeStats = rowsOf<MemoryStat>(s);
      if (events) status.textContent = "";
      this.applyStats();
    } catch (err) {
      if (my !== this.seq || left(ctx)) return;
      status.textContent = `Could not load the selected range: ${err instanceof Error ? err.message : String(err)} The tables still show the previous rows.`;
      status.classList.add("ptp-error-text");
    } finally {
      ctx.signal.removeEventListener("abort", onLeave);
      if (my === this.seq) this.root.dataset["loading"] = "false";
    }
  }

  /** The chosen device's curve, when it has samples. */
  private device(): CurveDevice | undefined {
    const d = this.data.curve.devices[this.state.device];
    return d && d.points.length > 0 ? d : undefined;
  }

  /** The peak line and the chart of the chosen device, or the reason it has no curve. */
  private updateCurve(): void {
    const dev = this.device();
    const { peakEl, curveDiv, noCurve } = this.head;
    if (dev) {
      const peak = peakOf(dev);
      peakEl.textContent = peakLabel(dev, this.origin);
      peakEl.dataset["bytes"] = String(peak.bytes);
      peakEl.title = `${formatInt(peak.bytes)} bytes allocated at ${formatExactUs(peak.t - this.origin)} from the trace start. ${MEMORY_HELP.allocated}`;
      curveDiv.hidden = false;
      noCurve.hidden = true;
    } else {
      peakEl.textContent = "";
      delete peakEl.dataset["bytes"];
      curveDiv.hidden = true;
      noCurve.hidden = false;
      noCurve.textContent = this.data.curve.reason ?? `No memory curve was recorded for ${this.state.device}; its statistics are below.`;
      if (this.charts) this.charts.remove(curveDiv);
      this.listening = false;
    }
    this.redrawCurve();
  }

  private redrawCurve(): void {
    const dev = this.device();
    const { charts } = this;
    if (!charts || !dev) return;
    const curveDiv = this.head.curveDiv;
    // read at every draw (a theme change redraws too): the range a zoom selected, the mark of the moment
    const figure = (theme: Theme): Figure => {
      const { device, marked, range } = this.state;
      return memoryFigure({ dev: this.device() ?? dev, origin: this.origin, range, marked: marked?.device === device ? marked : null }, theme);
    };
    void charts.draw(curveDiv, figure).then(() => {
      if (this.listening || left(this.ctx)) return;
      this.listening = true;
      (curveDiv as PlotlyHTMLElement).on("plotly_relayout", (ev) => {
        const layout = (curveDiv as unknown as { layout?: { xaxis?: { range?: unknown[] } } }).layout;
        const r = relayoutRange(ev as Record<string, unknown>, layout?.xaxis?.range ?? null);
        if (r === "reset") this.setRange(null, false);
        else if (r) this.setRange([this.origin + r[0] * 1000, this.origin + r[1] * 1000], false);
      });
    });
  }
}

/** The run's allocator snapshots, each a link to the Memory view's snapshot mode (null when it has none). */
function snapshotLinks(ctx: ViewContext): HTMLElement | null {
  const shots = ctx.runInfo.snapshots;
  if (shots.length === 0) return null;
  return h(
    "p",
    { class: "ptp-note", testid: "memory-snapshot-links" },
    "Allocator snapshots of this run (every allocation with its stack, segments, out-of-memory): ",
    shots.map((s, i) => [
      i ? ", " : "",
      h("button", { class: "ptp-link-button", testid: "memory-snapshot-link", attrs: { type: "button" }, onClick: () => { ctx.navigate("Memory", { worker: s.name, span: "snapshot" }); } }, s.name),
      s.state === "failed" ? " (cannot be read)" : "",
    ]),
  );
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  if (ctx.snapshot !== null) return renderSnapshot(container, ctx);
  const query = { run: ctx.run, worker: ctx.worker, span: ctx.span };
  const loaded = await loadView(ctx, container, {
    curve: () => ctx.api.get("memory/curve", query, { signal: ctx.signal }),
    // a page of one row over every device: which devices have events, without the rows
    events: () => ctx.api.get("memory/events", { ...query, limit: 1 }, { signal: ctx.signal }),
    stats: () => ctx.api.get("memory/stats", query, { signal: ctx.signal }),
    sources: () => loadSources(ctx), // which stack frames are the user's, before a stack is drawn
  }, { what: "the memory data" });
  if (!loaded) return undefined;
  const data: MemoryData = { curve: normalizeCurve(loaded.curve), firstEvents: normalizeEventsPage(loaded.events), allStats: rowsOf<MemoryStat>(loaded.stats) };
  const devices = deviceList(data.curve, data.firstEvents.devices, data.allStats);
  const first = defaultDevice(devices, data.curve);
  if (first === undefined) {
    replaceChildren(container, snapshotLinks(ctx), emptyCard(data.curve.reason));
    return undefined;
  }
  const page = new MemoryPage(ctx, data, devices, first);
  replaceChildren(container, snapshotLinks(ctx), page.root);
  page.start();
  return page.drawCharts();
}
