/**
 * The Distributed page's table columns: ranks (means per step), process groups (their stragglers) and the
 * collectives of one rank.
 */
import { h } from "../../dom";
import { formatBytes, formatDuration, formatExactUs, formatFixed, formatInt } from "../../format";
import type { Column } from "../common/table";
import { type CollectiveStats, type GroupStragglers, HELP, num, type RankStats } from "./distributedData";

function gpuNames(r: RankStats): string {
  const devices = Array.isArray(r.devices) ? r.devices : [];
  const names = devices.map((d) => (d.name ? (devices.length > 1 && d.id !== null && d.id !== undefined ? `${String(d.id)}: ${d.name}` : d.name) : null));
  const shown = names.filter((n): n is string => n !== null);
  return shown.length ? shown.join(", ") : "—";
}

function gpuTitle(r: RankStats): string {
  const devices = Array.isArray(r.devices) ? r.devices : [];
  if (!devices.length) return "No GPU activity recorded on this rank.";
  return devices.map((d) => `GPU ${String(d.id ?? "?")}: ${d.name ?? "unknown"}`).join("\n") + "\n(GPUs this rank's trace used)";
}

function durationColumn(key: keyof RankStats, label: string, help: string): Column<RankStats> {
  return {
    key,
    label,
    help,
    numeric: true,
    value: (r) => num(r[key]),
    text: (r) => formatDuration(num(r[key])),
    exact: (r) => formatExactUs(num(r[key])),
    csvHeader: `${label} (µs per step)`,
  };
}

/** Overlap, or "n/a" with the server's reason where it cannot be measured. */
function overlapColumn(): Column<RankStats> {
  const column = durationColumn("overlap_us", "Overlap", HELP.overlap);
  return {
    ...column,
    text: (r) => (r.overlap_us === null ? "n/a" : formatDuration(num(r.overlap_us))),
    title: (r) => (r.overlap_us === null ? (r.overlap_note ?? "n/a") : `${formatExactUs(num(r.overlap_us))}\n${HELP.overlap}`),
  };
}

/** One line per distinct reason why some ranks have no overlap number (empty when every rank has one). */
export function overlapNotes(ranks: readonly RankStats[], labels: readonly string[]): string[] {
  const byReason = new Map<string, string[]>();
  ranks.forEach((r, i) => {
    if (r.overlap_us !== null) return;
    const reason = r.overlap_note ?? "n/a";
    byReason.set(reason, [...(byReason.get(reason) ?? []), labels[i] ?? String(r.rank)]);
  });
  return [...byReason].map(([reason, who]) => `Overlap on rank${who.length > 1 ? "s" : ""} ${who.join(", ")}: ${reason} The chart shows their communication as not overlapped.`);
}

/** The rank table's columns; `trace` renders a row's link to that rank's Trace view; `serverSorts`: on a job paged
 * on the server, the columns it sorts by (the others do not sort: the page's own rows only would). */
export function rankColumns(labels: Map<RankStats, string>, trace: (r: RankStats) => HTMLElement | null, serverSorts: readonly string[] | null = null): Column<RankStats>[] {
  const columns: Column<RankStats>[] = [
    {
      key: "rank",
      label: "Rank",
      numeric: true,
      help: "The rank (from the trace's distributedInfo, else the worker name's trailing number).",
      value: (r) => r.rank,
      text: (r) => labels.get(r) ?? String(r.rank),
    },
    {
      key: "worker",
      label: "Worker",
      value: (r) => r.worker,
      render: (r) => h("span", {}, r.worker, trace(r)),
      cls: "ptp-nowrap",
    },
    { key: "host", label: "Host", value: (r) => r.host ?? null, cls: "ptp-nowrap" },
    { key: "process", label: "Process", help: "The host process id (pid) of the rank.", numeric: true, value: (r) => r.process ?? null },
    { key: "gpu", label: "GPU", value: (r) => gpuNames(r), title: gpuTitle, cls: "ptp-nowrap" },
    durationColumn("step_us", "Step time", HELP.step),
    durationColumn("computation_us", "Computation", HELP.computation),
    durationColumn("communication_us", "Communication", HELP.communication),
    overlapColumn(),
    durationColumn("other_us", "Other", HELP.other),
    durationColumn("transfer_us", "Transfer", HELP.transfer),
    durationColumn("sync_us", "Sync (wait)", HELP.sync),
    durationColumn("host_wait_us", "Host wait", HELP.hostWait),
    durationColumn("wait_us", "Wait (once)", HELP.wait),
    durationColumn("own_us", "Own time", HELP.own),
    durationColumn("host_idle_us", "Host idle", HELP.hostIdle),
  ];
  return serverSorts ? columns.map((c) => (serverSorts.includes(c.key) ? c : { ...c, sortable: false })) : columns;
}

