/**
 * The Distributed page (GET ./distributed?run=&span=): every rank of the selected run for the selected
 * span, side by side. A straggler call-out, notes, a rank table (means per step), stacked bars of
 * computation / overlap / communication / other and of transfer / sync per rank, a heat-map of
 * communication time by rank and step (every rank; binned beyond 1,024), and the collectives of one rank.
 *
 * A job of up to 256 ranks arrives whole; a larger one in pages of rows sorted on the server: the rank table pages
 * on the server (DataTable's server mode: its header sort, page size and pager ask ./distributed for a page), the
 * bar charts and the collectives follow the page, while the straggler, the process groups, the summary and the
 * heat-map always cover every rank. The data and its helpers live in
 * distributedData.ts, the loading in distributedLoad.ts, the cards in distributedCards.ts, the columns and
 * charts beside them; this module holds the page's state.
 *
 * The page is per run and span, not per worker: the worker picker does not apply. While some ranks
 * are still loading the server answers 409: the page shows their progress and asks again.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import { Charts, chartDiv } from "../common/charts";
import { csvFileName } from "../common/csv";
import { DataTable, type ServerQuery } from "../common/table";
import { rowLinkButton, traceWindowState } from "../common/traceLink";
import { left } from "../common/ui";
import { groupsCard, noteLines, stragglerCallout, summaryCard } from "./distributedCards";
import { HEATMAP_MARGIN, heatmapFigure, heatmapRowPx, heatRows, onHeatmapClick, overlapFigure, waitFigure } from "./distributedCharts";
import { collectiveColumns, overlapNotes, rankColumns } from "./distributedColumns";
import {
  type CollectiveStats, type DistributedResponse, everyRank, HELP, isPaged, normalize, PAGE_SIZES, pageParams, RANK_SEARCH, RANK_SORTS, rankLabels,
  type RankStats, rankStepWindow, serverPage,
} from "./distributedData";
import { load } from "./distributedLoad";
import type { ViewContext } from "../types";

export { HELP, overlapNotes, rankLabels, rankStepWindow };
export type { DistributedResponse, RankStats };

/** Open rank `r`'s own Trace view on a step (null: all steps). */
function openRankTrace(ctx: ViewContext, r: RankStats, step: number | null): void {
  const w = rankStepWindow(r, step);
  if (!w) return;
  writeViewUrlState(traceWindowState(w[0], w[1]));
  ctx.navigate("Trace", r.worker === ctx.worker ? undefined : { worker: r.worker });
}

