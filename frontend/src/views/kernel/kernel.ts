/**
 * The GPU Kernel page (GET ./kernels): a pie of the total time per kernel (top N + "Other"), a pie
 * of the kernel time on tensor cores, and the kernel table by name or by name + launching operator
 * + launch configuration.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { DASH, formatBytes, formatDuration, formatExactUs, formatFixed, formatInt, formatPercent1 } from "../../format";
import { loadView } from "../../loadView";
import { type Charts, chartDiv, type Figure } from "../common/charts";
import { durationColumn } from "../common/columns";
import { csvFileName } from "../common/csv";
import { DONUT, pieLayout } from "../common/pie";
import { topNPiesCard } from "../common/topNPies";
import { clampedName, type Column, DataTable } from "../common/table";
import { rowLinkButton, traceLinker, type TraceLinker, viewLink } from "../common/traceLink";
import { shortKernelNames } from "../common/kernelNames";
import { loadSources } from "../common/callStack";
import { stacksPanel } from "../operator/operator";
import { startCharts } from "../common/startCharts";
import { groupingSwitch, left } from "../common/ui";
import {
  hasLaunchingOperator,
  type KernelGrouping,
  type KernelRow,
  kernelRowKey,
  type KernelsResponse,
  type KernelSummary,
  kernelSummary,
  tensorCoreSplit,
} from "./kernelData";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import type { ViewContext } from "../types";

export const KERNEL_HELP = {
  tensorCores: "Whether the kernel uses tensor cores, detected from its name.",
  calls: "How many times the kernel ran in this trace.",
  total: "Sum of the durations of the kernel's runs.",
  mean: "Total / calls.",
  min: "Shortest run.",
  max: "Longest run.",
  blocksPerSm: "Blocks of this kernel per SM (grid size / SMs), duration-weighted; from Kineto",
  occupancy:
    "Estimated achieved occupancy (from Kineto: active warps per SM / the SM's maximum, estimated from the launch configuration), duration-weighted over the runs that have it.",
  streams: "CUDA streams the kernel ran on.",
  operator: "The operator that launched the kernel (\"(no operator)\" when none was recorded).",
  opTc: "Whether the launching operator could run on tensor cores (convolutions, matrix multiplications, attention, RNNs), judged from its name.",
  grid: "Grid dimensions [x, y, z] of the launch.",
  block: "Block dimensions [x, y, z] of the launch.",
  registers: "Registers per thread of the launch.",
  sharedMemory: "Shared memory per block of the launch.",
  tcRatio: "Share of all kernel time spent in kernels that use tensor cores (detected from kernel names).",
};

const GROUPINGS: { id: KernelGrouping; label: string }[] = [
  { id: "name", label: "Kernel" },
  { id: "name_op", label: "Kernel + operator + launch config" },
];

const yesNo = (v: boolean | undefined): string => (v === undefined ? DASH : v ? "yes" : "no");

/** Links of a kernel row: to its occurrences in the Trace view, to the operators that launched it, and (by
 * operator) from an operator cell to the Operator view. */
export interface KernelLinks {
  trace: TraceLinker;
  operators?: (kernel: string) => HTMLElement;
  operator?: (op: string) => HTMLElement;
}

