/**
 * The Distributed page's data: the JSON of ./distributed (docs/api/openapi.yaml; `page`, `totals` and
 * `heatmap` typed from the generated API types), its normalisation, and the pure helpers the cards share.
 * A job of more than 256 ranks arrives in pages: `ranks` holds one page of rows, sorted on the server (the rank
 * table's server-paged mode asks for them: `pageParams`, `serverPage`, `everyRank`); `totals`, `heatmap`,
 * `straggler` and `groups` always cover every rank.
 */
import type { components } from "../../generated/api";
import { allPages } from "../common/serverPages";
import type { ServerPage, ServerQuery, SortDir } from "../common/table";

export type DistributedPage = components["schemas"]["Distributed"]["page"];
export type DistributedTotals = components["schemas"]["Distributed"]["totals"];
export type DistributedHeatmap = components["schemas"]["Distributed"]["heatmap"];

export interface CollectiveStats {
  name: string;
  calls: number;
  /** kernels that ran in the window but were launched before it (not in calls or bytes) */
  prelaunched?: number;
  bytes: number;
  total_us: number;
  avg_us?: number;
  transfer_us?: number;
  bandwidth_gbps?: number | null;
}

export interface RankDevice {
  id?: number | string | null;
  name?: string | null;
}

export interface RankStats {
  worker: string;
  rank: number;
  steps?: number;
  computation_us: number;
  communication_us: number;
  /** null where overlap cannot be measured on one timeline (CPU-only rank, host-only collectives): see overlap_note */
  overlap_us: number | null;
  overlap_note?: string | null;
  other_us?: number;
  transfer_us: number;
  sync_us: number;
  host_wait_us?: number;
  /** waiting for the other ranks, each stall once: collectives' waiting part ∪ host blocked in syncs */
  wait_us?: number;
  /** step less wait_us: the measure the straggler and the groups' slowest rank are chosen by */
  own_us?: number;
  host_idle_us?: number;
  step_us?: number;
  collectives: CollectiveStats[];
  devices?: RankDevice[];
  host?: string;
  process?: number | null;
  per_step?: Partial<Record<StepMetric, number[] | null>>;
  /** each step's [start, end] µs in this rank's own trace */
  step_windows_us?: number[][];
}

/** The window of step `step` (null: all steps) in rank `r`'s trace, or null when it recorded no step. */
export function rankStepWindow(r: RankStats, step: number | null): [number, number] | null {
  const w = Array.isArray(r.step_windows_us) ? r.step_windows_us : [];
  const pick = step === null ? [w[0], w[w.length - 1]] : [w[step], w[step]];
  const a = pick[0]?.[0];
  const b = pick[1]?.[1];
  return typeof a === "number" && typeof b === "number" && b >= a ? [a, b] : null;
}


export type StepMetric = "computation_us" | "communication_us" | "overlap_us" | "other_us" | "transfer_us" | "sync_us";

/** A rank's value of a metric: the mean per step, or one step's value when a step is chosen. */
export function at(r: RankStats, key: StepMetric, step: number | null): number {
  if (step !== null) {
    const v = r.per_step?.[key]?.[step];
    if (typeof v === "number") return v;
  }
  return us(r[key]);
}

export interface Straggler {
  rank: number;
  worker: string;
  text: string;
  others_wait_us?: number;
  own_wait_us?: number;
}

/** Per process group of two or more ranks: its slowest rank and the rank its members wait for most. */
export interface GroupStragglers {
  group: string;
  ranks: number;
  matched: number;
  slowest: { rank: number; worker: string; step_us: number };
  most_waited_for: { rank: number; worker: string; own_wait_us: number; others_wait_us: number };
}

export interface DistributedResponse {
  world_size: number;
  backend: string | null;
  ranks: RankStats[];
  steps: string[];
  communication_by_step: number[][];
  straggler: Straggler | null;
  groups: GroupStragglers[];
  notes: string[];
  /** which rows `ranks` holds (older servers: every rank, in rank order) */
  page: DistributedPage;
  /** over every rank; null from older servers */
  totals: DistributedTotals | null;
  /** communication by rank and step over every rank (binned beyond 1,024); null from older servers */
  heatmap: DistributedHeatmap | null;
}

/** Rows per page a paged job offers (the server sends at most `EXPORT_LIMIT`). */
export const PAGE_SIZES = [50, 100, 200] as const;
/** Rows one request may ask for (the server's bound): the CSV export's page. */
export const EXPORT_LIMIT = 1024;

/** The sort keys of ./distributed that are rank-table columns (docs/api/openapi.yaml): on a paged job only these
 * columns sort, since the server sorts every rank (by Host, Process or GPU it cannot). */
export const RANK_SORTS: readonly string[] = [
  "rank", "worker", "step_us", "computation_us", "communication_us", "overlap_us", "other_us", "transfer_us",
  "sync_us", "host_wait_us", "wait_us", "own_us", "host_idle_us",
];

/** The rank table's search (the key of its one search box): worker, host or rank, on the server for a paged job. */
export const RANK_SEARCH = "worker";

/** The query parameters of ./distributed for a page of the rank table (no sort, or one the server cannot take:
 * the server's default, rank order; the search as `q`). */
export function pageParams(q: ServerQuery): Record<string, string> {
  const out: Record<string, string> = { offset: String(q.offset), limit: String(q.limit) };
  if (q.sort && RANK_SORTS.includes(q.sort.key)) {
    out["sort"] = q.sort.key;
    out["order"] = q.sort.dir;
  }
  const search = (q.queries[RANK_SEARCH] ?? "").trim();
  if (search) out["q"] = search;
  return out;
}

