/**
 * The Operator page (GET ./operators): pies of the top N operators (+ "Other") by device/host
 * self/total time, and the operator table grouped by name, name + input shape or name + call stack.
 * By name, operators called from Python expand to their distinct call stacks (fetched on demand).
 */
import { card, infoIcon } from "../components";
import { h, replaceChildren } from "../dom";
import { formatDuration, formatExactUs, formatInt, formatPercent1 } from "../format";
import type { OperatorGrouping, OperatorRow, OperatorsResponse } from "./common/apiTypes";
import { frameList, loadSources, parseStack } from "./common/callStack";
import { Charts, chartDiv, ColorMap } from "./common/charts";
import { csvFileName } from "./common/csv";
import { type Item, pieLayout, pieTrace, topN, topNInput } from "./common/pie";
import { type Column, DataTable } from "./common/table";
import { type TraceLinker, traceLinker, viewLink } from "./common/traceLink";
import { fetchFor, groupingSwitch, left, loadErrorCard } from "./common/ui";
import { readViewUrlState, writeViewUrlState } from "../urlState";
import { annotationsCard } from "./annotations";
import type { ViewContext } from "./types";

export const OP_HELP = {
  calls: "How many times the operator ran in this trace.",
  deviceSelf:
    "Sum of the durations of the GPU work (kernels, memory copies and sets) that this operator launched itself.",
  deviceTotal:
    "Sum of the durations of the GPU work launched by this operator and by the operators it called.",
  deviceWall:
    "Device total counted as covered time: GPU work of this operator that ran at the same time on several streams counts once.",
  hostSelf: "Wall time on the host inside this operator, minus the time in its children (operators, annotations, CUDA runtime calls).",
  hostTotal: "Wall time on the host from the operator's start to its end, children included.",
  tcEligible:
    "Whether the operator could run on tensor cores (convolutions, matrix multiplications, attention, RNNs), judged from its name.",
  tcSelf: "Share of this operator's device self time spent in kernels that use tensor cores (detected from kernel names).",
  tcTotal: "Share of this operator's device total time spent in kernels that use tensor cores (detected from kernel names).",
  inputShape: "The operator's input dimensions as recorded (record_shapes=True).",
  callStack: "The Python call stack of the call, innermost frame first (with_stack=True). Click a frame to open or copy its location.",
};

const GROUPINGS: { id: OperatorGrouping; label: string }[] = [
  { id: "name", label: "Operator" },
  { id: "name_shape", label: "Operator + input shape" },
  { id: "name_stack", label: "Operator + call stack" },
];

interface Flags {
  device: boolean;
  wall: boolean;
}

function duration(
  key: string,
  label: string,
  help: string,
  get: (r: OperatorRow) => number,
): Column<OperatorRow> {
  return {
    key,
    label,
    help,
    numeric: true,
    value: get,
    text: (r) => formatDuration(get(r)),
    exact: (r) => formatExactUs(get(r)),
    csvHeader: `${label} (us)`,
  };
}

function tcPercent(key: string, label: string, help: string, get: (r: OperatorRow) => number, time: (r: OperatorRow) => number): Column<OperatorRow> {
  const value = (r: OperatorRow): number | null => (time(r) > 0 ? get(r) : null);
  return {
    key,
    label,
    help,
    numeric: true,
    value,
    text: (r) => formatPercent1(value(r)),
    exact: (r) => {
      const v = value(r);
      return v === null ? "No device time" : `${(v * 100).toFixed(3)}%`;
    },
    csvHeader: `${label.replace(" %", "")} (%)`,
    csv: (r) => {
      const v = value(r);
      return v === null ? null : v * 100;
    },
  };
}

/** "stacks": opens the Flame graph filtered to the stacks through this operator. */
function stacksLinker(ctx: ViewContext): (name: string) => HTMLElement {
  return (name) =>
    h("button", {
      class: "ptp-link-button ptp-flame-link",
      testid: "operator-stacks",
      attrs: { type: "button", title: `Show the call stacks of ${name} in the Flame graph`, "aria-label": `Show the stacks of ${name} in the Flame graph` },
      onClick: (ev: Event) => {
        ev.stopPropagation();
        writeViewUrlState({ flame_op: name });
        ctx.navigate("Flame");
      },
    });
}

/**
 * The table's columns; `link` adds "in trace" to each name, `kernels` (operators that ran GPU work) a link to
 * the kernels the operator launched, in the Kernel view, and `stacks` a link to its stacks in the Flame graph.
 */