export function kernelColumns(grouping: KernelGrouping, links?: KernelLinks): Column<KernelRow>[] {
  const op = grouping === "name_op";
  const cols: Column<KernelRow>[] = [
    {
      key: "name",
      label: "Name",
      value: (r) => r.name,
      render: (r) =>
        links
          ? h("span", {}, clampedName(r.name, "kernel-name"), links.trace(r.name), !op && links.operators ? links.operators(r.name) : null)
          : clampedName(r.name, "kernel-name"),
      title: (r) => r.name,
      cls: "ptp-name-col",
    },
  ];
  if (op) {
    cols.push({
      key: "operator",
      label: "Operator",
      help: KERNEL_HELP.operator,
      value: (r) => r.operator ?? "",
      render: (r) => h("span", {}, r.operator ?? "", links?.operator && r.operator ? links.operator(r.operator) : null),
      cls: "ptp-op-col",
    });
  }
  cols.push({
    key: "tensor_cores",
    label: "Tensor cores",
    help: KERNEL_HELP.tensorCores,
    value: (r) => r.tensor_cores,
    render: (r) => h("span", { class: r.tensor_cores ? "ptp-tag" : "ptp-tag ptp-tag-muted" }, yesNo(r.tensor_cores)),
    title: () => KERNEL_HELP.tensorCores,
  });
  if (op) cols.push({ key: "op_tc_eligible", label: "Op TC eligible", help: KERNEL_HELP.opTc, value: (r) => r.op_tc_eligible, text: (r) => yesNo(r.op_tc_eligible), title: () => KERNEL_HELP.opTc });
  cols.push(
    { key: "calls", label: "Calls", help: KERNEL_HELP.calls, numeric: true, value: (r) => r.calls, text: (r) => formatInt(r.calls), exact: (r) => `${formatInt(r.calls)} calls` },
    durationColumn<KernelRow>("total", "Total", KERNEL_HELP.total, (r) => r.total_us),
    durationColumn<KernelRow>("mean", "Mean", KERNEL_HELP.mean, (r) => r.mean_us),
    durationColumn<KernelRow>("min", "Min", KERNEL_HELP.min, (r) => r.min_us),
    durationColumn<KernelRow>("max", "Max", KERNEL_HELP.max, (r) => r.max_us),
    {
      key: "blocks_per_sm",
      label: "Mean blocks per SM",
      help: KERNEL_HELP.blocksPerSm,
      numeric: true,
      value: (r) => r.blocks_per_sm,
      text: (r) => (r.blocks_per_sm === null ? "n/a" : formatFixed(r.blocks_per_sm, 2)),
      exact: (r) => (r.blocks_per_sm === null ? "Not recorded" : String(r.blocks_per_sm)),
    },
    {
      key: "achieved_occupancy",
      label: "Mean est. achieved occupancy %",
      help: KERNEL_HELP.occupancy,
      numeric: true,
      value: (r) => r.achieved_occupancy,
      text: (r) => (r.achieved_occupancy === null ? "n/a" : formatPercent1(r.achieved_occupancy)),
      exact: (r) => (r.achieved_occupancy === null ? "Not estimated: the trace has no occupancy for these kernels (CUPTI writes 0 where it cannot estimate one, e.g. cuBLAS nvjet and cuDNN kernels)" : `${(r.achieved_occupancy * 100).toFixed(3)}%`),
      csvHeader: "Mean est. achieved occupancy (%)",
      csv: (r) => (r.achieved_occupancy === null ? null : r.achieved_occupancy * 100),
    },
  );
  if (op) {
    cols.push(
      { key: "grid", label: "Grid", help: KERNEL_HELP.grid, value: (r) => r.grid ?? null, cls: "ptp-mono ptp-nowrap", title: () => KERNEL_HELP.grid },
      { key: "block", label: "Block", help: KERNEL_HELP.block, value: (r) => r.block ?? null, cls: "ptp-mono ptp-nowrap", title: () => KERNEL_HELP.block },
      {
        key: "registers_per_thread",
        label: "Registers/thread",
        help: KERNEL_HELP.registers,
        numeric: true,
        value: (r) => r.registers_per_thread ?? null,
        text: (r) => formatInt(r.registers_per_thread),
      },
      {
        key: "shared_memory",
        label: "Shared memory",
        help: KERNEL_HELP.sharedMemory,
        numeric: true,
        value: (r) => r.shared_memory ?? null,
        text: (r) => formatBytes(r.shared_memory),
        exact: (r) => (r.shared_memory === null || r.shared_memory === undefined ? "Not recorded" : `${formatInt(r.shared_memory)} bytes`),
        csvHeader: "Shared memory (bytes)",
      },
    );
  }
  cols.push({
    key: "streams",
    label: "Streams",
    help: KERNEL_HELP.streams,
    value: (r) => r.streams.join(" "),
    text: (r) => (r.streams.length ? r.streams.join(", ") : "—"),
    sortable: false,
    title: () => KERNEL_HELP.streams,
  });
  return cols;
}

