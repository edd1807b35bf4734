/**
 * The Memory page (GET ./memory/curve, ./memory/events, ./memory/stats): a device picker, the
 * allocated/reserved memory of the device over time as a step plot with its peak marked, and two
 * tables (allocation/free pairs, statistics per operator). Zooming the chart's x-axis (drag across
 * it) selects a time range: both tables are then re-queried for that range (absolute µs); Reset or
 * a double-click goes back to the whole trace. Clicking an event row marks its allocation and
 * release on the chart. Times are ms from the trace start.
 */
import { card, infoIcon } from "../components";
import { type Child, h, replaceChildren } from "../dom";
import { formatBytes, formatDuration, formatExactUs, formatInt } from "../format";
import type { PlotlyHTMLElement } from "plotly.js-dist-min";
import { Charts, chartDiv, type Data, type Figure, type Layout, plotlyText } from "./common/charts";
import { csvFileName } from "./common/csv";
import { clampedName, type Column, DataTable } from "./common/table";
import { fetchFor, left, loadErrorCard } from "./common/ui";
import { memoryCategoriesCard } from "./memoryCategories";
import {
  axisUnit,
  type CurveDevice,
  type CurveResponse,
  normalizeCurve,
  defaultDevice,
  deviceList,
  filterEvents,
  formatMs,
  formatSignedBytes,
  type MemoryEvent,
  type MemoryStat,
  relayoutRange,
  type RowsResponse,
  SIZE_UNITS,
  timeOrigin,
} from "./memoryData";
import type { Theme } from "../theme";
import { fetchLiveAt, inRangeColumn, LIVE_HELP, liveSummary, stackExpand } from "./memoryLive";
import { loadSources } from "./common/callStack";
import { readViewUrlState, writeViewUrlState } from "../urlState";
import type { ViewContext } from "./types";

const shortName = (name: string): string => (name.length > 48 ? `${name.slice(0, 47)}…` : name);

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

const COLOR_ALLOC = "#4e79a7";
const COLOR_RESERVED = "#f28e2b";
const COLOR_PEAK = "#e15759";
const COLOR_MARK = "#59a14f";

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

const eventKey = (e: MemoryEvent): string => `${e.device}\u0000${e.addr}\u0000${e.alloc_us ?? ""}\u0000${e.free_us ?? ""}`;

function rowsOf<R>(resp: RowsResponse<R> | null | undefined): R[] {
  return resp && Array.isArray(resp.rows) ? resp.rows : [];
}

function tag(text: string, testid: string, title: string): HTMLElement {
  return h("span", { class: "ptp-tag ptp-tag-muted", testid, title }, text);
}

interface State {
  device: string;
  /** selected range, absolute µs; null = whole trace */
  range: [number, number] | null;
  minBytes: number;
  marked: MemoryEvent | null;
  /** rows of the selected range (null = use the whole-trace rows) */
  rangeEvents: MemoryEvent[] | null;
  rangeStats: MemoryStat[] | null;
  /** the instant whose live allocations the events table shows (absolute µs), null otherwise */
  liveAt: number | null;
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  replaceChildren(container, h("p", { class: "ptp-muted" }, "Loading memory data…"));
  let curve: CurveResponse;
  let allEvents: MemoryEvent[];
  let allStats: MemoryStat[];
  try {
    const sources = loadSources(ctx); // which stack frames are the user's, before a stack is drawn
    const [c, e, s] = await Promise.all([
      fetchFor<unknown>(ctx, "memory/curve"),
      fetchFor<RowsResponse<MemoryEvent>>(ctx, "memory/events"),
      fetchFor<RowsResponse<MemoryStat>>(ctx, "memory/stats"),
    ]);
    await sources;
    curve = normalizeCurve(c);
    allEvents = rowsOf(e);
    allStats = rowsOf(s);
  } catch (err) {
    if (!left(ctx)) replaceChildren(container, loadErrorCard(err, "the memory data"));
    return undefined;
  }
  if (left(ctx)) return undefined;

