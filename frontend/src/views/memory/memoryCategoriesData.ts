/**
 * The JSON of ./memory_categories (docs/api/openapi.yaml) and the pure logic of the "Memory by
 * category" card: category names and colours (torch's), the stacked series as chart traces, and
 * the peak's make-up. No DOM here, so it is tested without a browser.
 */
import { formatBytes, formatMs, formatPercent1 } from "../../format";

export type CategorySource = "export" | "inferred";

export interface TopAllocation {
  bytes: number;
  category: string;
  category_source: CategorySource;
  operator: string;
  alloc_us: number | null;
  free_us: number | null;
  stack: string[];
}

export interface CategoryPeak {
  /** the memory curve's peak (the allocator's largest total), as the card above marks it */
  time_us: number;
  total_bytes: number;
  by_category: Record<string, number>;
  /** the allocator's bytes in no category at the peak (torch's export counts less); absent from older servers */
  uncategorized_bytes?: number;
  /** the series' own largest total (lower, a moment apart, with an export) */
  series_peak?: { time_us: number; total_bytes: number };
  dominant: string;
  top_allocations: TopAllocation[];
}

export interface CategoryExport {
  file: string;
  folder: string;
  kind: "timeline" | "raw";
  raw_file: string | null;
}

export interface CategoryResponse {
  source: CategorySource;
  categories: string[];
  device: string | null;
  devices: string[];
  trace_file: string;
  start_us: number | null;
  reason: string | null;
  series: { times_us: number[]; bytes: number[][] };
  peak: CategoryPeak | null;
  inferred_at_peak: Record<string, number> | null;
  export: CategoryExport | null;
  export_errors: { file: string; error: string }[];
}

interface CategoryInfo {
  label: string;
  color: string;
  help: string;
}

/** torch's categories in torch's order, with the colours of its own memory timeline plot. */
export const CATEGORY_INFO: Record<string, CategoryInfo> = {
  parameter: { label: "Parameter", color: "#1b7f3b", help: "Model weights." },
  optimizer_state: { label: "Optimizer state", color: "#d4a017", help: "State the optimizer keeps per parameter (Adam's moments, momentum)." },
  input: { label: "Input", color: "#6b6b6b", help: "The batch copied to the device." },
  temporary: { label: "Temporary", color: "#9370db", help: "Memory created and freed inside one operator." },
  activation: { label: "Activation", color: "#e0301e", help: "Forward outputs, kept for backward." },
  gradient: { label: "Gradient", color: "#1f3fbf", help: "Parameter gradients, kept until the optimizer step and zero_grad." },
  autograd_detail: { label: "Autograd detail", color: "#4f8fe6", help: "Gradients of activations, made and used up inside backward." },
  unknown: { label: "Unknown", color: "#a9a9a9", help: "Memory torch (or the inference) could not put in a category." },
};

export function categoryLabel(key: string): string {
  return CATEGORY_INFO[key]?.label ?? key;
}

export function categoryColor(key: string): string {
  return CATEGORY_INFO[key]?.color ?? "#a9a9a9";
}