/** True when the answer holds only part of the job's ranks (then the rank table pages on the server). */
export function isPaged(data: DistributedResponse): boolean {
  return data.page.total > data.ranks.length || data.page.offset > 0;
}

/** Which rows of the job an answer holds (`total` the search matches of the job's `ranks`), and the sort the server
 * applied: what the rank table shows of it. */
export function serverPage(page: DistributedPage, ranks: number): { page: ServerPage; sort: { key: string; dir: SortDir } } {
  return { page: { offset: page.offset, total: page.total, unfiltered: ranks }, sort: { key: page.sort, dir: page.order === "desc" ? "desc" : "asc" } };
}

/**
 * Every rank in the order of `q` (all pages), for the CSV export: pages of `EXPORT_LIMIT` rows, asked for one after
 * the other until the job's total is reached (or a page comes back short).
 */
export async function everyRank(q: ServerQuery, fetchPage: (q: ServerQuery) => Promise<DistributedResponse>): Promise<RankStats[]> {
  return allPages(q, EXPORT_LIMIT, async (p) => {
    const page = await fetchPage(p);
    return { rows: page.ranks, total: page.page.total };
  });
}

// ------------------------------------------------------------------------------------------- help

export const HELP = {
  step: "Mean wall time of a step on this rank (ProfilerStep start to the end of the GPU work it launched).",
  computation: "GPU kernel time (CPU work on CPU-only ranks) that does not overlap communication, mean per step.",
  communication: "Time in which a collective ran, mean per step: its NCCL (or other device) kernel, or its host span when it launched none (Gloo, CPU-only runs). The Overview's Communication category uses the same definition.",
  overlap: "Time in which computation kernels ran while a device collective was running (communication hidden behind computation), mean per step. n/a on CPU-only ranks and where collectives ran on the host only: host time cannot be overlapped with GPU kernels.",
  other: "Step time with neither computation nor communication (host-side work, data loading, idle), mean per step.",
  transfer: "The fastest rank's duration of each collective: time really spent moving data (mean per step).",
  sync: "Time waiting in collectives for other ranks: the collective's time on this rank beyond the fastest rank's (mean per step).",
  hostWait: "Host blocked in cudaDeviceSynchronize/cudaStreamSynchronize/cudaEventSynchronize or a scalar read (.item()), mean per step.",
  wait: "Waiting for the other ranks, each stall counted once, mean per step: the union of the collectives' waiting part (Sync) and the host blocked in synchronisation (Host wait). The host often blocks on the very collective that waits, so the two columns overlap: this one does not add them up.",
  own: "Step time less Wait (once): this rank's own time, mean per step. The straggler is the rank with the most, where the others wait clearly more.",
  hostIdle: "Host time with no recorded activity (no operator, runtime call or Python function), mean per step: sleep, I/O or unprofiled work.",
  bandwidth: "Effective bandwidth: bytes / transfer time (bytes = max(input, output) elements × dtype size).",
  heatmap: "Communication time of each rank in each step. A rank much lighter than the others usually arrives last (the others wait for it).",
} as const;

export const COLORS = {
  computation: "#4e79a7",
  overlap: "#b07aa1",
  communication: "#59a14f",
  other: "#9e9e9e",
  transfer: "#59a14f",
  sync: "#e15759",
};

export const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
export const us = (v: unknown): number => num(v) ?? 0;

/** Labels that stay unique when two traces claim the same rank (then the worker tells them apart). */
export function rankLabels(ranks: readonly RankStats[]): string[] {
  const seen = new Map<number, number>();
  for (const r of ranks) seen.set(r.rank, (seen.get(r.rank) ?? 0) + 1);
  return ranks.map((r) => ((seen.get(r.rank) ?? 0) > 1 ? `${r.rank} · ${r.worker}` : String(r.rank)));
}

export function normalize(raw: DistributedResponse): DistributedResponse {
  const ranks = (Array.isArray(raw.ranks) ? raw.ranks : []).map((r) => ({
    ...r,
    collectives: Array.isArray(r.collectives) ? r.collectives : [],
  }));
  return {
    world_size: num(raw.world_size) ?? ranks.length,
    backend: typeof raw.backend === "string" ? raw.backend : null,
    ranks,
    steps: Array.isArray(raw.steps) ? raw.steps.map(String) : [],
    communication_by_step: Array.isArray(raw.communication_by_step) ? raw.communication_by_step : [],
    straggler: raw.straggler && typeof raw.straggler.text === "string" ? raw.straggler : null,
    groups: Array.isArray(raw.groups) ? raw.groups.filter((g) => typeof g.group === "string" && typeof g.slowest === "object" && typeof g.most_waited_for === "object") : [],
    notes: Array.isArray(raw.notes) ? raw.notes.filter((n) => typeof n === "string") : [],
    page: normalPage(raw.page, ranks.length),
    totals: raw.totals && typeof raw.totals === "object" ? raw.totals : null,
    heatmap: raw.heatmap && Array.isArray(raw.heatmap.mean) ? raw.heatmap : null,
  };
}

function normalPage(page: DistributedPage | null | undefined, rows: number): DistributedPage {
  if (page && typeof page.total === "number" && Array.isArray(page.positions)) return page;
  return { offset: 0, limit: Math.max(1, rows), total: rows, sort: "rank", order: "asc", positions: Array.from({ length: rows }, (_, i) => i) };
}

