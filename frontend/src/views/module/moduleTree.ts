/**
 * A tree table (role=treegrid) for hierarchies such as the nn.Module tree: expand/collapse per row,
 * Expand all / Collapse all, a name filter that reveals matches with their ancestors, and sorting by
 * a column within each set of siblings (click a header: largest first, then smallest first, then the
 * original order again). Names are text nodes; every numeric cell has its exact value as tooltip.
 */
import { infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { DASH, formatInt } from "../../format";

export interface TreeColumn<N> {
  key: string;
  label: string;
  /** how the value is computed (header tooltip and info icon) */
  help?: string;
  numeric?: boolean;
  /** raw value for sorting and data-value */
  value: (node: N) => number | string | null;
  /** shown text */
  text: (node: N) => string;
  /** cell tooltip */
  title?: (node: N) => string;
}

export interface TreeOptions<N> {
  testid: string;
  /** the label of the name column */
  nameLabel: string;
  name: (node: N) => string;
  children: (node: N) => readonly N[];
  columns: TreeColumn<N>[];
  /** levels open at first: 1 = the roots' children are shown */
  openDepth?: number;
  emptyText?: string;
  /** what the nodes are called in the count ("modules") */
  noun?: string;
  /** links after a row's name (e.g. the module's occurrences in the Trace view) */
  nameExtra?: (node: N) => Child;
}

export interface TreeItem<N> {
  node: N;
  /** stable id: the index path ("0/2/1") */
  key: string;
  depth: number;
  index: number;
  parent: TreeItem<N> | null;
  children: TreeItem<N>[];
}

type Dir = "asc" | "desc";

/** Wrap nodes as items with index-path keys (unique even when names repeat). */
export function treeItems<N>(roots: readonly N[], children: (n: N) => readonly N[]): TreeItem<N>[] {
  const wrap = (node: N, index: number, parent: TreeItem<N> | null): TreeItem<N> => {
    const item: TreeItem<N> = { node, key: parent ? `${parent.key}/${index}` : String(index), depth: parent ? parent.depth + 1 : 0, index, parent, children: [] };
    const kids: unknown = children(node);
    item.children = Array.isArray(kids) ? (kids as N[]).map((c, i) => wrap(c, i, item)) : [];
    return item;
  };
  return roots.map((r, i) => wrap(r, i, null));
}

function walk<N>(items: readonly TreeItem<N>[], visit: (item: TreeItem<N>) => void): void {
  for (const it of items) {
    visit(it);
    walk(it.children, visit);
  }
}

export class TreeTable<N> {
  readonly el: HTMLElement;
  private roots: TreeItem<N>[] = [];
  private readonly open = new Set<string>();
  private sort: { key: string; dir: Dir } | null = null;
  private query = "";
  private total = 0;
  private readonly tableEl: HTMLTableElement;
  private readonly countEl: HTMLElement;

  constructor(private readonly opts: TreeOptions<N>) {
    const search = h("input", {
      class: "ptp-search",
      testid: "tree-search",
      attrs: { type: "search", placeholder: `Filter ${opts.noun ?? "rows"} by name`, "aria-label": `Filter ${opts.noun ?? "rows"} by name`, spellcheck: "false" },
      onInput: () => {
        this.query = search.value.trim().toLowerCase();
        this.renderBody();
      },
    });
    this.countEl = h("span", { class: "ptp-muted", testid: "tree-count" });
    this.tableEl = h("table", { class: "ptp-table ptp-data-table ptp-tree", role: "treegrid", attrs: { "aria-label": opts.nameLabel } });
    this.el = h(
      "div",
      { class: "ptp-tree-wrap", testid: opts.testid },
      h(
        "div",
        { class: "ptp-toolbar" },
        search,
        h("button", { class: "ptp-button", testid: "tree-expand-all", attrs: { type: "button" }, onClick: () => { this.expandAll(); } }, "Expand all"),
        h("button", { class: "ptp-button", testid: "tree-collapse-all", attrs: { type: "button" }, onClick: () => { this.collapseAll(); } }, "Collapse all"),
        h("span", { class: "ptp-toolbar-gap" }),
        this.countEl,
      ),
      h("div", { class: "ptp-table-wrap" }, this.tableEl),
    );
  }

  setRoots(roots: readonly N[]): void {
    this.roots = treeItems(roots, this.opts.children);
    this.open.clear();
    this.total = 0;
    const depth = this.opts.openDepth ?? 1;
    walk(this.roots, (it) => {
      this.total++;
      if (it.depth < depth && it.children.length) this.open.add(it.key);
    });
    this.renderHead();
    this.renderBody();
  }

  expandAll(): void {
    walk(this.roots, (it) => {
      if (it.children.length) this.open.add(it.key);
    });
    this.renderBody();
  }

  collapseAll(): void {
    this.open.clear();
    this.renderBody();
  }

  private renderHead(): void {
    const cols = this.opts.columns;
    const sortDir = (key: string): Dir | null => (this.sort?.key === key ? this.sort.dir : null);
    const header = (key: string, label: string, numeric: boolean, help?: string): HTMLElement => {
      const dir = sortDir(key);
      const th = h("th", {
        class: [numeric && "ptp-num", key === "name" && "ptp-name-col"],
        dataset: { col: key },
        title: help,
        attrs: { scope: "col", "aria-sort": dir === "asc" ? "ascending" : dir === "desc" ? "descending" : "none" },
      });
      th.appendChild(
        h(
          "button",
          {
            class: "ptp-sort",
            testid: `tree-sort-${key}`,
            title: "Sort within each level (click again to reverse, a third time for the recorded order)",
            attrs: { type: "button" },
            onClick: () => {
              this.toggleSort(key, numeric);
            },
          },
          label,
          h("span", { class: "ptp-sort-arrow", attrs: { "aria-hidden": "true" } }, dir === "asc" ? "▲" : dir === "desc" ? "▼" : ""),
        ),
      );
      if (help) th.appendChild(infoIcon(help));
      return th;
    };
    replaceChildren(
      this.tableEl,
      h("thead", {}, h("tr", {}, header("name", this.opts.nameLabel, false), cols.map((c) => header(c.key, c.label, !!c.numeric, c.help)))),
      h("tbody", {}),
    );
  }

  private toggleSort(key: string, numeric: boolean): void {
    const first: Dir = numeric ? "desc" : "asc";
    const second: Dir = numeric ? "asc" : "desc";
    const cur = this.sort;
    if (!cur || cur.key !== key) this.sort = { key, dir: first };
    else if (cur.dir === first) this.sort = { key, dir: second };
    else this.sort = null;
    this.renderHead();
    this.renderBody();
  }

  private sorted(items: readonly TreeItem<N>[]): TreeItem<N>[] {
    const sort = this.sort;
    if (!sort) return [...items];
    const get =
      sort.key === "name"
        ? (n: N): number | string | null => this.opts.name(n)
        : (this.opts.columns.find((c) => c.key === sort.key)?.value ?? ((): null => null));
    const sign = sort.dir === "asc" ? 1 : -1;
    return [...items].sort((a, b) => {
      const va = get(a.node);
      const vb = get(b.node);
      if (va === null || vb === null) return va === vb ? a.index - b.index : va === null ? 1 : -1;
      const c = typeof va === "number" && typeof vb === "number" ? va - vb : String(va).localeCompare(String(vb), undefined, { numeric: true });
      return sign * c || a.index - b.index;
    });
  }

  /** Rows to show: open subtrees, or while filtering the matches, their ancestors and open subtrees of matches. */
  private visible(): { item: TreeItem<N>; match: boolean }[] {
    const out: { item: TreeItem<N>; match: boolean }[] = [];
    const q = this.query;
    const matches = (it: TreeItem<N>): boolean => this.opts.name(it.node).toLowerCase().includes(q);
    const hasMatchBelow = new Map<string, boolean>();
    const mark = (it: TreeItem<N>): boolean => {
      let any = false;
      for (const c of it.children) any = mark(c) || any;
      hasMatchBelow.set(it.key, any);
      return any || matches(it);
    };
    if (q) for (const r of this.roots) mark(r);
    const add = (items: readonly TreeItem<N>[], inMatch: boolean): void => {
      for (const it of this.sorted(items)) {
        const self = q ? matches(it) : false;
        const below = q ? (hasMatchBelow.get(it.key) ?? false) : false;
        if (q && !inMatch && !self && !below) continue;
        out.push({ item: it, match: self });
        const opened = this.open.has(it.key) || (q !== "" && below);
        if (opened) add(it.children, inMatch || self);
      }
    };
    add(this.roots, false);
    return out;
  }

  private renderBody(): void {
    const tbody = this.tableEl.tBodies[0] ?? this.tableEl.appendChild(h("tbody", {}));
    const rows = this.visible();
    const span = this.opts.columns.length + 1;
    const trs = rows.map(({ item, match }) => this.row(item, match));
    if (trs.length === 0) {
      trs.push(
        h(
          "tr",
          {},
          h("td", { class: "ptp-muted ptp-empty-row", testid: "tree-empty", attrs: { colspan: span } }, this.total ? "No name matches the filter." : (this.opts.emptyText ?? "Nothing to show.")),
        ),
      );
    }
    replaceChildren(tbody, trs);
    const noun = this.opts.noun ?? "rows";
    this.countEl.textContent = `${formatInt(this.total)} ${noun}`;
  }

  private row(item: TreeItem<N>, match: boolean): HTMLElement {
    const name = this.opts.name(item.node);
    const hasKids = item.children.length > 0;
    const open = hasKids && (this.open.has(item.key) || (this.query !== "" && this.isForcedOpen(item)));
    const toggle = hasKids
      ? h(
          "button",
          {
            class: "ptp-tree-toggle",
            testid: "tree-toggle",
            attrs: { type: "button", "aria-label": `${open ? "Collapse" : "Expand"} ${name}`, "aria-expanded": open ? "true" : "false" },
            onClick: () => {
              if (this.open.has(item.key)) this.open.delete(item.key);
              else this.open.add(item.key);
              this.renderBody();
            },
          },
          open ? "▾" : "▸",
        )
      : h("span", { class: "ptp-tree-leaf", attrs: { "aria-hidden": "true" } });
    const tr = h(
      "tr",
      {
        testid: "tree-row",
        class: [match && "ptp-tree-match"],
        dataset: { key: item.key, depth: String(item.depth), name },
        attrs: { "aria-level": item.depth + 1, "aria-expanded": hasKids ? (open ? "true" : "false") : null },
      },
      h(
        "td",
        { class: "ptp-name-col", dataset: { col: "name" } },
        h(
          "div",
          { class: "ptp-tree-name", style: { "padding-left": `${item.depth * 18}px` } },
          toggle,
          h("span", { class: "ptp-break", testid: "tree-name", title: name }, name),
          this.opts.nameExtra?.(item.node),
        ),
      ),
    );
    for (const c of this.opts.columns) {
      const v = c.value(item.node);
      const td = h("td", { class: [c.numeric && "ptp-num"], dataset: { col: c.key } }, c.text(item.node) || DASH);
      if (typeof v === "number") td.dataset["value"] = String(v);
      const title = c.title?.(item.node);
      if (title) td.title = title;
      tr.appendChild(td);
    }
    return tr;
  }

  private isForcedOpen(item: TreeItem<N>): boolean {
    // While filtering, a row whose subtree holds a match is shown open.
    const q = this.query;
    const has = (it: TreeItem<N>): boolean => it.children.some((c) => this.opts.name(c.node).toLowerCase().includes(q) || has(c));
    return has(item);
  }
}
