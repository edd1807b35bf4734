/**
 * The Distributed page's cards that describe the whole job, whatever page of ranks is shown: the straggler
 * call-out, the notes, the job summary (from the server's totals over every rank) and the process groups.
 */
import { card, infoIcon } from "../../components";
import { type Child, h } from "../../dom";
import { formatDuration, formatInt } from "../../format";
import { csvFileName } from "../common/csv";
import { DataTable } from "../common/table";
import { groupColumns } from "./distributedColumns";
import { type DistributedResponse, type GroupStragglers, HELP, us } from "./distributedData";
import type { ViewContext } from "../types";

function fact(label: string, value: Child, title?: string, testid?: string): HTMLElement {
  return h("div", { class: "ptp-metric", title, testid }, h("div", { class: "ptp-metric-label" }, label), h("div", { class: "ptp-metric-value" }, value));
}

export function stragglerCallout(data: DistributedResponse): HTMLElement | null {
  const s = data.straggler;
  if (!s) return null;
  return h(
    "div",
    { class: "ptp-callout ptp-callout-warn", testid: "straggler", role: "note", dataset: { rank: String(s.rank), worker: s.worker } },
    h("div", { class: "ptp-callout-title" }, `Straggler: rank ${String(s.rank)} (${s.worker})`),
    h("div", { testid: "straggler-text" }, s.text),
  );
}

export function noteLines(data: DistributedResponse): HTMLElement[] {
  return data.notes.map((note) => h("div", { class: "ptp-note", testid: "dist-note", role: "note" }, infoIcon("A note from the analysis."), h("span", {}, note)));
}

/** World size, ranks, backend, steps and the mean step over every rank (the server's totals when it sends them). */
export function summaryCard(ctx: ViewContext, data: DistributedResponse): HTMLElement {
  const steps = data.ranks.map((r) => r.steps).find((s) => typeof s === "number");
  const meanStep = data.totals?.mean["step_us"] ?? (data.ranks.length ? data.ranks.reduce((s, r) => s + us(r.step_us), 0) / data.ranks.length : null);
  const stepsText = typeof steps === "number" ? `${formatInt(steps)} step${steps === 1 ? "" : "s"}` : "—";
  return card(
    { title: "Distributed training", testid: "card-dist-summary" },
    h("p", { class: "ptp-muted ptp-card-sub" }, `All ranks of run ${ctx.run}, span ${ctx.span}; the worker picker does not apply to this page. Times are means per step.`),
    h(
      "div",
      { class: "ptp-metrics" },
      fact("World size", formatInt(data.world_size), "From the traces' distributedInfo, else the number of workers.", "dist-world-size"),
      fact("Ranks loaded", formatInt(data.page.total), "Traces of this span that were loaded and analysed.", "dist-ranks"),
      fact("Backend", data.backend ?? "—", "The process group backend written in the traces.", "dist-backend"),
      fact("Steps", stepsText, "Profiler steps per rank in this span.", "dist-steps"),
      fact("Mean step time", formatDuration(meanStep ?? null), `${HELP.step}\nMean over all ranks.`, "dist-step-time"),
    ),
  );
}

export function groupsCard(ctx: ViewContext, data: DistributedResponse): HTMLElement {
  const table = new DataTable<GroupStragglers>({
    testid: "group-table",
    csvName: () => csvFileName(ctx.run, `span${ctx.span}`, "process_groups"),
    controls: null,
    emptyText: "No process group spans two or more ranks.",
  });
  table.setData({ columns: groupColumns(), rows: data.groups, rowKey: (g) => g.group, sort: { key: "others_wait", dir: "desc" } });
  return card(
    { title: "Stragglers by process group", testid: "card-groups" },
    h("p", { class: "ptp-muted ptp-card-sub" }, "Across all ranks of each process group: the rank its members wait for in the group's collectives, and its slowest rank."),
    table.el,
  );
}
