/** views/memory/memoryEvents.ts and DataTable's server-paged mode: the Memory events table asks the server for pages. */
import "./dom";
import { container } from "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DataTable, type ServerQuery } from "../src/views/common/table";
import { EXPORT_PAGE, eventsParams, everyRow, type EventsPage, normalizeEventsPage } from "../src/views/memory/memoryEvents";
import { liveSummary } from "../src/views/memory/memoryLive";
import type { MemoryEvent } from "../src/views/memory/memoryData";

function event(i: number): MemoryEvent {
  return { name: `op${i}`, device: "GPU0", size_bytes: 1000 + i, alloc_us: i, free_us: i + 1, lifetime_us: 1, addr: i };
}

/** An event of the test DOM (linkedom's own: it sets fields node's Event keeps read-only). */
function domEvent(type: string): Event {
  const view = (document as unknown as { defaultView: { Event: new (type: string) => Event } }).defaultView;
  return new view.Event(type);
}

const where = { device: "GPU0", range: null, liveAt: null, minBytes: 0 };
const query: ServerQuery = { offset: 40, limit: 20, sort: { key: "size", dir: "desc" }, queries: { name: "  mm " } };

describe("eventsParams", () => {
  it("asks for a page of the device with the table's sort, search and size filter", () => {
    assert.deepEqual(eventsParams({ ...where, minBytes: 1536 }, query), {
      device: "GPU0", limit: 20, offset: 40, sort: "size", order: "desc", q: "mm", min_bytes: 1536,
    });
  });
  it("a range, or an instant instead of it; no sort or empty search: the server's default", () => {
    const plain = { ...query, sort: null, queries: { name: " " } };
    assert.deepEqual(eventsParams({ ...where, range: [10, 20] }, plain), { device: "GPU0", limit: 20, offset: 40, start_us: 10, end_us: 20 });
    assert.deepEqual(eventsParams({ ...where, range: [10, 20], liveAt: 15 }, plain), { device: "GPU0", limit: 20, offset: 40, at_us: 15 });
    assert.equal(eventsParams(where, { ...query, sort: { key: "nope", dir: "asc" } }).sort, undefined);
  });
});

describe("normalizeEventsPage", () => {
  it("reads the page and its counts", () => {
    const page = normalizeEventsPage({
      rows: [event(1)], total: 7, offset: 5, unfiltered: 9, unfiltered_bytes: 123, devices: ["CPU", "GPU0", 3],
      allocated_bytes: 999, sort: "lifetime", order: "desc",
    });
    assert.deepEqual(page, {
      rows: [event(1)], total: 7, offset: 5, unfiltered: 9, unfilteredBytes: 123, devices: ["CPU", "GPU0"],
      allocatedBytes: 999, sort: { key: "lifetime", dir: "desc" },
    });
  });
  it("a malformed answer is an empty page, counts from its rows", () => {
    assert.deepEqual(normalizeEventsPage("x"), {
      rows: [], total: 0, offset: 0, unfiltered: 0, unfilteredBytes: 0, devices: [], allocatedBytes: null, sort: null,
    });
    const unpaged = normalizeEventsPage({ rows: [event(1), event(2)] });
    assert.equal(unpaged.total, 2);
    assert.equal(unpaged.unfilteredBytes, 2003);
  });
});

describe("everyRow (the CSV export)", () => {
  it("asks for pages of EXPORT_PAGE rows with the same query until the total", async () => {
    const total = 2 * EXPORT_PAGE + 5;
    const asked: ServerQuery[] = [];
    const rows = await everyRow(query, (q) => {
      asked.push(q);
      const n = Math.max(0, Math.min(q.limit, total - q.offset));
      return Promise.resolve({ ...normalizeEventsPage({}), total, rows: Array.from({ length: n }, (_, i) => event(q.offset + i)) });
    });
    assert.deepEqual(asked.map((q) => [q.offset, q.limit]), [[0, EXPORT_PAGE], [EXPORT_PAGE, EXPORT_PAGE], [2 * EXPORT_PAGE, EXPORT_PAGE]]);
    assert.ok(asked.every((q) => q.sort?.key === "size" && q.queries["name"] === "  mm "));
    assert.equal(rows.length, total);
    assert.deepEqual(rows.map((r) => r.addr), Array.from({ length: total }, (_, i) => i));
  });
  it("stops at a short page (rows went away meanwhile)", async () => {
    let calls = 0;
    const rows = await everyRow(query, () => {
      calls += 1;
      return Promise.resolve({ ...normalizeEventsPage({}), total: 50_000, rows: [event(calls)] });
    });
    assert.equal(calls, 1);
    assert.equal(rows.length, 1);
  });
});

describe("liveSummary", () => {
  it("counts every live allocation, not the page's", () => {
    assert.equal(liveSummary({ count: 1234, bytes: 3 * 1024 ** 2, allocatedBytes: 4 * 1024 ** 2 }, "the peak (1.00 ms)"),
      "1,234 allocations live at the peak (1.00 ms) hold 3.00 MiB of the 4.00 MiB allocated; the other 1.00 MiB was allocated before the trace started.");
    assert.equal(liveSummary({ count: 1, bytes: 10, allocatedBytes: null }, "t"), "1 allocation live at t hold 10 B.");
  });
});

