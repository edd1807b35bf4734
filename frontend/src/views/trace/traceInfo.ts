/**
 * The built-in "Trace info" tab: GET ./summary for the selected span, shown as cards and tables.
 * Rendered only for spans in state "ready" (the shell shows progress / error cards otherwise).
 */
import { ApiError } from "../../api";
import { card, errorCard, progressBar } from "../../components";
import { h, replaceChildren } from "../../dom";
import { DASH, formatBytes, formatDurationUs, formatInt, formatValue } from "../../format";
import type { DeviceInfo, SummaryResponse, TraceMetadata } from "../../types";
import type { ViewContext } from "../types";

function tile(label: string, value: string, sub?: string, testid?: string): HTMLElement {
  return h(
    "div",
    { class: "ptp-card ptp-tile", testid },
    h("div", { class: "ptp-tile-label" }, label),
    h("div", { class: "ptp-tile-value" }, value),
    sub ? h("div", { class: "ptp-tile-sub" }, sub) : null,
  );
}

function dl(rows: [string, string][], testid?: string): HTMLElement {
  return h(
    "dl",
    { class: "ptp-dl", testid },
    rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}

function deviceTable(devices: DeviceInfo[]): HTMLElement {
  if (devices.length === 0) {
    return h("p", { class: "ptp-muted" }, "No GPU was recorded in this trace (CPU-only profile, or the device list is missing).");
  }
  return h(
    "div",
    { class: "ptp-table-wrap" },
    h(
      "table",
      { class: "ptp-table", testid: "devices-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "ID"),
          h("th", {}, "Name"),
          h("th", { class: "ptp-num" }, "Memory"),
          h("th", { class: "ptp-num" }, "Compute capability"),
          h("th", { class: "ptp-num" }, "SMs"),
        ),
      ),
      h(
        "tbody",
        {},
        devices.map((d) =>
          h(
            "tr",
            { testid: "device-row" },
            h("td", {}, formatValue(d.id)),
            h("td", { class: "ptp-break", testid: "device-name" }, formatValue(d.name)),
            h("td", { class: "ptp-num" }, formatBytes(d.memory_bytes)),
            h("td", { class: "ptp-num" }, formatValue(d.compute_capability)),
            h("td", { class: "ptp-num" }, formatInt(d.num_sms)),
          ),
        ),
      ),
    ),
  );
}

function eventTable(counts: Record<string, number>): HTMLElement {
  const entries = Object.entries(counts)
    .filter(([, n]) => typeof n === "number" && Number.isFinite(n))
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  if (entries.length === 0) return h("p", { class: "ptp-muted" }, "No events were counted.");
  const total = entries.reduce((s, [, n]) => s + n, 0);
  const max = entries[0]?.[1] ?? 1;
  return h(
    "div",
    { class: "ptp-table-wrap" },
    h(
      "table",
      { class: "ptp-table", testid: "event-counts-table" },
      h(
        "thead",
        {},
        h("tr", {}, h("th", {}, "Category"), h("th", { class: "ptp-num" }, "Events"), h("th", { class: "ptp-num" }, "Share"), h("th", { class: "ptp-share" }, "")),
      ),
      h(
        "tbody",
        {},
        entries.map(([category, n]) => {
          const row = h(
            "tr",
            { testid: "event-count-row" },
            h("td", { class: "ptp-break" }, category),
            h("td", { class: "ptp-num" }, formatInt(n)),
            h("td", { class: "ptp-num" }, total > 0 ? `${((100 * n) / total).toFixed(1)}%` : DASH),
            h("td", { class: "ptp-share" }, progressBar(max > 0 ? n / max : 0, `${category} events`)),
          );
          row.dataset["category"] = category;
          row.dataset["count"] = String(n);
          return row;
        }),
      ),
      h("tfoot", {}, h("tr", {}, h("td", {}, "Total"), h("td", { class: "ptp-num", testid: "event-total" }, formatInt(total)), h("td", {}), h("td", {}))),
    ),
  );
}

