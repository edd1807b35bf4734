/**
 * The GPU page's CUPTI counters card (GET ./cupti_counters): shown only when the trace has range-profiler
 * counters. Per operator, the sums of every counter over its kernels; per kernel, the values with the operators
 * that launched it, each row linking to the kernel in the Trace view.
 */
import { card, infoIcon } from "../../components";
import { h } from "../../dom";
import { formatDuration, formatFixed, formatInt } from "../../format";
import type { CuptiCounterOperator, CuptiCounterRow, CuptiCountersResponse } from "./gpuData";
import { csvFileName } from "../common/csv";
import { clampedName, type Column, DataTable } from "../common/table";
import { traceRangeLink } from "../common/traceLink";
import type { ViewContext } from "../types";

const HELP = {
  card: "Hardware counters the CUPTI range profiler measured per kernel (torch.profiler with profiler_metrics and profiler_measure_per_kernel=True), joined by order to the kernels of the same name, or to the launch calls where the trace has no kernel events.",
  flops: "SASS floating-point instructions × FLOPs each (an FMA counts 2): Σ of the smsp__sass_thread_inst_executed_op_*_pred_on.sum counters the trace has.",
};

/** Counts as integers, rates and ratios with two decimals. */
function counterText(v: number | null): string {
  return v === null ? "—" : Number.isInteger(v) ? formatInt(v) : formatFixed(v, 2);
}

function metricColumns<R extends { values: (number | null)[]; sass_flops: number | null }>(resp: CuptiCountersResponse): Column<R>[] {
  const cols: Column<R>[] = resp.metrics.map((m, i) => ({
    key: `m${i}`,
    label: m,
    help: `Counter ${m} (CUPTI metric name)`,
    numeric: true,
    value: (r: R) => r.values[i] ?? null,
    text: (r: R) => counterText(r.values[i] ?? null),
  }));
  if (resp.has_sass_flops) {
    cols.push({ key: "sass_flops", label: "SASS FLOPs", help: HELP.flops, numeric: true, value: (r) => r.sass_flops, text: (r) => counterText(r.sass_flops) });
  }
  return cols;
}

function operatorTable(ctx: ViewContext, resp: CuptiCountersResponse): DataTable<CuptiCounterOperator> {
  const table = new DataTable<CuptiCounterOperator>({ testid: "counters-operators", csvName: () => csvFileName("cupti-counters-operators", ctx.run, ctx.worker, `span${ctx.span}`), pageSize: 10, emptyText: "No counters." });
  table.setData({
    columns: [
      { key: "operator", label: "Operator", value: (r) => r.operator ?? "(no operator)", cls: "ptp-name-col" },
      { key: "kernels", label: "Kernels", numeric: true, value: (r) => r.kernels, text: (r) => formatInt(r.kernels) },
      ...metricColumns<CuptiCounterOperator>(resp),
    ],
    rows: resp.operators,
    sort: resp.metrics.length ? { key: "m0", dir: "desc" } : { key: "kernels", dir: "desc" },
    rowKey: (r) => r.operator ?? "",
  });
  return table;
}

function kernelTable(ctx: ViewContext, resp: CuptiCountersResponse): DataTable<CuptiCounterRow> {
  const table = new DataTable<CuptiCounterRow>({ testid: "counters-kernels", csvName: () => csvFileName("cupti-counters-kernels", ctx.run, ctx.worker, `span${ctx.span}`), pageSize: 10, emptyText: "No counters." });
  table.setData({
    columns: [
      { key: "name", label: "Kernel", value: (r) => r.name, render: (r) => clampedName(r.name, "kernel-name"), title: (r) => r.name, cls: "ptp-name-col" },
      { key: "operator", label: "Operator", value: (r) => r.operator ?? "—", title: (r) => (r.top_operator ? `called from ${r.top_operator}` : "") },
      { key: "dur", label: "Range", numeric: true, value: (r) => r.dur_us, text: (r) => formatDuration(r.dur_us) },
      ...metricColumns<CuptiCounterRow>(resp),
      { key: "where", label: "In trace", value: (r) => r.start_us, render: (r) => traceRangeLink(ctx, "show", r.start_us, r.start_us + r.dur_us, r.name), sortable: false },
    ],
    rows: resp.rows,
    sort: { key: "where", dir: "asc" },
    rowKey: (r) => String(r.id),
  });
  return table;
}

/** The card, or null when the trace has no counters (the GPU page then shows nothing about them). */
export function countersCard(ctx: ViewContext, resp: CuptiCountersResponse): HTMLElement | null {
  if (!resp.metrics.length || !resp.total_rows) return null;
  const joined = resp.join === "none" ? "no kernel or launch matched" : `joined by ${resp.join}`;
  return card(
    { testid: "card-counters" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "CUPTI counters", infoIcon(HELP.card)),
      h("span", { class: "ptp-muted", testid: "counters-summary" }, `${formatInt(resp.total_rows)} kernels measured, ${formatInt(resp.matched)} ${joined}; ${resp.metrics.length} counters`)),
    h("h4", {}, "By operator (sums over its kernels)"),
    operatorTable(ctx, resp).el,
    h("h4", {}, resp.rows.length < resp.total_rows ? `Per kernel (first ${formatInt(resp.rows.length)} of ${formatInt(resp.total_rows)})` : "Per kernel"),
    kernelTable(ctx, resp).el,
  );
}