function tensorCoreFigure(ratio: number, kernelUs: number): Figure {
  const { on, off } = tensorCoreSplit(ratio, kernelUs);
  return {
    data: [
      {
        type: "pie",
        labels: ["Using tensor cores", "Not using tensor cores"],
        values: [on, off],
        text: [formatDuration(on), formatDuration(off)],
        hovertemplate: "%{label}<br>%{text} of kernel time · %{percent:.1%}<extra></extra>",
        ...DONUT,
        marker: { colors: ["#59a14f", "#9e9e9e"], line: { width: 1, color: "rgba(128,128,128,0.35)" } },
      },
    ],
    layout: pieLayout({ legend: { orientation: "h", x: 0.5, xanchor: "center", y: -0.05, yanchor: "top" }, margin: { l: 8, r: 8, t: 8, b: 40 } }),
  };
}

/** The pies card: the top N kernels by total time and, when the server knows it, the tensor-core share. */
function kernelPies(summary: KernelSummary): { el: HTMLElement; draw: (charts: Charts) => Promise<void> } {
  const { rows, kernelUs, ratio } = summary;
  const tcPie = chartDiv("pie-tensor-cores", 320);
  const pies = topNPiesCard({
    testid: "card-kernel-pies",
    heading: "Time by kernel",
    noun: "kernels",
    note: h(
      "span",
      { class: "ptp-muted", title: `${formatExactUs(kernelUs)}: ${KERNEL_HELP.total}` },
      `${formatInt(rows.length)} kernels · ${formatDuration(kernelUs)} of kernel time`,
    ),
    pieClass: "ptp-kernel-pies",
    height: 320,
    pies: [{
      key: "kernels",
      title: "Total time per kernel",
      help: KERNEL_HELP.total,
      items: () => rows.map((r) => ({ name: r.name, value: r.total_us })),
      what: "total",
      labelMax: 44,
      labels: (names) => {
        const short = shortKernelNames(names);
        return (name) => short.get(name) ?? name;
      },
    }],
    extra: ratio !== null
      ? h(
          "div",
          { testid: "tensor-core-pie" },
          h(
            "div",
            { class: "ptp-pie-title" },
            "Kernel time on tensor cores: ",
            h("span", { testid: "tensor-core-ratio", dataset: { value: String(ratio) } }, formatPercent1(ratio)),
            infoIcon(KERNEL_HELP.tcRatio),
          ),
          tcPie,
        )
      : null,
  });
  const draw = async (charts: Charts): Promise<void> => {
    await pies.draw(charts);
    if (ratio !== null) await charts.draw(tcPie, () => tensorCoreFigure(ratio, kernelUs));
  };
  return { el: pies.el, draw };
}

const GROUP_SEARCHES = {
  name: { key: "name", label: "Search kernels", placeholder: "Search kernel names", text: (r: KernelRow) => r.name },
  operator: { key: "operator", label: "Search operators", placeholder: "Search operator names", text: (r: KernelRow) => r.operator ?? "" },
};

/**
 * The kernel table card with its group-by switch (each grouping fetched once), the links of its rows, and the
 * search a link from another page asks for (`q`: a kernel, from the Overview's evidence; `op`: an operator whose
 * kernels to show, from the Operator view).
 */