export function operatorColumns(
  grouping: OperatorGrouping,
  flags: Flags,
  link?: TraceLinker,
  kernels?: (name: string) => HTMLElement,
  stacks?: (name: string) => HTMLElement,
): Column<OperatorRow>[] {
  const cols: Column<OperatorRow>[] = [
    {
      key: "name",
      label: "Name",
      value: (r) => r.name,
      render: link
        ? (r) => h("span", {}, r.name, link(r.name), kernels && r.device_self_us > 0 ? kernels(r.name) : null, stacks?.(r.name))
        : undefined,
      cls: "ptp-name-col ptp-wrap",
    },
  ];
  if (grouping === "name_shape") {
    cols.push({ key: "input_shape", label: "Input shape", help: OP_HELP.inputShape, value: (r) => r.input_shape ?? "", cls: "ptp-shape-col ptp-mono ptp-wrap" });
  }
  if (grouping === "name_stack") {
    cols.push({
      key: "call_stack",
      label: "Call stack",
      help: OP_HELP.callStack,
      value: (r) => r.call_stack ?? "",
      render: (r) => frameList(parseStack(r.call_stack ?? ""), 3),
      sortable: false,
      cls: "ptp-stack-col",
    });
  }
  cols.push({ key: "calls", label: "Calls", help: OP_HELP.calls, numeric: true, value: (r) => r.calls, text: (r) => formatInt(r.calls), exact: (r) => `${formatInt(r.calls)} calls` });
  if (flags.device) {
    cols.push(duration("device_self", "Device self", OP_HELP.deviceSelf, (r) => r.device_self_us));
    cols.push(duration("device_total", "Device total", OP_HELP.deviceTotal, (r) => r.device_total_us));
    if (flags.wall) cols.push(duration("device_wall", "Device wall", OP_HELP.deviceWall, (r) => r.device_total_wall_us));
  }
  cols.push(duration("host_self", "Host self", OP_HELP.hostSelf, (r) => r.host_self_us));
  cols.push(duration("host_total", "Host total", OP_HELP.hostTotal, (r) => r.host_total_us));
  if (flags.device) {
    cols.push({ key: "tc_eligible", label: "Tensor-core eligible", help: OP_HELP.tcEligible, value: (r) => r.tc_eligible, title: () => OP_HELP.tcEligible });
    cols.push(tcPercent("tc_self", "TC self %", OP_HELP.tcSelf, (r) => r.tc_self_ratio, (r) => r.device_self_us));
    cols.push(tcPercent("tc_total", "TC total %", OP_HELP.tcTotal, (r) => r.tc_total_ratio, (r) => r.device_total_us));
  }
  return cols;
}

const rowKey = (r: OperatorRow): string => `${r.name}\u0000${r.input_shape ?? ""}\u0000${r.call_stack ?? ""}`;

function stat(label: string, value: string, help: string): HTMLElement {
  return h("span", { title: help }, `${label} `, h("b", {}, value));
}

/** The call stacks of one operator, fetched on first expand (also under a Kernel row: its launching operator). */
export function stacksPanel(ctx: ViewContext, name: string, device: boolean): HTMLElement {
  const panel = h("div", { class: "ptp-stacks", testid: "call-stacks" }, h("span", { class: "ptp-muted" }, "Loading call stacks…"));
  fetchFor<OperatorsResponse>(ctx, "operators", { group_by: "name_stack", name })
    .then((resp) => {
      const rows = Array.isArray(resp.rows) ? resp.rows : [];
      if (rows.length === 0) {
        replaceChildren(panel, h("span", { class: "ptp-muted" }, "No Python call stack was recorded for this operator."));
        return;
      }
      replaceChildren(
        panel,
        h("div", { class: "ptp-muted" }, `${formatInt(rows.length)} distinct call stack${rows.length === 1 ? "" : "s"} (innermost frame first; click a frame to open or copy its location):`),
        rows.map((r) =>
          h(
            "div",
            { class: "ptp-stack-entry", testid: "call-stack" },
            h(
              "div",
              { class: "ptp-stack-stats" },
              stat("Calls", formatInt(r.calls), OP_HELP.calls),
              device ? stat("Device self", formatDuration(r.device_self_us), `${formatExactUs(r.device_self_us)}\n${OP_HELP.deviceSelf}`) : null,
              device ? stat("Device total", formatDuration(r.device_total_us), `${formatExactUs(r.device_total_us)}\n${OP_HELP.deviceTotal}`) : null,
              stat("Host self", formatDuration(r.host_self_us), `${formatExactUs(r.host_self_us)}\n${OP_HELP.hostSelf}`),
              stat("Host total", formatDuration(r.host_total_us), `${formatExactUs(r.host_total_us)}\n${OP_HELP.hostTotal}`),
            ),
            frameList(parseStack(r.call_stack ?? ""), 8),
          ),
        ),
      );
    })
    .catch((err: unknown) => {
      if (left(ctx)) return;
      replaceChildren(panel, loadErrorCard(err, `the call stacks of ${name}`));
    });
  return panel;
}

