/**
 * The Operator page (GET ./operators): pies of the top N operators (+ "Other") by device/host
 * self/total time, and the operator table grouped by name, name + input shape or name + call stack.
 * By name, operators called from Python expand to their distinct call stacks (fetched on demand).
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatDuration, formatExactUs, formatInt, formatPercent1 } from "../../format";
import { loadView } from "../common/loadView";
import { frameList, loadSources, parseStack } from "../common/callStack";
import { OP_HELP, stacksPanel } from "../common/operatorStacks";
import type { Charts } from "../common/charts";
import { durationColumn } from "../common/columns";
import { csvFileName } from "../common/csv";
import { topNPiesCard } from "../common/topNPies";
import { type Column, DataTable } from "../common/table";
import { type TraceLinker, traceLinker, viewLink } from "../common/traceLink";
import { startCharts } from "../common/startCharts";
import { spanGet, groupingSwitch, left } from "../common/ui";
import {
  groupingUnsupported,
  hasWallTime,
  type OperatorGrouping,
  type OperatorRow,
  operatorRowKey,
  type OperatorsResponse,
  type OperatorSummary,
  operatorSummary,
  rowsThatFit,
} from "./operatorData";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import { annotationsCard } from "./annotations";
import type { ViewContext } from "../types";


const GROUPINGS: { id: OperatorGrouping; label: string }[] = [
  { id: "name", label: "Operator" },
  { id: "name_shape", label: "Operator + input shape" },
  { id: "name_stack", label: "Operator + call stack" },
];

interface Flags {
  device: boolean;
  wall: boolean;
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
    cols.push(durationColumn<OperatorRow>("device_self", "Device self", OP_HELP.deviceSelf, (r) => r.device_self_us));
    cols.push(durationColumn<OperatorRow>("device_total", "Device total", OP_HELP.deviceTotal, (r) => r.device_total_us));
    if (flags.wall) cols.push(durationColumn<OperatorRow>("device_wall", "Device wall", OP_HELP.deviceWall, (r) => r.device_total_wall_us));
  }
  cols.push(durationColumn<OperatorRow>("host_self", "Host self", OP_HELP.hostSelf, (r) => r.host_self_us));
  cols.push(durationColumn<OperatorRow>("host_total", "Host total", OP_HELP.hostTotal, (r) => r.host_total_us));
  if (flags.device) {
    cols.push({ key: "tc_eligible", label: "Tensor-core eligible", help: OP_HELP.tcEligible, value: (r) => r.tc_eligible, title: () => OP_HELP.tcEligible });
    cols.push(tcPercent("tc_self", "TC self %", OP_HELP.tcSelf, (r) => r.tc_self_ratio, (r) => r.device_self_us));
    cols.push(tcPercent("tc_total", "TC total %", OP_HELP.tcTotal, (r) => r.tc_total_ratio, (r) => r.device_total_us));
  }
  return cols;
}


const PIES: { key: string; title: string; help: string; device: boolean; get: (r: OperatorRow) => number }[] = [
  { key: "device_self", title: "Device self time", help: OP_HELP.deviceSelf, device: true, get: (r) => r.device_self_us },
  { key: "device_total", title: "Device total time", help: OP_HELP.deviceTotal, device: true, get: (r) => r.device_total_us },
  { key: "host_self", title: "Host self time", help: OP_HELP.hostSelf, device: false, get: (r) => r.host_self_us },
  { key: "host_total", title: "Host total time", help: OP_HELP.hostTotal, device: false, get: (r) => r.host_total_us },
];

/** The pies card: the top N operators by each time (host times only for a trace without GPU work). */
function operatorPies(rows: readonly OperatorRow[], device: boolean): { el: HTMLElement; draw: (charts: Charts) => Promise<void> } {
  return topNPiesCard({
    testid: "card-operator-pies",
    heading: "Time by operator",
    noun: "operators",
    note: h("span", { class: "ptp-muted" }, `${formatInt(rows.length)} operators · the rest are in "Other"`),
    height: 300,
    pies: PIES.filter((p) => device || !p.device).map((p) => ({
      key: p.key,
      title: p.title,
      help: p.help,
      items: () => rows.map((r) => ({ name: r.name, value: p.get(r) })),
      what: p.title.toLowerCase(),
      labelMax: 52,
    })),
  });
}

/** The group-by picker; groupings the trace did not record are offered disabled, with the reason. */
function groupingSelect(byName: OperatorsResponse, onChange: (g: OperatorGrouping) => void): HTMLSelectElement {
  const select = h(
    "select",
    { testid: "operator-group-by", attrs: { "aria-label": "Group by" }, onChange: () => { onChange(select.value as OperatorGrouping); } },
    GROUPINGS.map((g) => {
      const unsupported = groupingUnsupported(g.id, byName);
      return h(
        "option",
        { attrs: { value: g.id, disabled: unsupported !== null }, title: unsupported ?? undefined },
        g.label + (unsupported !== null ? " (not recorded)" : ""),
      );
    }),
  );
  return select;
}

