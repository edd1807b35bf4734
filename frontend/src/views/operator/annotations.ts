/**
 * "Time by annotation" on the Operator page (GET ./annotations): host and device time per record_function
 * path, nested (HTA's "GPU time by annotation", with the host side beside it). Each name finds its ranges
 * in the Trace view.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatInt } from "../../format";
import type { AnnotationRow } from "./operatorData";
import { durationColumn } from "../common/columns";
import { csvFileName } from "../common/csv";
import { DataTable } from "../common/table";
import { traceLinker } from "../common/traceLink";
import { spanGet, left, loadErrorCard } from "../common/ui";
import type { ViewContext } from "../types";

export const ANNOTATION_HELP = {
  card: "Ranges of record_function (user annotations), nested by where they ran; ProfilerStep#N is left out of the paths. Whole trace.",
  host: "Wall time of the ranges on their threads.",
  device: "GPU time (sum of durations) of the kernels, copies and memsets launched from inside the ranges, on their thread: work launched by autograd's backward thread is not inside a forward-thread range.",
  gpuRange: "Wall time of the GPU-side copies of the ranges (gpu_user_annotation: first to last GPU event each range launched, any thread): HTA's \"GPU time by annotation\". Empty where the trace has none or the name occurs under several paths.",
};

/** The card; fills itself once the route answers (an error replaces it with an error card). */
export function annotationsCard(ctx: ViewContext): HTMLElement {
  const body = h("div", {}, h("p", { class: "ptp-muted" }, "Loading annotations…"));
  const el = card({ testid: "card-annotations" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Time by annotation", infoIcon(ANNOTATION_HELP.card))), body);
  const link = traceLinker(ctx);
  spanGet(ctx, "annotations").then((resp) => {
    if (left(ctx)) return;
    const order = new Map(resp.rows.map((r, i) => [r.path.join("\u0000"), i]));
    const table = new DataTable<AnnotationRow>({ testid: "annotation-table", csvName: () => csvFileName("annotations", ctx.run, ctx.worker, `span${ctx.span}`), emptyText: "This trace has no user annotations (torch.profiler.record_function)." });
    table.setData({
      columns: [
        {
          key: "name",
          label: "Annotation",
          value: (r) => r.path.join(" › "),
          render: (r) => h("span", { class: "ptp-annotation", attrs: { style: `padding-left: ${r.depth * 16}px` } }, r.name, link(r.name)),
          title: (r) => r.path.join(" › "),
          cls: "ptp-name-col",
        },
        { key: "order", label: "Tree order", help: "Parents before children, siblings by host time.", numeric: true, value: (r) => order.get(r.path.join("\u0000")) ?? 0, text: () => "", csvHeader: "Tree order" },
        { key: "count", label: "Count", numeric: true, value: (r) => r.count, text: (r) => formatInt(r.count) },
        durationColumn<AnnotationRow>("host", "Host time", ANNOTATION_HELP.host, (r) => r.host_us),
        durationColumn<AnnotationRow>("device", "Device time", ANNOTATION_HELP.device, (r) => r.device_us),
        durationColumn<AnnotationRow>("gpu_range", "GPU range", ANNOTATION_HELP.gpuRange, (r) => r.gpu_range_us),
      ],
      rows: resp.rows,
      sort: { key: "order", dir: "asc" },
      rowKey: (r) => r.path.join("\u0000"),
    });
    replaceChildren(body, table.el);
  }, (err: unknown) => {
    if (!left(ctx)) replaceChildren(body, loadErrorCard(err, "the annotations"));
  });
  return el;
}
