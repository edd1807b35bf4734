/** views/common/serverPages.ts: every row of a server-paged table, page by page, for its CSV export. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { allPages } from "../src/views/common/serverPages";
import type { ServerQuery } from "../src/views/common/table";

const query: ServerQuery = { offset: 40, limit: 20, sort: { key: "size", dir: "desc" }, queries: { name: "mm" } };

/** A server of `total` numbered rows answering pages; the queries it was asked. */
function server(total: number, shortAt: number | null = null): { asked: ServerQuery[]; fetch: (q: ServerQuery) => Promise<{ rows: number[]; total: number }> } {
  const asked: ServerQuery[] = [];
  return {
    asked,
    fetch: (q) => {
      asked.push(q);
      const end = Math.min(total, shortAt ?? total, q.offset + q.limit);
      return Promise.resolve({ rows: Array.from({ length: Math.max(0, end - q.offset) }, (_, i) => q.offset + i), total });
    },
  };
}

describe("allPages", () => {
  it("asks from the first row in pages of the size given, keeping the sort and searches, until the total", async () => {
    const s = server(25);
    assert.deepEqual(await allPages(query, 10, s.fetch), Array.from({ length: 25 }, (_, i) => i));
    assert.deepEqual(s.asked.map((q) => [q.offset, q.limit]), [[0, 10], [10, 10], [20, 10]]);
    assert.ok(s.asked.every((q) => q.sort === query.sort && q.queries === query.queries));
  });

  it("stops at a full last page without asking past the total, and at a page that comes back short", async () => {
    const exact = server(20);
    assert.equal((await allPages(query, 10, exact.fetch)).length, 20);
    assert.equal(exact.asked.length, 2);
    const shrunk = server(30, 15); // rows went away meanwhile: the second page is short
    assert.equal((await allPages(query, 10, shrunk.fetch)).length, 15);
    assert.equal(shrunk.asked.length, 2);
    const empty = server(0);
    assert.deepEqual(await allPages(query, 10, empty.fetch), []);
    assert.equal(empty.asked.length, 1);
  });
});