/**
 * The operator table with its group-by switch (each grouping fetched once), its links, the expanders of
 * operators called from Python (known from one background request), and the search a link from another page
 * (Diff, Trace) asks for.
 */
function operatorTable(ctx: ViewContext, byName: OperatorsResponse, device: boolean): HTMLElement {
  let grouping: OperatorGrouping = "name";
  let stackNames: Set<string> | null = null;
  const cache = new Map<OperatorGrouping, OperatorsResponse>([["name", byName]]);
  const select = groupingSelect(byName, (g) => { void setGrouping(g); });
  const tableStatus = h("span", { class: "ptp-muted", testid: "table-status", attrs: { "aria-live": "polite" } });
  const fit = rowsThatFit(window.innerHeight);
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
      columns: operatorColumns(g, { device, wall: device && hasWallTime(resp.rows) }, linkToTrace, device ? linkToKernels : undefined, linkToStacks),
      rows: Array.isArray(resp.rows) ? resp.rows : [],
      searches: [{ key: "name", label: "Search operators", placeholder: "Search operator names", text: (r) => r.name }],
      sort: { key: device ? "device_self" : "host_self", dir: "desc" },
      expand:
        g === "name" && byName.has_call_stacks !== false
          ? { can: (r) => stackNames?.has(r.name) ?? false, render: (r) => stacksPanel(ctx, r.name, device), label: "Show the call stacks" }
          : null,
      rowKey: operatorRowKey,
    });
  };
  const setGrouping = groupingSwitch(ctx, "operators", cache, select, tableStatus, (g: OperatorGrouping, resp: OperatorsResponse) => {
    grouping = g;
    setData(g, resp);
  });
  setData("name", byName);
  const linked = readViewUrlState().q?.trim();
  if (linked) {
    table.setQuery("name", linked);
    writeViewUrlState({ q: undefined });
  }
  // Which operators have call stacks (for the expanders): one request in the background.
  if (byName.has_call_stacks !== false) {
    spanGet(ctx, "operators", { group_by: "name_stack" })
      .then((resp) => {
        cache.set("name_stack", resp);
        stackNames = new Set((Array.isArray(resp.rows) ? resp.rows : []).map((r) => r.name));
        if (grouping === "name") table.refresh();
      })
      .catch(() => {
        // No expanders then; the "Operator + call stack" grouping reports its own error if chosen.
      });
  }
  return table.el;
}

/** What device time means here and, where streams overlapped, the summed GPU work beside the busy time. */
function deviceTimeNote(summary: OperatorSummary): HTMLElement {
  const { sumUs, busyUs } = summary;
  if (!summary.device) {
    return h("p", { class: "ptp-muted ptp-card-sub", testid: "host-only-note" }, "No GPU work was recorded: the table shows host times only.");
  }
  return h(
    "p",
    { class: "ptp-muted ptp-card-sub", testid: "device-time-note" },
    "Device time is the sum of the durations of the GPU work each operator launched.",
    summary.overlap
      ? h(
          "span",
          { testid: "device-time-overlap" },
          " Total GPU work summed: ",
          h("b", { title: `${formatExactUs(sumUs)}: the durations of all GPU events added up.` }, formatDuration(sumUs)),
          "; the GPUs were busy for ",
          h("b", { title: `${formatExactUs(busyUs)}: the time in which at least one GPU event ran.` }, formatDuration(busyUs)),
          " (work on concurrent streams overlaps).",
        )
      : null,
    " ",
    infoIcon(`${OP_HELP.deviceSelf}\n${OP_HELP.deviceTotal}`),
  );
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  const query = { run: ctx.run, worker: ctx.worker, span: ctx.span };
  const data = await loadView(ctx, container, {
    byName: () => ctx.api.get("operators", { ...query, group_by: "name" }, { signal: ctx.signal }),
    sources: () => loadSources(ctx), // which frames are the user's: before any stack is drawn
  }, { what: "the operators" });
  if (!data) return undefined;
  const summary = operatorSummary(data.byName);
  const pies = operatorPies(summary.rows, summary.device);
  replaceChildren(
    container,
    h(
      "div",
      { class: "ptp-view ptp-operators", testid: "operator-view" },
      pies.el,
      card({ title: "Operators", testid: "card-operator-table" }, deviceTimeNote(summary), operatorTable(ctx, data.byName, summary.device)),
      annotationsCard(ctx),
    ),
  );
  const charts = await startCharts(ctx, pies.el, pies.draw);
  if (left(ctx)) return undefined;
  return () => charts?.dispose();
}
