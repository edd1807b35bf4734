/** views/distributed/distributedData.ts and distributedColumns.ts: the rank table of a job paged on the server. */
import "./dom";
import { container } from "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DataTable, type ServerQuery } from "../src/views/common/table";
import { rankColumns } from "../src/views/distributed/distributedColumns";
import {
  type DistributedResponse, everyRank, EXPORT_LIMIT, isPaged, normalize, pageParams, RANK_SORTS, type RankStats, serverPage,
} from "../src/views/distributed/distributedData";

function rank(i: number): RankStats {
  return {
    worker: `rank${i}`, rank: i, computation_us: i, communication_us: 1, overlap_us: null, transfer_us: 1, sync_us: 0,
    step_us: 100 - i, collectives: [],
  };
}

/** An answer of `total` ranks holding `rows` from `offset`, sorted as the server says. */
function answer(total: number, offset: number, rows: RankStats[], sort = "rank", order = "asc"): DistributedResponse {
  const page = { offset, limit: Math.max(1, rows.length), total, sort, order, positions: rows.map((r) => r.rank) };
  return normalize({ ranks: rows, page } as unknown as DistributedResponse);
}

const query: ServerQuery = { offset: 100, limit: 50, sort: { key: "step_us", dir: "desc" }, queries: {} };

describe("pageParams", () => {
  it("asks for the table's page in its sort", () => {
    assert.deepEqual(pageParams(query), { offset: "100", limit: "50", sort: "step_us", order: "desc" });
  });
  it("the search box's text, trimmed, as q (none when empty)", () => {
    assert.equal(pageParams({ ...query, queries: { worker: "  node-17 " } })["q"], "node-17");
    assert.equal("q" in pageParams({ ...query, queries: { worker: "   " } }), false);
    assert.equal("q" in pageParams({ ...query, queries: {} }), false);
  });
  it("no sort, or one the server cannot take (Host): the server's default, rank order", () => {
    assert.deepEqual(pageParams({ ...query, sort: null }), { offset: "100", limit: "50" });
    assert.deepEqual(pageParams({ ...query, sort: { key: "host", dir: "asc" } }), { offset: "100", limit: "50" });
  });
});

describe("isPaged and serverPage", () => {
  it("a job answered whole is not paged; one page of a larger job is, with its rows and sort", () => {
    assert.equal(isPaged(answer(2, 0, [rank(0), rank(1)])), false);
    const second = answer(257, 100, [rank(100)], "step_us", "desc");
    assert.equal(isPaged(second), true);
    assert.deepEqual(serverPage(second.page, 257), { page: { offset: 100, total: 257, unfiltered: 257 }, sort: { key: "step_us", dir: "desc" } });
    // a search: the page's total counts its matches, the table says of how many ranks
    const found = answer(12, 0, [rank(7)], "rank", "asc");
    assert.deepEqual(serverPage(found.page, 257).page, { offset: 0, total: 12, unfiltered: 257 });
  });
});

describe("everyRank (the CSV export)", () => {
  it("asks for pages of EXPORT_LIMIT ranks in the table's sort until the total", async () => {
    const total = EXPORT_LIMIT + 3;
    const asked: ServerQuery[] = [];
    const rows = await everyRank(query, (q) => {
      asked.push(q);
      const n = Math.max(0, Math.min(q.limit, total - q.offset));
      return Promise.resolve(answer(total, q.offset, Array.from({ length: n }, (_, i) => rank(q.offset + i))));
    });
    assert.deepEqual(asked.map((q) => [q.offset, q.limit]), [[0, EXPORT_LIMIT], [EXPORT_LIMIT, EXPORT_LIMIT]]);
    assert.ok(asked.every((q) => q.sort?.key === "step_us" && q.sort.dir === "desc"));
    assert.deepEqual(rows.map((r) => r.rank), Array.from({ length: total }, (_, i) => i));
  });
  it("stops at a short page", async () => {
    let calls = 0;
    const rows = await everyRank(query, () => {
      calls += 1;
      return Promise.resolve(answer(5000, 0, [rank(calls)]));
    });
    assert.equal(calls, 1);
    assert.equal(rows.length, 1);
  });
});

describe("the rank table paged on the server", () => {
  const labels = new Map<RankStats, string>();
  const text = (t: DataTable<RankStats>, id: string): string => t.el.querySelector(`[data-testid=${id}]`)?.textContent ?? "";

  it("only the columns the server sorts by sort; every column sorts on a job answered whole", () => {
    const sortable = (cols: ReturnType<typeof rankColumns>): string[] => cols.filter((c) => c.sortable !== false).map((c) => c.key);
    assert.deepEqual(sortable(rankColumns(labels, () => null, RANK_SORTS)), [...RANK_SORTS]);
    assert.ok(["host", "process", "gpu"].every((k) => sortable(rankColumns(labels, () => null)).includes(k)));
  });

  it("shows the server's page, and a header or the pager asks the server", () => {
    const asked: ServerQuery[] = [];
    const t = new DataTable<RankStats>({
      testid: "rank-table", csvName: () => "x.csv", pageSizes: [50, 100, 200], pageSize: 100,
      server: { fetch: (q) => { asked.push(q); }, exportRows: () => Promise.resolve([]) },
    });
    container().appendChild(t.el);
    const first = answer(257, 0, Array.from({ length: 100 }, (_, i) => rank(i)));
    t.setData({ columns: rankColumns(labels, () => null, RANK_SORTS), rows: first.ranks, rowKey: (r) => r.worker, ...serverPage(first.page, 257) });
    assert.equal(text(t, "table-range"), "1–100 of 257");
    assert.equal(text(t, "table-count"), "257 rows");
    assert.match(t.el.querySelector("th[data-col=rank]")?.getAttribute("aria-sort") ?? "", /ascending/);
    assert.equal(t.el.querySelector("[data-testid=sort-host]"), null);
    (t.el.querySelector("[data-testid=table-next]") as HTMLElement).click();
    assert.deepEqual(asked.at(-1), { offset: 100, limit: 100, sort: { key: "rank", dir: "asc" }, queries: {} });
    (t.el.querySelector("[data-testid=sort-rank]") as HTMLElement).click(); // the sorted column: the other way
    assert.deepEqual(pageParams(asked.at(-1) ?? query), { offset: "0", limit: "100", sort: "rank", order: "desc" });
  });
});
