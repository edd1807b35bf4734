/**
 * The Memory events table's pages (GET ./memory/events with `limit`): a trace of many gigabytes holds millions of
 * allocation/free pairs, so the server filters (device, range or instant, operator search, "Min size"), sorts and
 * cuts them, and the page asks for one page at a time (docs/api/openapi.yaml). Pure helpers: the query of a page,
 * the answer read defensively, and every matching row for the CSV export, asked for in pages of `EXPORT_PAGE`.
 */
import type { SpanExtra } from "../../types";
import { allPages } from "../common/serverPages";
import type { ServerQuery, SortDir } from "../common/table";
import type { MemoryEvent } from "./memoryData";

/** The columns the server sorts by (the table's column keys). */
export const EVENT_SORTS = ["name", "size", "alloc", "free", "lifetime", "in_range"] as const;
/** Rows one request may ask for (the server's bound): the CSV export's page. */
export const EXPORT_PAGE = 10_000;

/** Which pairs the table lists: one device, in a range (absolute µs) or live at an instant, at least `minBytes`. */
export interface EventsWhere {
  device: string;
  range: readonly [number, number] | null;
  liveAt: number | null;
  minBytes: number;
}

/** One page of the table as the server answers it. */
export interface EventsPage {
  rows: MemoryEvent[];
  /** rows matching the filters */
  total: number;
  offset: number;
  /** rows of the range or instant before the search and "Min size", and their bytes */
  unfiltered: number;
  unfilteredBytes: number;
  /** every device holding pairs */
  devices: string[];
  /** live at an instant: the device's total allocated then (null when the trace has none) */
  allocatedBytes: number | null;
  /** the sort the server applied */
  sort: { key: string; dir: SortDir } | null;
}

type EventsQuery = SpanExtra<"memory/events">;

/** The query parameters of a page (`limit` always: it is what asks for a page). */
export function eventsParams(where: EventsWhere, q: ServerQuery): EventsQuery {
  const out: EventsQuery = { device: where.device, limit: q.limit, offset: q.offset };
  if (where.liveAt !== null) out.at_us = where.liveAt;
  else if (where.range) {
    out.start_us = where.range[0];
    out.end_us = where.range[1];
  }
  const sort = EVENT_SORTS.find((key) => key === q.sort?.key);
  if (sort !== undefined && q.sort) {
    out.sort = sort;
    out.order = q.sort.dir;
  }
  const search = (q.queries["name"] ?? "").trim();
  if (search) out.q = search;
  if (where.minBytes > 0) out.min_bytes = where.minBytes;
  return out;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const num = (v: unknown, fallback: number): number => (typeof v === "number" && Number.isFinite(v) ? v : fallback);

/** A page answer with anything malformed replaced (no rows, counts from the rows). */
export function normalizeEventsPage(raw: unknown): EventsPage {
  const body = isObj(raw) ? raw : {};
  const rows = Array.isArray(body["rows"]) ? (body["rows"] as MemoryEvent[]) : [];
  const total = num(body["total"], rows.length);
  const sortKey = body["sort"];
  const dir = body["order"] === "desc" ? "desc" : "asc";
  return {
    rows,
    total,
    offset: num(body["offset"], 0),
    unfiltered: num(body["unfiltered"], total),
    unfilteredBytes: num(body["unfiltered_bytes"], rows.reduce((s, r) => s + r.size_bytes, 0)),
    devices: Array.isArray(body["devices"]) ? body["devices"].filter((d): d is string => typeof d === "string") : [],
    allocatedBytes: typeof body["allocated_bytes"] === "number" ? body["allocated_bytes"] : null,
    sort: typeof sortKey === "string" ? { key: sortKey, dir } : null,
  };
}

/**
 * Every row matching `q` (all pages, in its sort), for the CSV export: pages of `EXPORT_PAGE` rows, asked for one
 * after the other until the server's total is reached (or a page comes back short: rows went away meanwhile).
 */
export async function everyRow(q: ServerQuery, fetchPage: (q: ServerQuery) => Promise<EventsPage>): Promise<MemoryEvent[]> {
  return allPages(q, EXPORT_PAGE, fetchPage);
}