const who = (r: { rank: number; worker: string }): string => `rank ${String(r.rank)} (${r.worker})`;

export function groupColumns(): Column<GroupStragglers>[] {
  return [
    { key: "group", label: "Process group", value: (g) => g.group, cls: "ptp-name-col" },
    { key: "ranks", label: "Ranks", numeric: true, help: "Ranks that ran collectives in this group.", value: (g) => num(g.ranks), text: (g) => formatInt(g.ranks) },
    { key: "matched", label: "Matched collectives", numeric: true, help: "Collectives every rank has, matched by (process group, sequence number).", value: (g) => num(g.matched), text: (g) => formatInt(g.matched) },
    { key: "waited", label: "Most waited for", help: "The member that waits least in the group's matched collectives while the others wait: it arrives last.", value: (g) => g.most_waited_for.rank, text: (g) => who(g.most_waited_for) },
    {
      key: "others_wait",
      label: "Others wait",
      numeric: true,
      help: "Mean wait per step of the other members in this group's matched collectives (their time beyond the fastest rank's).",
      value: (g) => num(g.most_waited_for.others_wait_us),
      text: (g) => formatDuration(num(g.most_waited_for.others_wait_us)),
      exact: (g) => formatExactUs(num(g.most_waited_for.others_wait_us)),
      csvHeader: "Others wait (µs per step)",
    },
    { key: "own_wait", label: "Its own wait", numeric: true, help: "The same for the most waited-for rank.", value: (g) => num(g.most_waited_for.own_wait_us), text: (g) => formatDuration(num(g.most_waited_for.own_wait_us)), csvHeader: "Its own wait (µs per step)" },
    { key: "slowest", label: "Slowest rank", help: "The member with the most time of its own per step (step less its wait, each stall once): the measure the straggler call-out uses, so the two never name different ranks.", value: (g) => g.slowest.rank, text: (g) => who(g.slowest) },
    { key: "slowest_step", label: "Its step", numeric: true, help: HELP.step, value: (g) => num(g.slowest.step_us), text: (g) => formatDuration(num(g.slowest.step_us)), csvHeader: "Its step (µs)" },
  ];
}

export function collectiveColumns(): Column<CollectiveStats>[] {
  const dur = (key: "total_us" | "avg_us" | "transfer_us", label: string, help: string): Column<CollectiveStats> => ({
    key,
    label,
    help,
    numeric: true,
    value: (c) => num(c[key]),
    text: (c) => formatDuration(num(c[key])),
    exact: (c) => formatExactUs(num(c[key])),
    csvHeader: `${label} (µs)`,
  });
  return [
    { key: "name", label: "Collective", value: (c) => c.name, cls: "ptp-name-col" },
    {
      key: "calls",
      label: "Calls",
      numeric: true,
      help: "Collectives this rank issued in the profiled window (host call and kernel counted once). Kernels that ran in the window but were launched before it (warm-up) are shown as \"+N earlier\": their time counts, they are not calls of this window.",
      value: (c) => num(c.calls),
      text: (c) => (num(c.prelaunched ?? 0) ? `${formatInt(c.calls)} (+${formatInt(c.prelaunched)} earlier)` : formatInt(c.calls)),
    },
    {
      key: "bytes",
      label: "Bytes",
      numeric: true,
      help: "Data size over all calls: max(input, output) elements × dtype size.",
      value: (c) => num(c.bytes),
      text: (c) => formatBytes(num(c.bytes)),
      exact: (c) => `${formatInt(c.bytes)} B`,
      csvHeader: "Bytes",
    },
    dur("total_us", "Total", "Time in which this collective ran on this rank, within the steps (as the rank table)."),
    dur("avg_us", "Avg latency", "Total / calls."),
    dur("transfer_us", "Transfer", HELP.transfer.replace(" (mean per step)", " (summed over the steps: the collectives' transfer adds up to the rank table's Transfer × steps)")),
    {
      key: "bandwidth_gbps",
      label: "Bandwidth",
      numeric: true,
      help: HELP.bandwidth,
      value: (c) => num(c.bandwidth_gbps),
      text: (c) => (num(c.bandwidth_gbps) === null ? "—" : `${formatFixed(c.bandwidth_gbps, 1)} GB/s`),
      exact: (c) => (num(c.bandwidth_gbps) === null ? "no data moved or no transfer time" : `${String(c.bandwidth_gbps)} GB/s`),
      csvHeader: "Bandwidth (GB/s)",
    },
  ];
}