describe("DataTable paged on the server", () => {
  function table(): { t: DataTable<MemoryEvent>; asked: ServerQuery[]; show: (page: Partial<EventsPage> & { rows: MemoryEvent[] }) => void } {
    const asked: ServerQuery[] = [];
    const t = new DataTable<MemoryEvent>({
      testid: "t", csvName: () => "x.csv", pageSize: 20,
      server: { fetch: (q) => { asked.push(q); }, exportRows: () => Promise.resolve([]) },
    });
    container().appendChild(t.el);
    const show = (page: Partial<EventsPage> & { rows: MemoryEvent[] }): void => {
      t.setData({
        columns: [
          { key: "name", label: "Operator", value: (e) => e.name },
          { key: "size", label: "Size", numeric: true, value: (e) => e.size_bytes },
        ],
        rows: page.rows,
        page: { offset: page.offset ?? 0, total: page.total ?? page.rows.length, unfiltered: page.unfiltered ?? page.total ?? page.rows.length },
        searches: [{ key: "name", label: "Search", placeholder: "", text: (e) => e.name }],
        sort: page.sort ?? { key: "alloc", dir: "asc" },
        rowKey: (e) => String(e.addr),
      });
    };
    return { t, asked, show };
  }
  const text = (t: DataTable<MemoryEvent>, id: string): string => t.el.querySelector(`[data-testid=${id}]`)?.textContent ?? "";
  const click = (t: DataTable<MemoryEvent>, sel: string): void => {
    (t.el.querySelector(sel) as HTMLElement).click();
  };

  it("shows the server's page as it comes, with the count over every matching row", () => {
    const { t, show } = table();
    const rows = Array.from({ length: 20 }, (_, i) => event(100 - i));
    show({ rows, offset: 40, total: 123_456, unfiltered: 200_000, sort: { key: "size", dir: "desc" } });
    assert.deepEqual(t.visibleRows(), rows); // not sorted again nor cut in the browser
    assert.equal(text(t, "table-range"), "41–60 of 123,456");
    assert.equal(text(t, "table-count"), "123,456 of 200,000 rows match");
    assert.match(t.el.querySelector("[data-col=size]")?.getAttribute("aria-sort") ?? "", /descending/);
    assert.equal(t.el.querySelectorAll("tr[data-testid=row]").length, 20);
  });

  it("asks for the next page, a header's sort and another page size from the server", () => {
    const { t, asked, show } = table();
    show({ rows: Array.from({ length: 20 }, (_, i) => event(i)), total: 45 });
    click(t, "[data-testid=table-next]");
    assert.deepEqual(asked.at(-1), { offset: 20, limit: 20, sort: { key: "alloc", dir: "asc" }, queries: {} });
    assert.equal(t.el.dataset["loading"], "true");
    show({ rows: [event(20)], offset: 20, total: 45 });
    assert.equal(t.el.dataset["loading"], "false");
    assert.equal(text(t, "table-range"), "21–21 of 45");
    click(t, "[data-testid=sort-size]"); // a number: largest first, from the first page
    assert.deepEqual(asked.at(-1), { offset: 0, limit: 20, sort: { key: "size", dir: "desc" }, queries: {} });
    assert.equal(t.el.querySelectorAll("tr[data-testid=row]").length, 1); // the rows stay until the sorted page comes
    const select = t.el.querySelector("[data-testid=table-page-size]") as HTMLSelectElement;
    for (const o of select.querySelectorAll("option")) o.toggleAttribute("selected", o.value === "50");
    select.dispatchEvent(domEvent("change"));
    assert.deepEqual(asked.at(-1)?.limit, 50);
  });

  it("an empty page says why: nothing on the device, nothing matching, or past the end", () => {
    const { t, show } = table();
    show({ rows: [], total: 0, unfiltered: 0 });
    assert.equal(text(t, "table-empty"), "No rows.");
    assert.equal(text(t, "table-range"), "0 rows");
    show({ rows: [], total: 0, unfiltered: 10 });
    assert.equal(text(t, "table-empty"), "No rows match the search.");
    show({ rows: [], total: 10, offset: 40 });
    assert.equal(text(t, "table-empty"), "No rows on this page.");
  });

  it("a search asks the server once the typing pauses", async () => {
    const { t, asked, show } = table();
    show({ rows: [event(1)] });
    const input = t.el.querySelector("[data-testid=search-name]") as HTMLInputElement;
    for (const value of ["m", "mm"]) {
      input.value = value;
      input.dispatchEvent(domEvent("input"));
    }
    assert.equal(asked.length, 0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(asked, [{ offset: 0, limit: 20, sort: { key: "alloc", dir: "asc" }, queries: { name: "mm" } }]);
  });
});