function cudaVersion(v: unknown): string {
  // Kineto writes CUDA versions as integers like 12040 (= 12.4); pass strings through.
  if (typeof v === "number" && Number.isInteger(v) && v >= 1000) {
    return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)} (${v})`;
  }
  return formatValue(v);
}

function metadataRows(meta: Partial<TraceMetadata>): [string, string][] {
  const dist = meta.distributed;
  const rows: [string, string][] = [
    ["PyTorch", formatValue(meta.pytorch_version)],
    ["CUDA runtime", cudaVersion(meta.cuda_runtime_version)],
    ["CUDA driver", cudaVersion(meta.cuda_driver_version)],
    ["Framework", formatValue(meta.framework)],
    ["Trace schema", formatValue(meta.schema_version)],
    ["Record shapes", formatValue(meta.record_shapes)],
    ["Profile memory", formatValue(meta.profile_memory)],
    ["With stack", formatValue(meta.with_stack)],
    [
      "Distributed",
      dist
        ? `${formatValue(dist.backend)} · rank ${formatValue(dist.rank)} of ${formatValue(dist.world_size)}`
        : "no",
    ],
  ];
  return rows;
}

export function renderSummary(container: HTMLElement, ctx: Pick<ViewContext, "run" | "worker" | "span">, s: SummaryResponse): void {
  const devices = Array.isArray(s.devices) ? s.devices : [];
  const counts = s.event_counts && typeof s.event_counts === "object" ? s.event_counts : {};
  const totalEvents = Object.values(counts).reduce((a, n) => a + (Number.isFinite(n) ? n : 0), 0);
  const meta = s.metadata ?? {};
  const gpuNames = [...new Set(devices.map((d) => d.name).filter((n): n is string => !!n))];

  replaceChildren(
    container,
    h(
      "div",
      { testid: "trace-info" },
      h(
        "div",
        { class: "ptp-tiles" },
        tile("Duration", formatDurationUs(s.duration_us), "first to last event", "tile-duration"),
        tile("Events", formatInt(totalEvents), `${Object.keys(counts).length} categories`, "tile-events"),
        tile("GPUs", devices.length ? String(devices.length) : "none", gpuNames.join(", ") || undefined, "tile-gpus"),
        tile("File size", formatBytes(s.size_bytes), s.file ?? undefined, "tile-size"),
      ),
      h(
        "div",
        { class: "ptp-grid" },
        card(
          { title: "Trace file", testid: "card-file" },
          dl(
            [
              ["File", formatValue(s.file)],
              ["Size", s.size_bytes === null ? DASH : `${formatBytes(s.size_bytes)} (${formatInt(s.size_bytes)} bytes)`],
              ["Duration", formatDurationUs(s.duration_us)],
              ["Run", ctx.run],
              ["Worker", ctx.worker],
              ["Span", ctx.span],
            ],
            "file-facts",
          ),
        ),
        card({ title: "Devices", testid: "card-devices" }, deviceTable(devices)),
        card({ title: "Versions and settings", testid: "card-metadata" }, dl(metadataRows(meta), "metadata-facts")),
        card({ title: "Events per category", testid: "card-events" }, eventTable(counts)),
      ),
    ),
  );
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<void> {
  replaceChildren(container, h("p", { class: "ptp-muted" }, "Loading trace summary…"));
  try {
    const summary = await ctx.api.get(
      "summary",
      { run: ctx.run, worker: ctx.worker, span: ctx.span },
      { signal: ctx.signal },
    );
    if (ctx.signal.aborted) return;
    renderSummary(container, ctx, summary);
  } catch (err) {
    if (ctx.signal.aborted) return;
    if (err instanceof ApiError && err.status === 409) {
      replaceChildren(container, card({ class: "ptp-warn-card", title: "Still loading" }, h("p", {}, err.message)));
      return;
    }
    const message = err instanceof Error ? err.message : String(err);
    const title = err instanceof ApiError && err.status === 422 ? `Could not load ${ctx.spanInfo.file}` : "Could not load the trace summary";
    replaceChildren(container, errorCard(title, message));
  }
}