  const origin = timeOrigin(curve, allEvents);
  const rel = (us: number): number => us - origin;
  const devices = deviceList(curve, allEvents, allStats);
  const first = defaultDevice(devices, curve);
  if (first === undefined) {
    replaceChildren(
      container,
      card(
        { class: "ptp-empty", testid: "memory-empty", title: "No memory data" },
        h("p", { testid: "memory-reason" }, curve.reason ?? "The trace has no memory records."),
        h("p", { class: "ptp-muted" }, "Record with ", h("code", {}, "torch.profiler.profile(profile_memory=True)"), " to see memory over time."),
      ),
    );
    return undefined;
  }
  const hasCurves = Object.values(curve.devices).some((d) => d.points.length > 0);
  const state: State = { device: first, range: null, minBytes: 0, marked: null, rangeEvents: null, rangeStats: null, liveAt: null };

  // ------------------------------------------------------------------ header: device, peak, range
  const deviceSelect = h(
    "select",
    {
      testid: "memory-device",
      attrs: { "aria-label": "Device" },
      onChange: () => {
        state.device = deviceSelect.value;
        state.marked = null;
        root.dataset["device"] = state.device;
        categories.setDevice(state.device);
        updateCurve();
        applyEvents();
        applyStats();
      },
    },
    devices.map((d) => h("option", { attrs: { value: d, selected: d === state.device } }, d)),
  );
  const peakEl = h("span", { class: "ptp-mem-peak", testid: "memory-peak" });
  const peakLive = h(
    "button",
    {
      class: "ptp-button",
      testid: "memory-peak-live",
      title: LIVE_HELP.live,
      attrs: { type: "button" },
      onClick: () => { void showLiveAtPeak(); },
    },
    "Allocations live at the peak",
  );
  const rangeEl = h("span", { class: "ptp-muted", testid: "memory-range", attrs: { "aria-live": "polite" } });
  const resetBtn = h(
    "button",
    {
      class: "ptp-button",
      testid: "memory-reset",
      title: "Show the whole trace again (or double-click the chart)",
      attrs: { type: "button" },
      onClick: () => {
        setRange(null, true);
      },
    },
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

  const curveCard = card(
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

  // ------------------------------------------------------------------ events table
  const minInput = h("input", {
    testid: "memory-min-size",
    attrs: { type: "number", min: 0, step: "any", value: 0, "aria-label": "Minimum size" },
    onInput: () => {
      updateMinBytes();
    },
  });
  const unitSelect = h(
    "select",
    { testid: "memory-min-size-unit", attrs: { "aria-label": "Unit of the minimum size" }, onChange: () => { updateMinBytes(); } },
    SIZE_UNITS.map((u) => h("option", { attrs: { value: u.bytes, selected: u.label === "KiB" } }, u.label)),
  );
  const updateMinBytes = (): void => {
    const v = Number(minInput.value);
    const unit = Number(unitSelect.value) || 1;
    const next = Number.isFinite(v) && v > 0 ? v * unit : 0;
    if (next === state.minBytes) return;
    state.minBytes = next;
    applyEvents();
  };

  const markCell = (e: MemoryEvent): Child => {
    const marked = state.marked !== null && eventKey(state.marked) === eventKey(e);
    return h(
      "span",
      { class: "ptp-mem-op" },
      marked ? h("span", { class: "ptp-mem-marked", testid: "memory-marked", title: "Marked on the chart", attrs: { "aria-label": "marked on the chart" } }) : null,
      clampedName(e.name, "memory-op"),
    );
  };
  const eventColumns: Column<MemoryEvent>[] = [
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
    {
      key: "alloc",
      label: "Allocation time",
      help: MEMORY_HELP.alloc,
      numeric: true,
      value: (e) => (isNum(e.alloc_us) ? rel(e.alloc_us) : null),
      render: (e) => (isNum(e.alloc_us) ? formatMs(rel(e.alloc_us)) : tag("allocated before trace", "badge-before-trace", "Released in the trace, but allocated before it started.")),
      title: (e) => (isNum(e.alloc_us) ? `${formatExactUs(rel(e.alloc_us))} from the trace start (absolute ${formatExactUs(e.alloc_us)})` : "Allocated before the trace started."),
      csvHeader: "Allocation time (us from trace start)",
    },
    {
      key: "free",
      label: "Release time",
      help: MEMORY_HELP.free,
      numeric: true,
      value: (e) => (isNum(e.free_us) ? rel(e.free_us) : null),
      render: (e) => (isNum(e.free_us) ? formatMs(rel(e.free_us)) : tag("not freed in trace", "badge-not-freed", "Still allocated when the trace ended.")),
      title: (e) => (isNum(e.free_us) ? `${formatExactUs(rel(e.free_us))} from the trace start (absolute ${formatExactUs(e.free_us)})` : "Not released before the trace ended."),
      csvHeader: "Release time (us from trace start)",
    },
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
  const eventsRangeTag = h("span", { class: "ptp-muted", testid: "memory-events-range" });
  const eventsTable = new DataTable<MemoryEvent>({
    testid: "memory-events-table",
    csvName: () => csvFileName("memory_events", ctx.run, ctx.worker, `span${ctx.span}`, state.device, rangeSuffix()),
    controls: [
      h(
        "label",
        { class: "ptp-picker", title: "Hide allocations smaller than this" },
        "Min size",
        minInput,
        unitSelect,
      ),
      eventsRangeTag,
    ],
    pageSize: 20,
    emptyText: "No allocations on this device in the selected range.",
  });
  // A click on a row marks that allocation on the chart (again: unmark).
  eventsTable.el.addEventListener("click", (ev) => {
    const target = ev.target;
    if (!(target instanceof Element) || target.closest("button, a, input, select, textarea")) return;
    const tr = target.closest("tr");
    const tbody = tr?.parentElement;
    if (!tr || !tbody || tbody.tagName !== "TBODY" || tr.dataset["testid"] !== "row") return;
    const index = [...tbody.children].filter((c) => c instanceof HTMLElement && c.dataset["testid"] === "row").indexOf(tr);
    const row = eventsTable.visibleRows()[index];
    if (!row) return;
    state.marked = state.marked && eventKey(state.marked) === eventKey(row) ? null : row;
    eventsTable.refresh();
    redrawCurve();
  });

  // ------------------------------------------------------------------ statistics table
  const bytesCol = (key: string, label: string, help: string, get: (s: MemoryStat) => number, signed: boolean): Column<MemoryStat> => ({
    key,
    label,
    help,
    numeric: true,
    value: get,
    text: (s) => (signed ? formatSignedBytes(get(s)) : formatBytes(get(s))),
    exact: (s) => `${formatInt(get(s))} bytes`,
    csvHeader: `${label} (bytes)`,
  });
  const countCol = (key: string, label: string, help: string, get: (s: MemoryStat) => number): Column<MemoryStat> => ({
    key,
    label,
    help,
    numeric: true,
    value: get,
    text: (s) => formatInt(get(s)),
  });
  const statColumns: Column<MemoryStat>[] = [
    { key: "name", label: "Operator", value: (s) => s.name, render: (s) => clampedName(s.name, "memory-stat-op"), title: (s) => s.name, cls: "ptp-name-col" },
    countCol("calls", "Calls", MEMORY_HELP.calls, (s) => s.calls),
    bytesCol("size_increase", "Size increase", MEMORY_HELP.sizeIncrease, (s) => s.size_increase_bytes, true),
    bytesCol("self_size_increase", "Self size increase", MEMORY_HELP.selfSizeIncrease, (s) => s.self_size_increase_bytes, true),
    countCol("allocation_count", "Allocation count", MEMORY_HELP.allocCount, (s) => s.allocation_count),
    countCol("self_allocation_count", "Self allocation count", MEMORY_HELP.selfAllocCount, (s) => s.self_allocation_count),
    bytesCol("allocation_size", "Allocation size", MEMORY_HELP.allocSize, (s) => s.allocation_size_bytes, false),
    bytesCol("self_allocation_size", "Self allocation size", MEMORY_HELP.selfAllocSize, (s) => s.self_allocation_size_bytes, false),
  ];
  const statsRangeTag = h("span", { class: "ptp-muted", testid: "memory-stats-range" });
  const statsTable = new DataTable<MemoryStat>({
    testid: "memory-stats-table",
    csvName: () => csvFileName("memory_stats", ctx.run, ctx.worker, `span${ctx.span}`, state.device, rangeSuffix()),
    controls: statsRangeTag,
    emptyText: "No operator allocated or released memory on this device in the selected range.",
  });

  const eventsCard = card(
    { testid: "card-memory-events" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "Memory events"), infoIcon("Each allocation paired with its release (same device and address). Times are ms from the trace start.")),
    h("p", { class: "ptp-muted ptp-card-sub" }, "Allocations paired with their releases. Click a row to mark it on the chart."),
    eventsTable.el,
  );
  const statsCard = card(
    { testid: "card-memory-stats" },
    h(
      "div",
      { class: "ptp-card-head" },
      h("h3", {}, "Memory statistics"),
      infoIcon("Per operator name: \"self\" counts allocations made in the operator itself; the other columns include the operators it calls. Size increase = allocations − releases."),
    ),
    h("p", { class: "ptp-muted ptp-card-sub" }, "Per operator name on the selected device; self = in the operator itself, not in the operators it calls."),
    statsTable.el,
  );

  const categories = memoryCategoriesCard(ctx, state.device, origin);
  const root = h(
    "div",
    { class: "ptp-view ptp-memory", testid: "memory-view", dataset: { device: state.device, loading: "false", startUs: "", endUs: "" } },
    curveCard,
    categories.el,
    hasCurves || allEvents.length > 0 ? eventsCard : null,
    statsCard,
  );
  replaceChildren(container, root);

  function rangeSuffix(): string {
    return state.range ? `${formatMs(rel(state.range[0]))}-${formatMs(rel(state.range[1]))}`.replace(/ ms/g, "ms") : "";
  }

  function rangeText(): string {
    return state.range ? `${formatMs(rel(state.range[0]))} – ${formatMs(rel(state.range[1]))}` : "whole trace";
  }

  function updateRangeUi(): void {
    rangeEl.textContent = state.range ? `Range ${rangeText()}` : hasCurves ? "Whole trace" : "";
    resetBtn.disabled = state.range === null && state.liveAt === null;
    resetBtn.hidden = !hasCurves;
    const label = state.range ? `Range: ${rangeText()}` : "";
    eventsRangeTag.textContent = label;
    statsRangeTag.textContent = label;
    root.dataset["startUs"] = state.range ? String(state.range[0]) : "";
    root.dataset["endUs"] = state.range ? String(state.range[1]) : "";
  }

  function applyEvents(): void {
    const rows = filterEvents(state.rangeEvents ?? allEvents, state.device, state.minBytes);
    if (state.marked && state.marked.device !== state.device) state.marked = null;
    eventsTable.setData({
      columns: state.range ? [...eventColumns, inRangeColumn()] : eventColumns,
      rows,
      searches: [{ key: "name", label: "Search operators", placeholder: "Search operator names", text: (e) => e.name }],
      sort: state.liveAt !== null ? { key: "size", dir: "desc" } : { key: "alloc", dir: "asc" },
      expand: stackExpand,
      rowKey: eventKey,
    }, state.liveAt === null);
    root.dataset["events"] = String(rows.length);
  }

  function applyStats(): void {
    const rows = (state.rangeStats ?? allStats).filter((s) => s.device === state.device);
    statsTable.setData({
      columns: statColumns,
      rows,
      searches: [{ key: "name", label: "Search operators", placeholder: "Search operator names", text: (s) => s.name }],
      sort: { key: "allocation_size", dir: "desc" },
      rowKey: (s) => `${s.device}\u0000${s.name}`,
    });
    root.dataset["stats"] = String(rows.length);
  }

  // ------------------------------------------------------------------ range queries
  let reloadTimer: number | undefined;
  let reloadCtl: AbortController | null = null;
  let seq = 0;

  /** The events table lists the allocations live at the device's peak (what the peak is made of). */
  async function showLiveAtPeak(): Promise<void> {
    const dev = device();
    if (!dev) return;
    const peak = peakOf(dev);
    const my = ++seq;
    reloadCtl?.abort();
    statusEl.textContent = "Loading the allocations live at the peak…";
    try {
      const live = await fetchLiveAt(ctx, peak.t, state.device);
      if (my !== seq || left(ctx)) return;
      state.range = null;
      state.liveAt = peak.t;
      state.rangeEvents = live.rows;
      state.rangeStats = null;
      statusEl.textContent = "";
      updateRangeUi();
      const summary = liveSummary(live, `the peak (${formatMs(rel(peak.t))})`);
      eventsRangeTag.textContent = summary;
      rangeEl.textContent = `Live at the peak, ${formatMs(rel(peak.t))}`;
      applyEvents();
      applyStats();
      eventsCard.scrollIntoView({ block: "start", behavior: "smooth" });
    } catch (err) {
      if (my !== seq || left(ctx)) return;
      statusEl.textContent = `Could not load the allocations live at the peak: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  function setRange(range: [number, number] | null, redraw: boolean): void {
    const same = range === null ? state.range === null && state.liveAt === null : state.range !== null && state.range[0] === range[0] && state.range[1] === range[1];
    if (same && !redraw) return;
    state.range = range;
    state.liveAt = null;
    updateRangeUi();
    if (redraw) redrawCurve();
    if (same) return;
    root.dataset["loading"] = "true";
    window.clearTimeout(reloadTimer);
    reloadTimer = window.setTimeout(() => {
      void reload();
    }, 150);
  }

  async function reload(): Promise<void> {
    const my = ++seq;
    reloadCtl?.abort();
    reloadCtl = null;
    const range = state.range;
    if (!range) {
      state.rangeEvents = null;
      state.rangeStats = null;
      statusEl.textContent = "";
      applyEvents();
      applyStats();
      root.dataset["loading"] = "false";
      return;
    }
    const ctl = new AbortController();
    reloadCtl = ctl;
    const onLeave = (): void => {
      ctl.abort();
    };
    ctx.signal.addEventListener("abort", onLeave, { once: true });
    statusEl.textContent = "Loading the selected range…";
    const params = { run: ctx.run, worker: ctx.worker, span: ctx.span, start_us: range[0], end_us: range[1] };
    try {
      const [e, s] = await Promise.all([
        ctx.api.getJSON<RowsResponse<MemoryEvent>>("memory/events", params, { signal: ctl.signal }),
        ctx.api.getJSON<RowsResponse<MemoryStat>>("memory/stats", params, { signal: ctl.signal }),
      ]);
      if (my !== seq || left(ctx)) return;
      state.rangeEvents = rowsOf(e);
      state.rangeStats = rowsOf(s);
      statusEl.textContent = "";
      applyEvents();
      applyStats();
    } catch (err) {
      if (my !== seq || left(ctx)) return;
      statusEl.textContent = `Could not load the selected range: ${err instanceof Error ? err.message : String(err)} The tables still show the previous rows.`;
      statusEl.classList.add("ptp-error-text");
    } finally {
      ctx.signal.removeEventListener("abort", onLeave);
      if (my === seq) root.dataset["loading"] = "false";
    }
  }

  // ------------------------------------------------------------------ the chart
  let charts: Charts | null = null;
  let listening = false;

  function device(): CurveDevice | undefined {
    const d = curve.devices[state.device];
    return d && d.points.length > 0 ? d : undefined;
  }

  function peakOf(dev: CurveDevice): { bytes: number; t: number } {
    if (isNum(dev.peak_allocated_bytes) && isNum(dev.peak_time_us)) return { bytes: dev.peak_allocated_bytes, t: dev.peak_time_us };
    let best = dev.points[0] ?? [0, 0, 0];
    for (const p of dev.points) if (p[1] > best[1]) best = p;
    return { bytes: isNum(dev.peak_allocated_bytes) ? dev.peak_allocated_bytes : best[1], t: best[0] };
  }

  function peakLabel(dev: CurveDevice): string {
    const peak = peakOf(dev);
    return `Peak ${formatBytes(peak.bytes)} at ${formatMs(rel(peak.t))}`;
  }

  function figure(theme: Theme): Figure {
    const dev = device();
    if (!dev) return { data: [], layout: {} };
    const pts = dev.points;
    const peak = peakOf(dev);
    const maxReserved = pts.reduce((m, p) => Math.max(m, p[2]), 0);
    const unit = axisUnit(Math.max(peak.bytes, maxReserved, dev.peak_reserved_bytes ?? 0));
    const x = pts.map((p) => rel(p[0]) / 1000);
    const xMin = x[0] ?? 0;
    const xMax = x[x.length - 1] ?? 0;
    const data: Data[] = [
      {
        type: "scatter",
        mode: "lines",
        name: "Allocated",
        x,
        y: pts.map((p) => p[1] / unit.bytes),
        customdata: pts.map((p) => formatBytes(p[1])),
        line: { shape: "hv", color: COLOR_ALLOC, width: 1.6 },
        fill: "tozeroy",
        fillcolor: "rgba(78,121,167,0.16)",
        hovertemplate: "Allocated %{customdata}<extra></extra>",
      },
    ];
    if (maxReserved > 0) {
      data.push({
        type: "scatter",
        mode: "lines",
        name: "Reserved",
        x,
        y: pts.map((p) => p[2] / unit.bytes),
        customdata: pts.map((p) => formatBytes(p[2])),
        line: { shape: "hv", color: COLOR_RESERVED, width: 1.4, dash: "dot" },
        hovertemplate: "Reserved %{customdata}<extra></extra>",
      });
    }
    const px = rel(peak.t) / 1000;
    const py = peak.bytes / unit.bytes;
    const label = plotlyText(peakLabel(dev));
    data.push({
      type: "scatter",
      mode: "markers",
      name: "Peak",
      x: [px],
      y: [py],
      marker: { color: COLOR_PEAK, size: 10, symbol: "diamond", line: { width: 1, color: "#ffffff" } },
      hovertemplate: `${label}<extra></extra>`,
      showlegend: false,
    });
    const rightHalf = px > xMin + (xMax - xMin) / 2;
    const annotations: Layout["annotations"] = [
      {
        x: px,
        y: py,
        xref: "x",
        yref: "y",
        text: `<b>${label}</b>`,
        showarrow: true,
        arrowhead: 0,
        arrowwidth: 1,
        arrowcolor: COLOR_PEAK,
        ax: rightHalf ? -36 : 36,
        ay: -22,
        xanchor: rightHalf ? "right" : "left",
        font: { color: COLOR_PEAK, size: 12 },
        bgcolor: theme === "dark" ? "rgba(43,44,47,0.8)" : "rgba(255,255,255,0.8)",
      },
    ];
    const shapes: Layout["shapes"] = [];
    const m = state.marked;
    if (m && m.device === state.device) {
      const xa = isNum(m.alloc_us) ? rel(m.alloc_us) / 1000 : xMin;
      const xf = isNum(m.free_us) ? rel(m.free_us) / 1000 : xMax;
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: xa, x1: xf, y0: 0, y1: 1, fillcolor: "rgba(89,161,79,0.14)", line: { width: 0 }, layer: "below" });
      const edge = (xv: number, dash: "solid" | "dash"): void => {
        shapes.push({ type: "line", xref: "x", yref: "paper", x0: xv, x1: xv, y0: 0, y1: 1, line: { color: COLOR_MARK, width: 2, dash } });
      };
      if (isNum(m.alloc_us)) edge(xa, "solid");
      if (isNum(m.free_us)) edge(xf, "dash");
      // One label for the pair, beside the band on the side with more room.
      const from = isNum(m.alloc_us) ? `alloc ${formatMs(rel(m.alloc_us))}` : "allocated before the trace";
      const to = isNum(m.free_us) ? `free ${formatMs(rel(m.free_us))}` : "not freed in the trace";
      const right = (xa + xf) / 2 > xMin + (xMax - xMin) / 2;
      annotations.push({
        x: right ? xa : xf,
        y: 0.02,
        xref: "x",
        yref: "paper",
        text: plotlyText(` ${shortName(m.name)} · ${formatBytes(m.size_bytes)} · ${from} → ${to} `),
        showarrow: false,
        xanchor: right ? "right" : "left",
        yanchor: "bottom",
        font: { color: COLOR_MARK, size: 11 },
        bgcolor: theme === "dark" ? "rgba(43,44,47,0.85)" : "rgba(255,255,255,0.85)",
      });
    }
    return {
      data,
      layout: {
        xaxis: state.range
          ? { title: { text: "Time (ms)" }, range: [rel(state.range[0]) / 1000, rel(state.range[1]) / 1000], autorange: false, zeroline: false }
          : { title: { text: "Time (ms)" }, autorange: true, zeroline: false },
        yaxis: { title: { text: `Memory (${unit.label})` }, fixedrange: true, rangemode: "tozero", zeroline: false },
        hovermode: "x unified",
        dragmode: "zoom",
        showlegend: true,
        legend: { orientation: "h", x: 1, xanchor: "right", y: 1.02, yanchor: "bottom" },
        margin: { l: 64, r: 20, t: 32, b: 48 },
        annotations,
        shapes,
      },
    };
  }

  function updateCurve(): void {
    const dev = device();
    if (dev) {
      const peak = peakOf(dev);
      peakEl.textContent = peakLabel(dev);
      peakEl.dataset["bytes"] = String(peak.bytes);
      peakEl.title = `${formatInt(peak.bytes)} bytes allocated at ${formatExactUs(rel(peak.t))} from the trace start. ${MEMORY_HELP.allocated}`;
      curveDiv.hidden = false;
      noCurve.hidden = true;
    } else {
      peakEl.textContent = "";
      delete peakEl.dataset["bytes"];
      curveDiv.hidden = true;
      noCurve.hidden = false;
      noCurve.textContent = curve.reason ?? `No memory curve was recorded for ${state.device}; its statistics are below.`;
      if (charts) charts.remove(curveDiv);
      listening = false;
    }
    redrawCurve();
  }

  function redrawCurve(): void {
    if (!charts || !device()) return;
    void charts.draw(curveDiv, figure).then(() => {
      if (listening || left(ctx)) return;
      listening = true;
      const gd = curveDiv as PlotlyHTMLElement;
      gd.on("plotly_relayout", (ev) => {
        const layout = (curveDiv as unknown as { layout?: { xaxis?: { range?: unknown[] } } }).layout;
        const r = relayoutRange(ev as Record<string, unknown>, layout?.xaxis?.range ?? null);
        if (r === "reset") setRange(null, false);
        else if (r) setRange([origin + r[0] * 1000, origin + r[1] * 1000], false);
      });
    });
  }

  // A link from the Overview's evidence may name a device and a time range (absolute µs).
  const linked = readViewUrlState();
  if (linked.device !== undefined || linked.start !== undefined) {
    if (linked.device !== undefined && linked.device in curve.devices) {
      state.device = linked.device;
      deviceSelect.value = linked.device;
      root.dataset["device"] = state.device;
      categories.setDevice(state.device);
    }
    const lo = Number(linked.start);
    const hi = Number(linked.end);
    writeViewUrlState({ device: undefined, start: undefined, end: undefined });
    if (Number.isFinite(lo) && Number.isFinite(hi) && hi > lo) setRange([lo, hi], false);
  }
  updateRangeUi();
  applyEvents();
  applyStats();
  updateCurve();

  if (hasCurves) {
    try {
      const Plotly = await ctx.loadPlotly();
      if (left(ctx)) return undefined;
      charts = new Charts(Plotly, ctx);
      updateCurve();
    } catch (err) {
      if (left(ctx)) return undefined;
      replaceChildren(curveDiv, h("p", { class: "ptp-muted", testid: "chart-error" }, `The chart could not be drawn: ${err instanceof Error ? err.message : String(err)}`));
    }
  }

  return () => {
    window.clearTimeout(reloadTimer);
    reloadCtl?.abort();
    charts?.dispose();
    categories.dispose();
  };
}