function kernelTableCard(ctx: ViewContext, byName: KernelsResponse): HTMLElement {
  let grouping: KernelGrouping = "name";
  const cache = new Map<KernelGrouping, KernelsResponse>([["name", byName]]);
  const select = h(
    "select",
    { testid: "kernel-group-by", attrs: { "aria-label": "Group by" }, onChange: () => { void setGrouping(select.value as KernelGrouping); } },
    GROUPINGS.map((g) => h("option", { attrs: { value: g.id } }, g.label)),
  );
  const tableStatus = h("span", { class: "ptp-muted", testid: "table-status", attrs: { "aria-live": "polite" } });
  const table = new DataTable<KernelRow>({
    testid: "kernel-table",
    csvName: () => csvFileName("kernels", ctx.run, ctx.worker, `span${ctx.span}`, grouping),
    controls: [h("label", { class: "ptp-picker" }, "Group by", select), tableStatus],
    emptyText: "This trace has no GPU kernels.",
  });
  const showGrouping = async (g: KernelGrouping): Promise<void> => {
    select.value = g;
    await setGrouping(g);
  };
  const links: KernelLinks = {
    trace: traceLinker(ctx),
    // kernel → the operators that launched it: this table by kernel + operator, searched for the kernel
    operators: (kernel) =>
      rowLinkButton({
        label: "operators",
        title: `The operators that launched ${kernel}`,
        testid: "kernel-operators",
        onClick: () => {
          void showGrouping("name_op").then(() => {
            table.setQuery("operator", "");
            table.setQuery("name", kernel, true);
          });
        },
      }),
    operator: (name) =>
      viewLink(ctx, { label: "in Operator view ↗", title: `${name} in the Operator view`, testid: "operator-link", view: "Operator", state: { q: name } }),
  };
  const setData = (g: KernelGrouping, resp: KernelsResponse): void => {
    table.setData({
      columns: kernelColumns(g, links),
      rows: Array.isArray(resp.rows) ? resp.rows : [],
      searches: g === "name_op" ? [GROUP_SEARCHES.name, GROUP_SEARCHES.operator] : [GROUP_SEARCHES.name],
      sort: { key: "total", dir: "desc" },
      // by operator: the source of a kernel is where its operator was called from
      expand: g === "name_op"
        ? { can: hasLaunchingOperator, render: (r) => stacksPanel(ctx, r.operator ?? "", true), label: "Show the call stacks of the launching operator" }
        : null,
      rowKey: kernelRowKey,
    });
  };
  const setGrouping = groupingSwitch(ctx, "kernels", cache, select, tableStatus, (g: KernelGrouping, resp: KernelsResponse) => {
    grouping = g;
    setData(g, resp);
  });
  setData("name", byName);
  const linked = readViewUrlState();
  if (linked.q?.trim()) table.setQuery("name", linked.q.trim());
  if (linked.op?.trim()) {
    const name = linked.op.trim();
    void showGrouping("name_op").then(() => { table.setQuery("operator", name, true); });
  }
  if (linked.q || linked.op) writeViewUrlState({ q: undefined, op: undefined });
  return card({ title: "Kernels", testid: "card-kernel-table" }, table.el);
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  void loadSources(ctx); // the launching operators' stacks, user frames first
  const query = { run: ctx.run, worker: ctx.worker, span: ctx.span };
  const data = await loadView(ctx, container, {
    byName: () => ctx.api.get("kernels", { ...query, group_by: "name" }, { signal: ctx.signal }),
  }, { what: "the kernels" });
  if (!data) return undefined;
  const summary = kernelSummary(data.byName);
  const pies = kernelPies(summary);
  // Opened from a link that asks for some kernels (an operator's, a kernel by name): what was asked for comes
  // first, above the fold; the pies of every kernel follow.
  const linked = readViewUrlState();
  const asked = Boolean(linked.op?.trim() || linked.q?.trim());
  const table = kernelTableCard(ctx, data.byName);
  const piesEl = summary.rows.length ? pies.el : null;
  replaceChildren(
    container,
    h("div", { class: "ptp-view ptp-kernels", testid: "kernel-view", dataset: { linked: String(asked) } },
      asked ? [table, piesEl] : [piesEl, table]),
  );
  if (!summary.rows.length) return undefined;
  const charts = await startCharts(ctx, pies.el, pies.draw);
  if (left(ctx)) return undefined;
  return () => charts?.dispose();
}