const PIES: { key: string; title: string; help: string; device: boolean; get: (r: OperatorRow) => number }[] = [
  { key: "device_self", title: "Device self time", help: OP_HELP.deviceSelf, device: true, get: (r) => r.device_self_us },
  { key: "device_total", title: "Device total time", help: OP_HELP.deviceTotal, device: true, get: (r) => r.device_total_us },
  { key: "host_self", title: "Host self time", help: OP_HELP.hostSelf, device: false, get: (r) => r.host_self_us },
  { key: "host_total", title: "Host total time", help: OP_HELP.hostTotal, device: false, get: (r) => r.host_total_us },
];

/** As many table rows as fit the frame's height (about 28 px a row, the table's head and pager aside), 15 to 100:
 * a page of 10 left most of a tall screen empty. */
function rowsThatFit(): number {
  return Math.min(100, Math.max(15, Math.floor((window.innerHeight - 140) / 28)));
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  replaceChildren(container, h("p", { class: "ptp-muted" }, "Loading operators…"));
  let byName: OperatorsResponse;
  const sources = loadSources(ctx); // which frames are the user's: before any stack is drawn
  try {
    byName = await fetchFor<OperatorsResponse>(ctx, "operators", { group_by: "name" });
    await sources;
  } catch (err) {
    if (!left(ctx)) replaceChildren(container, loadErrorCard(err, "the operators"));
    return undefined;
  }
  if (left(ctx)) return undefined;
  const rows = Array.isArray(byName.rows) ? byName.rows : [];
  const sum = byName.totals?.device_sum_us ?? 0;
  const busy = byName.totals?.device_busy_us ?? 0;
  const device = sum > 0 || rows.some((r) => r.device_total_us > 0);
  const cache = new Map<OperatorGrouping, OperatorsResponse>([["name", byName]]);
  const flagsFor = (resp: OperatorsResponse): Flags => ({
    device,
    wall: device && resp.rows.some((r) => Math.abs(r.device_total_wall_us - r.device_total_us) > 1e-6 * Math.max(1, r.device_total_us)),
  });

  // ---- pies
  const pieDivs = PIES.filter((p) => device || !p.device).map((p) => ({ p, div: chartDiv(`pie-${p.key}`, 300) }));
  const top = topNInput("Operators shown in the pies", () => { void drawPies(); });
  const topInput = top.input;
  const piesCard = card(
    { testid: "card-operator-pies" },
    h(
      "div",
      { class: "ptp-card-head" },
      h("h3", {}, "Time by operator"),
      h("label", { class: "ptp-picker", title: "The N largest operators get their own slice; all others are summed in \"Other\", so every share is of the whole." }, "Top N", topInput),
      h("span", { class: "ptp-muted" }, `${formatInt(rows.length)} operators · the rest are in "Other"`),
    ),
    h(
      "div",
      { class: "ptp-pies" },
      pieDivs.map(({ p, div }) => h("div", {}, h("div", { class: "ptp-pie-title" }, p.title, infoIcon(p.help)), div)),
    ),
  );

  // ---- table
  let grouping: OperatorGrouping = "name";
  let stackNames: Set<string> | null = null;
  const select = h(
    "select",
    { testid: "operator-group-by", attrs: { "aria-label": "Group by" }, onChange: () => { void setGrouping(select.value as OperatorGrouping); } },
    GROUPINGS.map((g) => {
      const unsupported =
        (g.id === "name_shape" && byName.has_input_shapes === false) || (g.id === "name_stack" && byName.has_call_stacks === false);
      return h(
        "option",
        {
          attrs: { value: g.id, disabled: unsupported },
          title: unsupported
            ? g.id === "name_shape"
              ? "This trace has no input shapes (record with record_shapes=True)."
              : "This trace has no call stacks (record with with_stack=True)."
            : undefined,
        },
        g.label + (unsupported ? " (not recorded)" : ""),
      );
    }),
  );
  const tableStatus = h("span", { class: "ptp-muted", testid: "table-status", attrs: { "aria-live": "polite" } });
  const fit = rowsThatFit();
  const table = new DataTable<OperatorRow>({
    testid: "operator-table",
    pageSize: fit,
    pageSizes: [...new Set([fit, 20, 50, 100])].sort((a, b) => a - b),
    csvName: () => csvFileName("operators", ctx.run, ctx.worker, `span${ctx.span}`, grouping),
    controls: [h("label", { class: "ptp-picker" }, "Group by", select), tableStatus],
    emptyText: "This trace has no operators.",
  });
  const linkToTrace = traceLinker(ctx);
  const linkToStacks = stacksLinker(ctx);
  const linkToKernels = (name: string): HTMLElement =>
    viewLink(ctx, { label: "kernels", title: `The GPU kernels ${name} launched, in the Kernel view`, testid: "operator-kernels", view: "Kernel", state: { op: name, q: undefined } });
  const setData = (g: OperatorGrouping, resp: OperatorsResponse): void => {
    table.setData({
      columns: operatorColumns(g, flagsFor(resp), linkToTrace, device ? linkToKernels : undefined, linkToStacks),
      rows: Array.isArray(resp.rows) ? resp.rows : [],
      searches: [{ key: "name", label: "Search operators", placeholder: "Search operator names", text: (r) => r.name }],
      sort: { key: device ? "device_self" : "host_self", dir: "desc" },
      expand:
        g === "name" && byName.has_call_stacks !== false
          ? {
              can: (r) => stackNames?.has(r.name) ?? false,
              render: (r) => stacksPanel(ctx, r.name, device),
              label: "Show the call stacks",
            }
          : null,
      rowKey,
    });
  };
  const setGrouping = groupingSwitch(ctx, "operators", cache, select, tableStatus, (g: OperatorGrouping, resp: OperatorsResponse) => {
    grouping = g;
    setData(g, resp);
  });
  setData("name", byName);
  // A link from another page (Diff, Trace) may name an operator to search for.
  const linked = readViewUrlState().q?.trim();
  if (linked) {
    table.setQuery("name", linked);
    writeViewUrlState({ q: undefined });
  }

  const note = device
    ? h(
        "p",
        { class: "ptp-muted ptp-card-sub", testid: "device-time-note" },
        "Device time is the sum of the durations of the GPU work each operator launched.",
        sum > 0 && Math.abs(sum - busy) > 0.01 * sum
          ? h(
              "span",
              { testid: "device-time-overlap" },
              " Total GPU work summed: ",
              h("b", { title: `${formatExactUs(sum)}: the durations of all GPU events added up.` }, formatDuration(sum)),
              "; the GPUs were busy for ",
              h("b", { title: `${formatExactUs(busy)}: the time in which at least one GPU event ran.` }, formatDuration(busy)),
              " (work on concurrent streams overlaps).",
            )
          : null,
        " ",
        infoIcon(`${OP_HELP.deviceSelf}\n${OP_HELP.deviceTotal}`),
      )
    : h("p", { class: "ptp-muted ptp-card-sub", testid: "host-only-note" }, "No GPU work was recorded: the table shows host times only.");

  replaceChildren(
    container,
    h(
      "div",
      { class: "ptp-view ptp-operators", testid: "operator-view" },
      piesCard,
      card({ title: "Operators", testid: "card-operator-table" }, note, table.el),
      annotationsCard(ctx),
    ),
  );

  // Which operators have call stacks (for the expanders): one request in the background.
  if (byName.has_call_stacks !== false) {
    fetchFor<OperatorsResponse>(ctx, "operators", { group_by: "name_stack" })
      .then((resp) => {
        cache.set("name_stack", resp);
        stackNames = new Set((Array.isArray(resp.rows) ? resp.rows : []).map((r) => r.name));
        if (grouping === "name") table.refresh();
      })
      .catch(() => {
        // No expanders then; the "Operator + call stack" grouping reports its own error if chosen.
      });
  }

  let charts: Charts | null = null;
  const colors = new ColorMap();
  const drawPies = async (): Promise<void> => {
    if (!charts) return;
    for (const { p, div } of pieDivs) {
      const items: Item[] = rows.map((r) => ({ name: r.name, value: p.get(r) }));
      const slices = topN(items, top.value());
      colors.assign(slices.filter((s) => !s.other).map((s) => s.name));
      await charts.draw(div, () => ({
        data: [pieTrace(slices, { format: formatDuration, colors, what: p.title.toLowerCase(), labelMax: 52 })],
        layout: pieLayout(),
      }));
    }
  };
  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return undefined;
    charts = new Charts(Plotly, ctx);
    await drawPies();
  } catch (err) {
    if (left(ctx)) return undefined;
    const message = err instanceof Error ? err.message : String(err);
    replaceChildren(piesCard, h("p", { class: "ptp-muted", testid: "chart-error" }, `The charts could not be drawn: ${message}`));
  }
  const c = charts;
  return () => c?.dispose();
}
