/**
 * The Diff page's operator and kernel tables: rows joined by name, one compared metric at a time
 * (picker in the toolbar), default order by the size of the change, "new"/"gone" badges, signed
 * deltas (never "Infinity%": a missing percentage reads "—"), search, paging and CSV export
 * (common/table's DataTable), and for operators links into either side's Operator view.
 */
import { type Child, h } from "../../dom";
import { formatDuration, formatExactUs, formatInt, formatSignedDuration, formatSignedPercent } from "../../format";
import { type Column, DataTable, clampedName } from "../common/table";
import { type DiffRow, rowValue } from "./diffTypes";

export interface Metric {
  key: string;
  label: string;
  help: string;
}

export const OPERATOR_METRICS: Metric[] = [
  { key: "device_total_us", label: "Device total", help: "GPU time of the kernels launched by the operator and its children (sum over calls)." },
  { key: "device_self_us", label: "Device self", help: "GPU time of the kernels launched by the operator itself (sum over calls)." },
  { key: "host_total_us", label: "Host total", help: "Host wall time of the operator, children included (sum over calls)." },
  { key: "host_self_us", label: "Host self", help: "Host wall time of the operator minus its children (sum over calls)." },
];

export const KERNEL_METRICS: Metric[] = [
  { key: "total_us", label: "Total", help: "Sum of the kernel's durations." },
  { key: "mean_us", label: "Mean", help: "Mean duration of one call of the kernel." },
];

const STATUS_HELP = "new: only in the experiment; gone: only in the baseline; empty: in both.";
const PCT_HELP = "Change relative to the baseline. \u201c—\u201d where there is no percentage: the row is new or gone, or the baseline is 0.";

function deltaClass(v: number | null): string | undefined {
  if (v === null || v === 0) return undefined;
  return v > 0 ? "ptp-delta-up" : "ptp-delta-down";
}

/** A signed change, coloured: more time is red, less is green. */
export function deltaSpan(v: number | null, text: string, testid?: string): HTMLElement {
  return h("span", { class: ["ptp-delta", deltaClass(v)], testid }, text);
}

export function statusBadge(status: string): Child {
  if (status === "new") return h("span", { class: "ptp-badge ptp-badge-new", testid: "badge-new", title: "Only in the experiment" }, "new");
  if (status === "gone") return h("span", { class: "ptp-badge ptp-badge-gone", testid: "badge-gone", title: "Only in the baseline" }, "gone");
  return null;
}

/** Rows ordered by |Δ metric| (largest change first), ties by name. */
export function byChange(rows: readonly DiffRow[], metric: string): DiffRow[] {
  return [...rows].sort((a, b) => {
    const da = Math.abs(rowValue(a, "delta", metric) ?? 0);
    const db = Math.abs(rowValue(b, "delta", metric) ?? 0);
    return db - da || a.name.localeCompare(b.name);
  });
}

