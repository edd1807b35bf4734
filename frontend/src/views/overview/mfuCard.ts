/**
 * The Overview's model FLOPs utilisation card (`mfu` of GET ./overview, docs/guide/roofline.md): the ratio, the
 * achieved FLOP/s against the peak used (the class carrying most FLOPs, from the device's datasheet), the model
 * FLOPs per step and how they were had, per step, and on a multi-rank run per rank and for the job; a link opens
 * the roofline.
 */
import { card, infoIcon } from "../../components";
import { h } from "../../dom";
import { DASH, formatFixed, formatFlops, formatPercent1, isNum } from "../../format";
import { writeViewUrlState } from "../../urlState";
import type { Mfu } from "../common/apiTypes";
import { rowLinkButton } from "../common/traceLink";
import type { ViewContext } from "../types";

export const MFU_HELP = {
  ratio: "Model FLOPs utilisation: the FLOPs the step's operators did (counted once) over the step time, divided by the device's dense peak for the class that carries most of them.",
  flops: "Per step: matmuls, convolutions and attention from their recorded shapes (2·M·N·K, …), element-wise work per element; the trace's own flops args where it has them. Backward counts 2 × forward; recomputation as the trace ran it.",
  peak: "Dense peak FLOP/s from the vendor datasheet (sparsity figures halved); override with --profiler_peaks.",
  job: "The ranks' FLOPs per step summed, over the slowest rank's mean step (a synchronous step lasts as long as its slowest rank), against the ranks' peaks summed.",
};

const CLASS_LABEL: Record<string, string> = { fp64: "FP64", fp64_tensor: "FP64 tensor", fp32: "FP32", tf32: "TF32", bf16: "BF16", fp16: "FP16", fp8: "FP8" };

function tile(testid: string, label: string, value: string, help: string, raw: number | null): HTMLElement {
  const el = h("div", { class: "ptp-metric", testid, title: help }, h("div", { class: "ptp-metric-label" }, label, " ", infoIcon(help)), h("div", { class: "ptp-metric-value" }, value));
  if (raw !== null) el.dataset["value"] = String(raw);
  return el;
}

function ratioText(r: number | null | undefined): string {
  return isNum(r) ? formatPercent1(r) : "n/a";
}

function dtypeLine(m: Mfu): string {
  const parts = m.dtypes.filter((d) => d.flops_share >= 0.001).map((d) => `${CLASS_LABEL[d.dtype] ?? d.dtype} ${formatPercent1(d.flops_share)}`);
  return parts.length > 1 ? `Mixed precision: ${parts.join(", ")} of the FLOPs.` : "";
}

function jobTable(m: Mfu): HTMLElement | null {
  const job = m.job;
  if (!job) return null;
  return h(
    "div",
    { testid: "mfu-job" },
    h("p", { class: "ptp-muted", title: MFU_HELP.job }, `Job: ${ratioText(job.ratio)} MFU — ${formatFlops(job.achieved_flops_per_s)} of ${formatFlops(job.peak_flops_per_s)} over ${job.ranks.length} ranks, at the slowest rank's step (${formatFixed(job.step_us / 1000, 2)} ms) `, infoIcon(MFU_HELP.job)),
    h(
      "table",
      { class: "ptp-table", testid: "mfu-ranks" },
      h("thead", {}, h("tr", {}, ["Rank", "Worker", "FLOPs per step", "Step", "Achieved", "MFU"].map((t, i) => h("th", { class: i > 1 ? "ptp-num" : undefined }, t)))),
      h("tbody", {}, job.ranks.map((r) => h("tr", { dataset: { worker: r.worker } }, h("td", {}, r.rank === null ? DASH : String(r.rank)), h("td", {}, r.worker), h("td", { class: "ptp-num" }, formatFlops(r.model_flops_per_step, "FLOP")), h("td", { class: "ptp-num" }, `${formatFixed(r.step_us / 1000, 2)} ms`), h("td", { class: "ptp-num" }, formatFlops(r.achieved_flops_per_s)), h("td", { class: "ptp-num", testid: "mfu-rank-ratio" }, ratioText(r.ratio))))),
    ),
  );
}

function stepsTable(m: Mfu): HTMLElement | null {
  if (m.steps.length < 2) return null;
  return h(
    "table",
    { class: "ptp-table", testid: "mfu-steps" },
    h("thead", {}, h("tr", {}, ["Step", "Model FLOPs", "Step time", "Achieved", "MFU"].map((t, i) => h("th", { class: i > 0 ? "ptp-num" : undefined }, t)))),
    h("tbody", {}, m.steps.map((s) => h("tr", {}, h("td", {}, s.name), h("td", { class: "ptp-num" }, formatFlops(s.model_flops, "FLOP")), h("td", { class: "ptp-num" }, `${formatFixed(s.duration_us / 1000, 2)} ms`), h("td", { class: "ptp-num" }, formatFlops(s.achieved_flops_per_s)), h("td", { class: "ptp-num" }, ratioText(s.ratio))))),
  );
}

export function mfuCard(ctx: ViewContext, m: Mfu): HTMLElement {
  const peak = isNum(m.peak_flops_per_s) ? `${formatFlops(m.peak_flops_per_s)} ${CLASS_LABEL[m.dtype ?? ""] ?? ""}` : "n/a";
  const device = m.device.table_entry ? `Peaks of the ${m.device.table_entry}: ${m.device.source ?? ""}.` : (m.device.note ?? "");
  const open = rowLinkButton({ label: "roofline ↗", title: "The kernels against the roofs of the device, in GPU insights", testid: "mfu-roofline", onClick: () => { writeViewUrlState({ card: "roofline" }); ctx.navigate("GPU"); } });
  return card(
    { title: "Model FLOPs utilisation", testid: "card-mfu" },
    h("div", { class: "ptp-metrics" },
      tile("mfu-ratio", "MFU", ratioText(m.ratio), MFU_HELP.ratio, isNum(m.ratio) ? m.ratio : null),
      tile("mfu-achieved", "Achieved", formatFlops(m.achieved_flops_per_s), "Model FLOPs of all steps / their time.", isNum(m.achieved_flops_per_s) ? m.achieved_flops_per_s : null),
      tile("mfu-peak", "Peak used", peak, MFU_HELP.peak, isNum(m.peak_flops_per_s) ? m.peak_flops_per_s : null),
      tile("mfu-flops", "Model FLOPs per step", formatFlops(m.model_flops_per_step, "FLOP"), MFU_HELP.flops, m.model_flops_per_step)),
    h("p", { class: "ptp-muted ptp-card-foot", testid: "mfu-device" }, [device, m.note ?? "", m.estimated ? "FLOPs estimated from the recorded shapes." : "", dtypeLine(m)].filter((t) => t).join(" "), " ", open),
    stepsTable(m),
    jobTable(m),
  );
}
