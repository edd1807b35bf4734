/**
 * One table component for the Operator and Kernel pages: sortable columns (click a header: toggles
 * descending/ascending, arrow shown), one or more substring searches (case-insensitive), paging
 * (10/20/50/100), optional expandable rows, and CSV export of every row that matches the searches,
 * in the shown order. Cells are text nodes (or nodes a column builds itself); every numeric cell
 * has a tooltip with the exact value and how it is computed.
 *
 * A table too large to send whole (millions of memory events) is paged on the server (`TableOptions.server`):
 * the same toolbar, headers and pager, but a sort, a search or a page asks the server (`ServerSource.fetch`)
 * and the table shows the page it answers (`TableData.page`); the CSV export asks for every matching row.
 */
import { infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { DASH, formatInt } from "../../format";
import { type CsvValue, exportCsvCopy, exportCsvDownload, toCsv } from "./csv";

export type CellValue = string | number | boolean | null | undefined;
export type SortDir = "asc" | "desc";

export interface Column<R> {
  /** stable id: data-col of the header and cells */
  key: string;
  label: string;
  /** how the value is computed (header tooltip, info icon, cell tooltips) */
  help?: string;
  numeric?: boolean;
  /** raw value: sorting, CSV, data-value */
  value: (row: R) => CellValue;
  /** display text (default: the raw value, "—" when missing) */
  text?: (row: R) => string;
  /** custom cell content (instead of text) */
  render?: (row: R) => Child;
  /** cell tooltip (default for numeric columns: exact value + help) */
  title?: (row: R) => string;
  /** exact value for the default tooltip of numeric cells */
  exact?: (row: R) => string;
  /** CSV header (default: label) and value (default: value) */
  csvHeader?: string;
  csv?: (row: R) => CsvValue;
  sortable?: boolean;
  /** extra class of the cells, e.g. "ptp-name-col" */
  cls?: string;
}

export interface Search<R> {
  key: string;
  label: string;
  placeholder: string;
  text: (row: R) => string;
}

export interface Expand<R> {
  can: (row: R) => boolean;
  /** content of the detail row; built once per row and kept while the data stays */
  render: (row: R) => HTMLElement;
  label?: string;
}

/** What a server-paged table asks for: which rows, sorted how, with the searches' texts (by search key). */
export interface ServerQuery {
  offset: number;
  limit: number;
  sort: { key: string; dir: SortDir } | null;
  queries: Record<string, string>;
}

/** Which rows a server-paged table's `rows` are: from `offset` among `total` matching rows (`unfiltered` before
 * the searches and filters, when the server says). */
export interface ServerPage {
  offset: number;
  total: number;
  unfiltered?: number;
}

/** The server behind a server-paged table: `fetch` asks for a page (the owner answers with `setData`, or not,
 * when a newer query came first); `exportRows` gives every row matching a query, for the CSV export. */
export interface ServerSource<R> {
  fetch: (query: ServerQuery) => void;
  exportRows: (query: ServerQuery) => Promise<R[]>;
}

export interface TableData<R> {
  columns: Column<R>[];
  /** every row; in a server-paged table the page's rows, as the server sorted them */
  rows: R[];
  /** a server-paged table: which rows `rows` are (the sort is then `sort`, the one the server applied) */
  page?: ServerPage;
  searches?: Search<R>[];
  /** initial sort (kept across setData when the column still exists and `keepSort`) */
  sort?: { key: string; dir: SortDir } | null;
  expand?: Expand<R> | null;
  rowKey: (row: R) => string;
}

export interface TableOptions {
  testid: string;
  /** CSV file name at export time */
  csvName: () => string;
  /** extra controls at the start of the toolbar (e.g. a group-by select) */
  controls?: Child;
  pageSizes?: number[];
  pageSize?: number;
  emptyText?: string;
  /** page, search and sort on the server (see the module comment) */
  server?: ServerSource<unknown>;
}

const SEARCH_DELAY_MS = 250; // a server-paged table asks once the typing pauses

function compare(a: CellValue, b: CellValue): number {
  const na = a === null || a === undefined || (typeof a === "number" && !Number.isFinite(a));
  const nb = b === null || b === undefined || (typeof b === "number" && !Number.isFinite(b));
  if (na || nb) return na && nb ? 0 : na ? 1 : -1; // missing values last, whatever the direction
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  return String(a).localeCompare(String(b), undefined, { numeric: true, sensitivity: "base" });
}

function defaultText(v: CellValue): string {
  if (v === null || v === undefined || v === "") return DASH;
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : DASH;
  return v;
}

/** A search matches a substring, or the whole text when quoted ("aten::add"). */
function matches(text: string, q: string): boolean {
  return q.length >= 2 && q.startsWith('"') && q.endsWith('"') ? text === q.slice(1, -1) : text.includes(q);
}

export class DataTable<R> {
  readonly el: HTMLElement;
  private data: TableData<R> = { columns: [], rows: [], rowKey: () => "" };
  private sort: { key: string; dir: SortDir } | null = null;
  private readonly queries = new Map<string, string>();
  private page = 0;
  private pageSize: number;
  private readonly expanded = new Set<string>();
  private readonly details = new Map<string, HTMLElement>();
  private readonly searchBox: HTMLElement;
  private readonly countEl: HTMLElement;
  private readonly tableEl: HTMLTableElement;
  private readonly pagerEl: HTMLElement;
  private readonly downloadBtn: HTMLButtonElement;
  private readonly copyBtn: HTMLButtonElement;
  private cache: R[] | null = null;
  private searchTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly opts: TableOptions) {
    const sizes = opts.pageSizes ?? [10, 20, 50, 100];
    this.pageSize = opts.pageSize ?? sizes[0] ?? 10;
    this.searchBox = h("div", { class: "ptp-table-searches" });
    this.countEl = h("span", { class: "ptp-muted ptp-table-count", testid: "table-count" });
    this.tableEl = h("table", { class: "ptp-table ptp-data-table" });
    this.pagerEl = h("div", { class: "ptp-pager", testid: "table-pager" });
    const sizeSelect = h(
      "select",
      {
        testid: "table-page-size",
        attrs: { "aria-label": "Rows per page" },
        onChange: () => {
          this.pageSize = Number(sizeSelect.value) || this.pageSize;
          this.page = 0;
          if (this.opts.server) this.ask(0);
          else this.renderBody();
        },
      },
      sizes.map((n) => h("option", { attrs: { value: n, selected: n === this.pageSize } }, String(n))),
    );
    this.downloadBtn = h(
      "button",
      { class: "ptp-button", testid: "csv-download", attrs: { type: "button" }, onClick: () => { void this.download(); } },
      "Download CSV",
    );
    this.copyBtn = h(
      "button",
      { class: "ptp-button", testid: "csv-copy", attrs: { type: "button" }, onClick: () => { void this.copy(); } },
      "Copy CSV",
    );
    this.el = h(
      "div",
      { class: "ptp-data-table-wrap", testid: opts.testid },
      h(
        "div",
        { class: "ptp-toolbar" },
        opts.controls ?? null,
        this.searchBox,
        h("span", { class: "ptp-toolbar-gap" }),
        this.countEl,
        h("label", { class: "ptp-picker" }, "Rows per page", sizeSelect),
        this.downloadBtn,
        this.copyBtn,
      ),
      h("div", { class: "ptp-table-wrap" }, this.tableEl),
      this.pagerEl,
    );
  }

  /** Set a search box's text (e.g. from a link), as if the user had typed it; `exactly` quotes it, so that only
   * that name matches ("aten::add", not "aten::addmm"). */
  setQuery(key: string, text: string, exactly = false): void {
    this.queries.set(key, exactly && text ? `"${text}"` : text);
    this.page = 0;
    this.renderSearches();
    if (this.opts.server) this.opts.server.fetch(this.query());
    else this.renderBody();
  }

  /** The query of a server-paged table as it stands (sort, searches, page size), from `offset`: what its owner
   * asks for when its own filters change (then from 0). */
  query(offset = 0): ServerQuery {
    return { offset, limit: this.pageSize, sort: this.sort, queries: Object.fromEntries(this.queries) };
  }

  private ask(offset: number): void {
    this.el.dataset["loading"] = "true";
    this.opts.server?.fetch(this.query(offset));
  }

  /** Replace columns/rows; searches keep their text, the sort is kept when its column still exists. */
  setData(data: TableData<R>, keepSort = true): void {
    const prevSort = this.sort;
    this.data = data;
    this.expanded.clear();
    this.details.clear();
    const has = (key: string | undefined): boolean => !!key && data.columns.some((c) => c.key === key && c.sortable !== false);
    if (this.opts.server) {
      // the server's page: its sort is the one applied, its offset the page shown
      this.sort = data.sort ?? null;
      this.page = Math.floor((data.page?.offset ?? 0) / this.pageSize);
      this.el.dataset["loading"] = "false";
    } else {
      this.sort = keepSort && prevSort && has(prevSort.key) ? prevSort : data.sort && has(data.sort.key) ? data.sort : null;
      this.page = 0;
    }
    this.renderSearches();
    this.renderHead();
    this.renderBody();
  }

  /** Re-render the rows (e.g. after an expander's condition changed); keeps page, sort and searches. */
  refresh(): void {
    this.renderBody();
  }

  /** Every row matching the searches, in the shown order (what CSV export writes). */
  filteredRows(): R[] {
    if (this.opts.server) return this.data.rows; // the server searched and sorted them
    if (this.cache) return this.cache;
    const searches = (this.data.searches ?? [])
      .map((s) => ({ s, q: (this.queries.get(s.key) ?? "").trim().toLowerCase() }))
      .filter(({ q }) => q !== "");
    let rows = this.data.rows.map((row, index) => ({ row, index }));
    if (searches.length) rows = rows.filter(({ row }) => searches.every(({ s, q }) => matches(s.text(row).toLowerCase(), q)));
    const sort = this.sort;
    const col = sort ? this.data.columns.find((c) => c.key === sort.key) : undefined;
    if (sort && col) {
      const sign = sort.dir === "asc" ? 1 : -1;
      rows.sort((a, b) => {
        const va = col.value(a.row);
        const vb = col.value(b.row);
        const missing = (v: CellValue): boolean => v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v));
        const c = missing(va) || missing(vb) ? compare(va, vb) : sign * compare(va, vb);
        return c || a.index - b.index;
      });
    }
    this.cache = rows.map((r) => r.row);
    return this.cache;
  }

  /** The rows on the current page. */
  visibleRows(): R[] {
    if (this.opts.server) return this.data.rows;
    const rows = this.filteredRows();
    return rows.slice(this.page * this.pageSize, (this.page + 1) * this.pageSize);
  }

  csv(rows: R[] = this.filteredRows()): { text: string; rows: number } {
    const cols = this.data.columns;
    const text = toCsv(
      cols.map((c) => c.csvHeader ?? c.label),
      rows.map((r) => cols.map((c) => (c.csv ? c.csv(r) : c.value(r)))),
    );
    return { text, rows: rows.length };
  }

  /** The CSV of every matching row: a server-paged table asks the server for them first. */
  private async exportCsv(): Promise<{ text: string; rows: number }> {
    const server = this.opts.server;
    if (!server) return this.csv();
    return this.csv((await server.exportRows(this.query())) as R[]);
  }

  private async download(): Promise<void> {
    const name = this.opts.csvName(); // named for what was shown when asked, even if it changes meanwhile
    const csv = await this.exportOrSay();
    if (csv) exportCsvDownload(name, csv.text, csv.rows);
  }

  private async copy(): Promise<void> {
    const csv = await this.exportOrSay();
    if (csv) await exportCsvCopy(csv.text, csv.rows);
  }

  /** The CSV, or null when the server could not give the rows (the count says so, as text). */
  private async exportOrSay(): Promise<{ text: string; rows: number } | null> {
    try {
      return await this.exportCsv();
    } catch (err) {
      this.countEl.textContent = `The CSV could not be made: ${err instanceof Error ? err.message : String(err)}`;
      return null;
    }
  }

  private renderSearches(): void {
    const searches = this.data.searches ?? [];
    for (const key of [...this.queries.keys()]) if (!searches.some((s) => s.key === key)) this.queries.delete(key);
    replaceChildren(
      this.searchBox,
      searches.map((s) => {
        const input = h("input", {
          class: "ptp-search",
          testid: `search-${s.key}`,
          attrs: { type: "search", placeholder: s.placeholder, "aria-label": s.label, spellcheck: "false" },
          onInput: () => {
            this.queries.set(s.key, input.value);
            this.page = 0;
            if (!this.opts.server) {
              this.renderBody();
              return;
            }
            clearTimeout(this.searchTimer);
            this.searchTimer = setTimeout(() => { this.ask(0); }, SEARCH_DELAY_MS);
          },
        });
        input.value = this.queries.get(s.key) ?? "";
        return input;
      }),
    );
  }

  /** The header row; the body's rows stay (a server-paged table keeps showing them until the sorted page comes). */
  private renderHead(): void {
    const cols = this.data.columns;
    const expand = this.data.expand;
    const body = this.tableEl.querySelector("tbody") ?? h("tbody", {});
    replaceChildren(
      this.tableEl,
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          expand ? h("th", { class: "ptp-expander-col", attrs: { "aria-label": expand.label ?? "Details" } }) : null,
          cols.map((c) => this.headerCell(c)),
        ),
      ),
      body,
    );
  }

  private headerCell(c: Column<R>): HTMLElement {
    const sorted = this.sort?.key === c.key ? this.sort.dir : null;
    const th = h("th", {
      class: [c.numeric && "ptp-num", c.cls],
      dataset: { col: c.key },
      title: c.help,
      attrs: { "aria-sort": sorted === "asc" ? "ascending" : sorted === "desc" ? "descending" : "none", scope: "col" },
    });
    const label: Child[] = [c.label];
    if (c.sortable === false) {
      th.append(...label.map(String));
    } else {
      const arrow = h("span", { class: "ptp-sort-arrow", attrs: { "aria-hidden": "true" } }, sorted === "asc" ? "▲" : sorted === "desc" ? "▼" : "");
      th.appendChild(
        h(
          "button",
          {
            class: "ptp-sort",
            testid: `sort-${c.key}`,
            attrs: { type: "button" },
            onClick: () => { this.toggleSort(c); },
          },
          c.label,
          arrow,
        ),
      );
    }
    if (c.help) th.appendChild(infoIcon(c.help));
    return th;
  }

  private toggleSort(c: Column<R>): void {
    const cur = this.sort;
    // First click: numbers descending (largest first), text ascending; then toggle.
    const first: SortDir = c.numeric ? "desc" : "asc";
    this.sort = { key: c.key, dir: cur?.key === c.key ? (cur.dir === "asc" ? "desc" : "asc") : first };
    this.page = 0;
    this.renderHead();
    if (this.opts.server) this.ask(0);
    else this.renderBody();
  }

  private renderBody(): void {
    this.cache = null;
    const all = this.filteredRows();
    const server = this.opts.server ? (this.data.page ?? { offset: 0, total: all.length }) : null;
    const pages = Math.max(1, Math.ceil((server ? server.total : all.length) / this.pageSize));
    if (!server) this.page = Math.min(this.page, pages - 1);
    const rows = this.visibleRows();
    const cols = this.data.columns;
    const expand = this.data.expand;
    const tbody = this.tableEl.querySelector("tbody") ?? this.tableEl.appendChild(h("tbody", {})); // the first: a nested table comes after
    const span = cols.length + (expand ? 1 : 0);
    const trs: HTMLElement[] = [];
    if (rows.length === 0) {
      const none = server ? (server.unfiltered ?? server.total) === 0 : this.data.rows.length === 0;
      const empty = none ? (this.opts.emptyText ?? "No rows.") : server && server.total > 0 ? "No rows on this page." : "No rows match the search.";
      trs.push(h("tr", {}, h("td", { class: "ptp-muted ptp-empty-row", testid: "table-empty", attrs: { colspan: span } }, empty)));
    }
    for (const row of rows) {
      const key = this.data.rowKey(row);
      const tr = h("tr", { testid: "row" }, expand ? h("td", { class: "ptp-expander-col" }, this.expander(row, key)) : null);
      for (const c of cols) tr.appendChild(this.cell(c, row));
      trs.push(tr);
      if (expand && this.expanded.has(key)) trs.push(this.detailRow(row, key, span));
    }
    replaceChildren(tbody, trs);

    const total = server ? (server.unfiltered ?? server.total) : this.data.rows.length;
    const shown = server ? server.total : all.length;
    this.countEl.textContent = shown === total ? `${formatInt(total)} row${total === 1 ? "" : "s"}` : `${formatInt(shown)} of ${formatInt(total)} rows match`;
    const exportTitle = `Every row that matches the search (${formatInt(shown)}), in the shown order, all pages; times in µs.`;
    this.downloadBtn.title = `Download ${exportTitle}`;
    this.copyBtn.title = `Copy ${exportTitle}`;
    this.downloadBtn.disabled = this.copyBtn.disabled = shown === 0;
    this.renderPager(shown, pages, server ? rows.length : null);
  }

  /** The pager; `onPage`: the rows a server-paged table's page holds (null: the table holds every row). */
  private renderPager(shown: number, pages: number, onPage: number | null): void {
    const from = shown === 0 || onPage === 0 ? 0 : this.page * this.pageSize + 1;
    const to = onPage === null ? Math.min(shown, (this.page + 1) * this.pageSize) : this.page * this.pageSize + onPage;
    const go = (p: number): void => {
      this.page = Math.min(Math.max(0, p), pages - 1);
      if (this.opts.server) this.ask(this.page * this.pageSize);
      else this.renderBody();
    };
    const btn = (label: string, testid: string, target: number, disabled: boolean, aria: string): HTMLElement =>
      h("button", { class: "ptp-button ptp-button-small", testid, attrs: { type: "button", disabled, "aria-label": aria }, onClick: () => { go(target); } }, label);
    replaceChildren(
      this.pagerEl,
      h("span", { class: "ptp-muted", testid: "table-range" }, shown === 0 || from === 0 ? "0 rows" : `${formatInt(from)}–${formatInt(to)} of ${formatInt(shown)}`),
      btn("«", "table-first", 0, this.page === 0, "First page"),
      btn("‹ Prev", "table-prev", this.page - 1, this.page === 0, "Previous page"),
      h("span", { class: "ptp-muted" }, `Page ${this.page + 1} of ${pages}`),
      btn("Next ›", "table-next", this.page + 1, this.page >= pages - 1, "Next page"),
      btn("»", "table-last", pages - 1, this.page >= pages - 1, "Last page"),
    );
  }

  private cell(c: Column<R>, row: R): HTMLElement {
    const v = c.value(row);
    const td = h("td", { class: [c.numeric && "ptp-num", c.cls], dataset: { col: c.key } });
    if (typeof v === "number" || typeof v === "boolean") td.dataset["value"] = String(v);
    if (c.render) {
      const content = c.render(row);
      if (content instanceof Node) td.appendChild(content);
      else replaceChildren(td, content);
    } else {
      td.textContent = c.text ? c.text(row) : defaultText(v);
    }
    const title = c.title ? c.title(row) : c.numeric ? [c.exact ? c.exact(row) : defaultText(v), c.help].filter(Boolean).join("\n") : undefined;
    if (title) td.title = title;
    return td;
  }

  private expander(row: R, key: string): Child {
    const expand = this.data.expand;
    if (!expand?.can(row)) return null;
    const open = this.expanded.has(key);
    return h(
      "button",
      {
        class: "ptp-expander",
        testid: "row-expand",
        title: open ? "Hide the call stacks" : (expand.label ?? "Show details"),
        attrs: { type: "button", "aria-expanded": open ? "true" : "false", "aria-label": expand.label ?? "Show details" },
        onClick: () => {
          if (this.expanded.has(key)) this.expanded.delete(key);
          else this.expanded.add(key);
          this.renderBody();
        },
      },
      open ? "▾" : "▸",
    );
  }

  private detailRow(row: R, key: string, span: number): HTMLElement {
    let content = this.details.get(key);
    if (!content && this.data.expand) {
      content = this.data.expand.render(row);
      this.details.set(key, content);
    }
    return h("tr", { class: "ptp-detail-row", testid: "detail-row" }, h("td", { attrs: { colspan: span } }, content ?? null));
  }
}

/** A name cell clamped to two lines; a click shows it whole (the tooltip always has it). */
export function clampedName(name: string, testid = "name"): HTMLElement {
  const el = h("span", {
    class: "ptp-clamp ptp-break",
    testid,
    title: name,
    onClick: () => { el.classList.toggle("ptp-clamp-open"); },
  }, name);
  return el;
}
