/**
 * The Trace view's search box: what a query means. As in Perfetto's search box, text matches any event whose
 * name contains it (case-insensitive), so `linear` finds `aten::linear` and `nn.Module: Linear_1`. A query in
 * double quotes matches the whole name exactly, case and all: `"nn.Module: Linear_1"` finds Linear_1's calls and
 * not Linear_10's (the tables' search boxes read quotes the same way, and links from a row quote the name). The
 * server does the matching (`./trace/search`, `match=exact|substring`); `nameMatches` is the same rule, for the
 * client's own use and its tests.
 */

export interface TraceQuery {
  /** what to look for (without the quotes) */
  text: string;
  exact: boolean;
}

/** Read a search box's text: trimmed; `"…"` (two quotes or more around something) is an exact name. */
export function parseTraceQuery(raw: string): TraceQuery {
  const q = raw.trim();
  if (q.length >= 3 && q.startsWith('"') && q.endsWith('"')) return { text: q.slice(1, -1), exact: true };
  return { text: q, exact: false };
}

/** The query's text quoted for an exact search (what a link from a row puts in the box). */
export function exactQuery(name: string): string {
  return `"${name}"`;
}

/** Does an event named `name` match the query (the server's rule, `timeline/details.search`)? */
export function nameMatches(name: string, query: TraceQuery): boolean {
  if (query.text === "") return false;
  return query.exact ? name === query.text : name.toLowerCase().includes(query.text.toLowerCase());
}

/** The search's parameters of `./trace/search`. */
export function searchParams(query: TraceQuery): { q: string; match: "exact" | "substring" } {
  return { q: query.text, match: query.exact ? "exact" : "substring" };
}