export function sourceLabel(source: CategorySource): string {
  return source === "export" ? "torch export" : "inferred";
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** The response with every field it needs present (missing lists empty, missing objects null). */
export function normalizeCategories(raw: unknown): CategoryResponse {
  const r = (typeof raw === "object" && raw !== null ? raw : {}) as Partial<CategoryResponse>;
  const series = r.series && Array.isArray(r.series.times_us) && Array.isArray(r.series.bytes) ? r.series : { times_us: [], bytes: [] };
  return {
    source: r.source === "export" ? "export" : "inferred",
    categories: Array.isArray(r.categories) ? r.categories : Object.keys(CATEGORY_INFO),
    device: typeof r.device === "string" ? r.device : null,
    devices: Array.isArray(r.devices) ? r.devices : [],
    trace_file: typeof r.trace_file === "string" ? r.trace_file : "",
    start_us: isNum(r.start_us) ? r.start_us : null,
    reason: typeof r.reason === "string" ? r.reason : null,
    series,
    peak: r.peak ?? null,
    inferred_at_peak: r.inferred_at_peak ?? null,
    export: r.export ?? null,
    export_errors: Array.isArray(r.export_errors) ? r.export_errors : [],
  };
}

export interface StackedTrace {
  key: string;
  label: string;
  color: string;
  /** ms from the trace start */
  x: number[];
  /** bytes divided by the axis unit */
  y: number[];
  bytes: number[];
}

/** One stacked trace per category that holds memory at some time (torch's order, bottom up). */
export function stackedTraces(resp: CategoryResponse, originUs: number, unitBytes: number): StackedTrace[] {
  const x = resp.series.times_us.map((t) => (t - originUs) / 1000);
  const out: StackedTrace[] = [];
  resp.categories.forEach((key, i) => {
    const bytes = resp.series.bytes.map((row) => row[i] ?? 0);
    if (!bytes.some((b) => b !== 0)) return;
    out.push({ key, label: categoryLabel(key), color: categoryColor(key), x, y: bytes.map((b) => b / unitBytes), bytes });
  });
  return out;
}

/** The largest total of the series (what the y-axis must hold). */
export function seriesMax(resp: CategoryResponse): number {
  let best = 0;
  for (const row of resp.series.bytes) best = Math.max(best, row.reduce((a, b) => a + b, 0));
  return best;
}

export interface PeakRow {
  key: string;
  label: string;
  bytes: number;
  share: number;
  /** with an export: the inference's bytes at the same moment, and its difference in % of torch's */
  inferred: number | null;
  difference: number | null;
}

/** The peak's categories, largest first (categories with no bytes on either side left out). */
export function peakRows(resp: CategoryResponse): PeakRow[] {
  const peak = resp.peak;
  if (!peak) return [];
  const other = resp.inferred_at_peak;
  const rows = resp.categories.map((key) => {
    const bytes = peak.by_category[key] ?? 0;
    const inferred = other ? (other[key] ?? 0) : null;
    const difference = inferred === null || bytes === 0 ? null : (inferred - bytes) / bytes;
    return { key, label: categoryLabel(key), bytes, share: peak.total_bytes > 0 ? bytes / peak.total_bytes : 0, inferred, difference };
  });
  const shown = rows.filter((r) => r.bytes > 0 || (r.inferred ?? 0) > 0).sort((a, b) => b.bytes - a.bytes || a.label.localeCompare(b.label));
  // The rows add up to the peak shown above: the allocator's bytes in no category close the table.
  const rest = peak.uncategorized_bytes ?? 0;
  if (rest > 0) shown.push({ key: UNCATEGORIZED, label: "In no category", bytes: rest, share: peak.total_bytes > 0 ? rest / peak.total_bytes : 0, inferred: other ? 0 : null, difference: null });
  return shown;
}

/** The key of the peak table's last row: allocator bytes that no category holds. */
export const UNCATEGORIZED = "uncategorized";

/** With an export, where torch's own series peaks when that is not the curve's peak (else ""). */
export function seriesPeakNote(resp: CategoryResponse, originUs: number): string {
  const peak = resp.peak;
  const own = peak?.series_peak;
  if (!peak || !own || (own.time_us === peak.time_us && own.total_bytes === peak.total_bytes)) return "";
  const rest = peak.uncategorized_bytes ?? 0;
  const who = resp.source === "export" ? "torch's categories" : "the categories";
  return `At the memory curve's peak (above). ${who.charAt(0).toUpperCase() + who.slice(1)} add up to ${formatBytes(peak.total_bytes - rest)} there` +
    `${rest > 0 ? `: ${formatBytes(rest)} of the allocator's total is in no category` : ""}; their own largest total is ${formatBytes(own.total_bytes)} at ${formatMs(own.time_us - originUs)}.`;
}

/** "Peak 609.2 MiB at 14.18 ms · mostly Activation (52.3%)". */
export function peakSummary(resp: CategoryResponse, originUs: number): string {
  const peak = resp.peak;
  if (!peak) return "";
  const top = peak.by_category[peak.dominant] ?? 0;
  const share = peak.total_bytes > 0 ? top / peak.total_bytes : 0;
  return `Peak ${formatBytes(peak.total_bytes)} at ${formatMs(peak.time_us - originUs)} · mostly ${categoryLabel(peak.dominant)} (${formatPercent1(share)})`;
}

/** Where the series comes from, in one sentence for the card's subtitle. */
export function sourceSentence(resp: CategoryResponse): string {
  const trace = resp.trace_file || "this trace";
  if (resp.source === "export" && resp.export) {
    const raw = resp.export.raw_file && resp.export.raw_file !== resp.export.file ? ` (allocations labelled from ${resp.export.raw_file})` : "";
    return `torch's own categories from ${resp.export.folder}/${resp.export.file}${raw}, recorded with ${trace}.`;
  }
  return `Inferred from ${trace} by training phase and lifetime; record prof.export_memory_timeline(…) beside the trace to see torch's own categories.`;
}
