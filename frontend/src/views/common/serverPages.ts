/**
 * Every row of a table paged on the server (`DataTable`'s server mode), for its CSV export: the pages asked for one
 * after the other, in the table's sort, until the server's total is reached or a page comes back short (rows went
 * away meanwhile). One loop for every such table (the Memory events, the Distributed ranks).
 */
import type { ServerQuery } from "./table";

/** One page as the export reads it: its rows and how many match in all. */
export interface RowsPage<R> {
  rows: R[];
  total: number;
}

export async function allPages<R>(q: ServerQuery, pageRows: number, fetchPage: (q: ServerQuery) => Promise<RowsPage<R>>): Promise<R[]> {
  const rows: R[] = [];
  for (let offset = 0; ; offset += pageRows) {
    const page = await fetchPage({ ...q, offset, limit: pageRows });
    rows.push(...page.rows);
    if (page.rows.length < pageRows || offset + pageRows >= page.total) return rows;
  }
}