/** One page of rows (no 409 loop: every rank was loaded for the first answer). */
async function fetchPage(ctx: ViewContext, q: ServerQuery): Promise<DistributedResponse> {
  const raw = await ctx.api.get("distributed", { run: ctx.run, span: ctx.span, ...pageParams(q) }, { signal: ctx.signal, timeoutMs: 300_000 });
  return normalize(raw);
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The rows per page a paged job offers: the usual sizes and the first answer's. */
function pageSizes(first: number): number[] {
  return [...new Set([...PAGE_SIZES, first])].sort((a, b) => a - b);
}

/** The part of the page that follows the rows shown: the rank table (paged on the server for a large job), the
 * bar charts and the collectives of one of the rows. */
class RankRows {
  readonly rankTable: DataTable<RankStats>;
  readonly collTable: DataTable<CollectiveStats>;
  readonly rankSelect = h("select", { testid: "collectives-rank", attrs: { "aria-label": "Rank" }, onChange: () => { this.showCollectives(); } });
  readonly stepSelect: HTMLSelectElement;
  readonly status = h("p", { class: "ptp-muted", testid: "dist-page-status" });
  readonly overlapChart = chartDiv("overlap-chart", 320);
  readonly waitChart = chartDiv("wait-chart", 320);
  readonly overlapNa = h("div", {});
  charts: Charts | null = null;
  data: DistributedResponse;
  labels: string[] = [];
  /** the job arrives in pages: the rank table pages, sorts and exports on the server */
  readonly paged: boolean;
  /** the newest request of a page wins */
  private seq = 0;

  constructor(private readonly ctx: ViewContext, first: DistributedResponse) {
    this.data = first;
    this.paged = isPaged(first);
    const csvName = (): string => csvFileName(ctx.run, `span${ctx.span}`, "ranks");
    this.rankTable = new DataTable<RankStats>(this.paged
      ? {
          testid: "rank-table", csvName, pageSizes: pageSizes(first.page.limit), pageSize: first.page.limit,
          server: { fetch: (q) => { void this.go(q); }, exportRows: (q) => everyRank(q, (p) => fetchPage(ctx, p)) },
        }
      : { testid: "rank-table", csvName, pageSizes: [16, 32, 64, 128], pageSize: 16 });
    this.collTable = new DataTable<CollectiveStats>({
      testid: "collectives-table",
      csvName: () => csvFileName(ctx.run, `span${ctx.span}`, `rank${this.rankSelect.value}`, "collectives"),
      controls: null,
      emptyText: "This rank ran no collective.",
    });
    this.stepSelect = h(
      "select",
      { testid: "step-select", attrs: { "aria-label": "Step shown in the per-rank charts" }, onChange: () => { void this.drawBars(); } },
      h("option", { attrs: { value: "" } }, "Mean of all steps"),
      first.steps.map((name, i) => h("option", { attrs: { value: String(i) } }, `Step ${name}`)),
    );
    this.show(first, readViewUrlState().rank);
    writeViewUrlState({ rank: undefined });
  }

  step(): number | null {
    return this.stepSelect.value === "" ? null : Number(this.stepSelect.value);
  }

  /** Show the rows of `data`; `rank`: the rank whose collectives to show (a link from the Overview). */
  show(data: DistributedResponse, rank?: string): void {
    this.data = data;
    this.labels = rankLabels(data.ranks);
    const labelOf = new Map(data.ranks.map((r, i) => [r, this.labels[i] ?? String(r.rank)]));
    const trace = (r: RankStats): HTMLElement | null => this.traceLink(r);
    const rowKey = (r: RankStats): string => `${r.worker}#${r.rank}`;
    const searches = [{ key: RANK_SEARCH, label: "Search workers", placeholder: "Filter by worker or host", text: (r: RankStats) => `${r.worker} ${r.host ?? ""} ${String(r.rank)}` }];
    if (this.paged) {
      this.rankTable.setData({ columns: rankColumns(labelOf, trace, RANK_SORTS), rows: data.ranks, rowKey, searches, ...serverPage(data.page, data.totals?.ranks ?? data.page.total) });
    } else {
      this.rankTable.setData({ columns: rankColumns(labelOf, trace), rows: data.ranks, rowKey, searches, sort: { key: "rank", dir: "asc" } }, false);
    }
    replaceChildren(this.rankSelect, data.ranks.map((r, i) => h("option", { attrs: { value: i } }, `rank ${this.labels[i] ?? String(r.rank)} (${r.worker})`)));
    const linked = rank === undefined ? -1 : data.ranks.findIndex((r) => String(r.rank) === rank);
    if (linked >= 0) this.rankSelect.value = String(linked);
    this.showCollectives();
    replaceChildren(this.overlapNa, overlapNotes(data.ranks, this.labels).map((note) => h("p", { class: "ptp-muted", testid: "overlap-na" }, note)));
    if (this.charts) void this.drawBars();
  }

  private traceLink(r: RankStats): HTMLElement | null {
    if (!rankStepWindow(r, null)) return null;
    return rowLinkButton({
      label: "trace ↗",
      title: `Open ${r.worker}'s Trace view on the step chosen under "Step" (all steps when none is)`,
      testid: "rank-trace",
      onClick: () => { openRankTrace(this.ctx, r, this.step()); },
    });
  }

  showCollectives(): void {
    const r = this.data.ranks[Number(this.rankSelect.value)] ?? this.data.ranks[0];
    this.collTable.setData({ columns: collectiveColumns(), rows: r?.collectives ?? [], rowKey: (c) => c.name, sort: { key: "total_us", dir: "desc" } });
  }

  /** The rank table's server: show the page `q` asks for, unless a newer request came meanwhile (on a failure the
   * table keeps its rows and the status says why). */
  async go(q: ServerQuery): Promise<void> {
    const my = ++this.seq;
    this.status.textContent = "Loading these ranks…";
    try {
      const next = await fetchPage(this.ctx, q);
      if (my !== this.seq || left(this.ctx)) return;
      this.status.textContent = "";
      this.show(next);
    } catch (err) {
      if (my !== this.seq || left(this.ctx)) return;
      this.rankTable.el.dataset["loading"] = "false";
      this.status.textContent = `These ranks could not be loaded: ${message(err)}`;
    }
  }

  /** Open the Trace view of the rank at `position` in rank order (fetched when it is not on this page). */
  async openAt(position: number, step: number): Promise<void> {
    const i = this.data.page.positions.indexOf(position);
    const here = i >= 0 ? this.data.ranks[i] : undefined;
    if (here) {
      openRankTrace(this.ctx, here, step);
      return;
    }
    try {
      const one = await fetchPage(this.ctx, { offset: position, limit: 1, sort: { key: "rank", dir: "asc" }, queries: {} });
      if (!left(this.ctx) && one.ranks[0]) openRankTrace(this.ctx, one.ranks[0], step);
    } catch (err) {
      if (!left(this.ctx)) this.status.textContent = `That rank could not be loaded: ${message(err)}`;
    }
  }

  async drawBars(): Promise<void> {
    const charts = this.charts;
    if (!charts) return;
    const data = this.data;
    const labels = this.labels;
    const step = this.step();
    await charts.draw(this.overlapChart, () => overlapFigure(data, labels, step));
    await charts.draw(this.waitChart, () => waitFigure(data, labels, step));
  }
}

function barCards(rows: RankRows, paged: boolean): HTMLElement {
  const which = paged ? "Each bar is one rank of the page shown in the rank table" : "Each bar is one rank";
  return h(
    "div",
    { class: "ptp-grid" },
    card(
      { title: "Computation and communication per rank", testid: "card-overlap" },
      h("p", { class: "ptp-muted ptp-card-sub" }, `${which}'s average step: computation (not overlapping communication, as in the table), computation overlapping communication, communication only, and other. `, infoIcon(HELP.overlap)),
      rows.overlapNa,
      rows.overlapChart,
    ),
    card(
      { title: "Communication: transfer versus waiting", testid: "card-wait" },
      h("p", { class: "ptp-muted ptp-card-sub" }, "Transfer is the fastest rank's time for each collective; the rest is waiting for other ranks. ", infoIcon(`${HELP.transfer}\n${HELP.sync}`)),
      rows.waitChart,
    ),
  );
}

function heatmapCard(heatChart: HTMLElement, binned: boolean): HTMLElement {
  return card(
    { title: "Communication time by rank and step", testid: "card-heatmap" },
    h("p", { class: "ptp-muted ptp-card-sub" }, HELP.heatmap, binned ? " Every rank of the job: consecutive ranks share a row (mean; hover for the max)." : ""),
    h("div", { class: "ptp-heatmap-scroll", testid: "heatmap-scroll" }, heatChart),
  );
}

function layout(ctx: ViewContext, data: DistributedResponse, rows: RankRows, heatChart: HTMLElement): HTMLElement {
  const paged = isPaged(data);
  return h(
    "div",
    { class: "ptp-view ptp-distributed", testid: "distributed" },
    stragglerCallout(data),
    noteLines(data),
    summaryCard(ctx, data),
    card(
      { title: "Ranks", testid: "card-ranks" },
      h("p", { class: "ptp-muted ptp-card-sub" }, paged ? "Means per step. This job has too many ranks to send at once: pages of ranks, sorted on the server (click a header to sort every rank)." : "Means per step. Hover a header for how each number is computed."),
      rows.status,
      rows.rankTable.el,
    ),
    groupsCard(ctx, data),
    h("div", { class: "ptp-controls" }, h("label", { class: "ptp-picker" }, "Step", rows.stepSelect)),
    barCards(rows, paged),
    heatmapCard(heatChart, data.heatmap?.binned ?? false),
    card(
      { title: "Collectives", testid: "card-collectives" },
      h("div", { class: "ptp-controls ptp-card-sub" }, h("label", { class: "ptp-picker" }, "Rank", rows.rankSelect), h("span", { class: "ptp-muted" }, paged ? "Totals over the steps; ranks of the page shown." : "Totals over the steps.")),
      rows.collTable.el,
    ),
  );
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  replaceChildren(container, h("p", { class: "ptp-muted", testid: "dist-loading-first" }, "Analysing all ranks of this span…"));
  const data = await load(container, ctx);
  if (!data || left(ctx)) return undefined;
  if (data.ranks.length === 0) {
    replaceChildren(container, card({ testid: "dist-empty", title: "No ranks" }, h("p", {}, "No worker of this span has distributed data.")));
    return undefined;
  }
  const rows = new RankRows(ctx, data);
  const heat = heatRows(data, rows.labels);
  const n = heat.values.length;
  const heatChart = chartDiv("comm-heatmap", Math.max(160, n * heatmapRowPx(n) + HEATMAP_MARGIN.t + HEATMAP_MARGIN.b));
  heatChart.dataset["rows"] = String(n);
  replaceChildren(container, layout(ctx, data, rows, heatChart));

  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return undefined;
    rows.charts = new Charts(Plotly, ctx);
    await rows.drawBars();
    if (data.steps.length && n) {
      await rows.charts.draw(heatChart, (theme) => heatmapFigure(data, heat, theme));
      onHeatmapClick(heatChart, (row, step) => {
        const position = heat.first[row];
        if (position !== undefined) void rows.openAt(position, step);
      });
    } else {
      heatChart.replaceWith(h("p", { class: "ptp-muted", testid: "heatmap-empty" }, "No profiler steps: nothing to show per step."));
    }
  } catch (err) {
    if (left(ctx)) return undefined;
    rows.overlapChart.replaceWith(h("p", { class: "ptp-muted", testid: "chart-error" }, `The charts could not be drawn: ${message(err)}`));
  }
  const c = rows.charts;
  return () => c?.dispose();
}
