/**
 * The Distributed page's cards that describe the whole job, whatever page of ranks is shown: the straggler
 * call-out, the notes, the job summary (from the server's totals over every rank), the process groups, and
 * the page control of a job too large to send whole ("rows 101–200 of 1,024 · page 2 of 11", sorted on
 * the server).
 */
import { card, infoIcon } from "../../components";
import { type Child, h } from "../../dom";
import { formatDuration, formatInt } from "../../format";
import { csvFileName } from "../common/csv";
import { DataTable } from "../common/table";
import { groupColumns } from "./distributedColumns";
import { type DistributedResponse, type GroupStragglers, HELP, type PageQuery, pageNumber, SORTS, us } from "./distributedData";
import type { ViewContext } from "../types";

/** Rows per page a paged job offers (the server sends at most 1,024). */
export const PAGE_SIZES = [50, 100, 200] as const;

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

function choice(testid: string, label: string, options: readonly (readonly [string, string])[], value: string, onChange: (v: string) => void): HTMLElement {
  const select = h(
    "select",
    { testid, attrs: { "aria-label": label }, onChange: () => { onChange(select.value); } },
    options.map(([v, text]) => h("option", { attrs: { value: v, selected: v === value } }, text)),
  );
  return h("label", { class: "ptp-picker" }, label, select);
}

/** The page control of a paged job: which rows are shown, previous / next, rows per page and the server's sort. */
export function pager(data: DistributedResponse, go: (q: PageQuery) => void): HTMLElement {
  const p = data.page;
  const [page, pages] = pageNumber(p);
  const order = p.order === "desc" ? "desc" : "asc";
  const at = (offset: number): PageQuery => ({ offset, limit: p.limit, sort: p.sort, order });
  const from = p.total ? p.offset + 1 : 0;
  const to = Math.min(p.total, p.offset + data.ranks.length);
  return h(
    "div",
    { class: "ptp-controls ptp-dist-pager", testid: "dist-pager", dataset: { page: String(page), pages: String(pages) } },
    h("button", { class: "ptp-btn", testid: "dist-page-prev", attrs: { type: "button", disabled: page <= 1 }, onClick: () => { go(at(Math.max(0, p.offset - p.limit))); } }, "‹ Previous"),
    h("span", { testid: "dist-page-text" }, `Ranks ${formatInt(from)}–${formatInt(to)} of ${formatInt(p.total)} · page ${formatInt(page)} of ${formatInt(pages)}`),
    h("button", { class: "ptp-btn", testid: "dist-page-next", attrs: { type: "button", disabled: page >= pages }, onClick: () => { go(at(p.offset + p.limit)); } }, "Next ›"),
    choice("dist-sort", "Sort by", SORTS, p.sort, (sort) => { go({ offset: 0, limit: p.limit, sort, order }); }),
    choice("dist-order", "Order", [["asc", "ascending"], ["desc", "descending"]], order, (o) => { go({ offset: 0, limit: p.limit, sort: p.sort, order: o === "desc" ? "desc" : "asc" }); }),
    choice("dist-page-size", "Rows per page", PAGE_SIZES.map((n) => [String(n), String(n)] as const), String(p.limit), (n) => { go({ offset: 0, limit: Number(n), sort: p.sort, order }); }),
  );
}