function columns(metric: Metric, what: string, links: ((row: DiffRow) => Child) | null): Column<DiffRow>[] {
  const m = metric.key;
  const side = (key: "baseline" | "experiment", label: string): Column<DiffRow> => ({
    key,
    label,
    numeric: true,
    help: `${metric.label} in the ${key}: ${metric.help}`,
    value: (r) => rowValue(r, key, m),
    text: (r) => formatDuration(rowValue(r, key, m)),
    exact: (r) => formatExactUs(rowValue(r, key, m)),
    csvHeader: `${label} ${metric.label.toLowerCase()} (us)`,
  });
  const calls = (key: "baseline" | "experiment", label: string): Column<DiffRow> => ({
    key: `calls_${key}`,
    label,
    numeric: true,
    help: `Calls in the ${key}.`,
    value: (r) => rowValue(r, key, "calls"),
    text: (r) => formatInt(rowValue(r, key, "calls")),
    title: (r) => {
      const d = rowValue(r, "delta", "calls");
      return `${formatInt(rowValue(r, key, "calls"))} calls in the ${key}${d !== null && d !== 0 ? ` (change: ${d > 0 ? "+" : ""}${formatInt(d)})` : ""}`;
    },
    csvHeader: `${label} (${key})`,
  });
  return [
    {
      key: "name",
      label: what,
      value: (r) => r.name,
      render: (r) => h("div", { class: "ptp-diff-name" }, clampedName(r.name), links ? links(r) : null),
      title: (r) => r.name,
      cls: "ptp-name-col",
    },
    {
      key: "status",
      label: "Status",
      help: STATUS_HELP,
      value: (r) => r.status,
      render: (r) => statusBadge(r.status),
      title: (r) => (r.status === "new" ? "Only in the experiment" : r.status === "gone" ? "Only in the baseline" : "In both traces"),
    },
    calls("baseline", "Calls"),
    calls("experiment", "Calls (exp.)"),
    side("baseline", "Baseline"),
    side("experiment", "Experiment"),
    {
      key: "delta",
      label: "Δ",
      numeric: true,
      help: `Experiment minus baseline (${metric.label.toLowerCase()}); a missing side counts as 0.`,
      value: (r) => rowValue(r, "delta", m),
      render: (r) => deltaSpan(rowValue(r, "delta", m), formatSignedDuration(rowValue(r, "delta", m))),
      exact: (r) => formatExactUs(rowValue(r, "delta", m)),
      csvHeader: `Delta ${metric.label.toLowerCase()} (us)`,
    },
    {
      key: "delta_pct",
      label: "Δ %",
      numeric: true,
      help: PCT_HELP,
      value: (r) => rowValue(r, "delta_ratio", m),
      render: (r) => deltaSpan(rowValue(r, "delta_ratio", m), formatSignedPercent(rowValue(r, "delta_ratio", m))),
      title: (r) => {
        const p = rowValue(r, "delta_ratio", m);
        if (p !== null) return `${formatSignedPercent(p)} of the baseline`;
        return r.status === "new" ? "No percentage: new in the experiment" : r.status === "gone" ? "No percentage: gone from the experiment" : "No percentage: the baseline is 0";
      },
      csv: (r) => {
        const p = rowValue(r, "delta_ratio", m);
        return p === null ? null : Number((p * 100).toFixed(4));
      },
      csvHeader: `Delta ${metric.label.toLowerCase()} (%)`,
    },
  ];
}

export interface DiffTableOptions {
  testid: string;
  /** "Operator" or "Kernel" */
  what: string;
  rows: DiffRow[];
  metrics: Metric[];
  csvName: (metric: Metric) => string;
  links?: (row: DiffRow) => Child;
}

export class DiffTable {
  readonly el: HTMLElement;
  private readonly table: DataTable<DiffRow>;
  private metric: Metric;

  constructor(private readonly opts: DiffTableOptions) {
    const first = opts.metrics[0];
    if (!first) throw new Error("DiffTable needs a metric");
    this.metric = first;
    const select = h(
      "select",
      {
        testid: `${opts.testid}-metric`,
        attrs: { "aria-label": "Compared metric" },
        onChange: () => {
          this.metric = opts.metrics.find((x) => x.key === select.value) ?? first;
          this.update(false);
        },
      },
      opts.metrics.map((x) => h("option", { attrs: { value: x.key }, title: x.help }, x.label)),
    );
    this.table = new DataTable<DiffRow>({
      testid: opts.testid,
      csvName: () => opts.csvName(this.metric),
      controls: h("label", { class: "ptp-picker" }, "Compare", select),
      pageSizes: [10, 20, 50, 100],
      pageSize: 10,
      emptyText: `No ${opts.what.toLowerCase()}s in either trace.`,
    });
    this.el = this.table.el;
    this.update(false);
  }

  /** Rows in order of |Δ| of the compared metric unless the user sorted by a column. */
  private update(keepSort: boolean): void {
    const m = this.metric;
    this.table.setData(
      {
        columns: columns(m, this.opts.what, this.opts.links ?? null),
        rows: byChange(this.opts.rows, m.key),
        rowKey: (r) => r.name,
        searches: [{ key: "name", label: `Search ${this.opts.what.toLowerCase()}s`, placeholder: `Search ${this.opts.what.toLowerCase()} names`, text: (r) => r.name }],
        sort: null,
      },
      keepSort,
    );
  }
}
