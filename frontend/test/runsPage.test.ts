/** runsPage.ts: the shell's page of ./runs for logdirs of thousands of runs (and an older server's whole listing). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RUNS_PAGE, attentionOf, busyOf, moreRunsText, needsSearch, pageInfo, runCountText, runsQuery } from "../src/runsPage";
import type { RunInfo, RunsResponse, SpanInfo } from "../src/types";

function span(label: string, state: SpanInfo["state"], extra: Partial<SpanInfo> = {}): SpanInfo {
  return { span: label, key: label, mtime: 0, state, progress: 0, error: null, file: `w.${label}.pt.trace.json`, size_bytes: 1, updating: false, ...extra };
}

const run = (name: string, ...spans: SpanInfo[]): RunInfo => ({ name, workers: [{ name: "w", spans }], snapshots: [] });
const resp = (runs: RunInfo[], scanning = false): RunsResponse => ({ runs, logdir: "/l", scanning, errors: [] });
const asSpan = (v: unknown): SpanInfo | null => (typeof v === "object" && v !== null && "span" in v ? (v as SpanInfo) : null);

describe("runsQuery", () => {
  it("asks for a page, with the search and the run on screen", () => {
    assert.deepEqual(runsQuery("", undefined), { limit: RUNS_PAGE });
    assert.deepEqual(runsQuery("  resnet ", "a/b"), { limit: RUNS_PAGE, q: "resnet", run: "a/b" });
  });
});

describe("a page answer", () => {
  const raw = {
    total_runs: 5000,
    matched: 5000,
    newest: "run4999",
    states: { queued: 4000, loading: 2, ready: 990, failed: 8, updating: 0 },
    attention: [
      { run: "run0001", worker: "w", ...span("1", "queued") },
      { run: "run0002", worker: "w", ...span("1", "loading", { progress: 0.5 }) },
      { run: "run0003", worker: "w", ...span("1", "failed", { error: "w.1.pt.trace.json: broken" }) },
      { run: 7, worker: "w", ...span("1", "failed") }, // malformed: left out
    ],
  };
  const runs = [run("run0000", span("1", "ready"))];
  const page = pageInfo(raw, runs, asSpan);

  it("reads the counts and the spans that need attention", () => {
    assert.equal(page.totalRuns, 5000);
    assert.equal(page.newest, "run4999");
    assert.deepEqual(page.states, { queued: 4000, loading: 2, ready: 990, failed: 8, updating: 0 });
    assert.equal(page.attention?.length, 3);
  });

  it("tells of loading spans first (parsed, then queued) and counts every span", () => {
    const a = attentionOf(resp(runs), page);
    assert.deepEqual(a.loading.map((s) => s.run), ["run0002", "run0001"]);
    assert.deepEqual(a.failed.map((s) => s.run), ["run0003"]);
    assert.equal(a.loadingTotal, 4002);
    assert.equal(a.failedTotal, 8);
  });

  it("is busy while any run loads, though the listed ones are ready", () => {
    assert.equal(busyOf(resp(runs), page), true);
    const idle = pageInfo({ ...raw, states: { queued: 0, loading: 0, ready: 5000, failed: 0, updating: 0 } }, runs, asSpan);
    assert.equal(busyOf(resp(runs), idle), false);
    const updating = pageInfo({ ...raw, states: { queued: 0, loading: 0, ready: 5000, failed: 0, updating: 1 } }, runs, asSpan);
    assert.equal(busyOf(resp(runs), updating), true);
  });

  it("shows the search box and what the page left out", () => {
    assert.equal(needsSearch(page, ""), true);
    assert.equal(runCountText(page, 1, ""), "5,000 runs");
    assert.equal(moreRunsText(page, 200), "… 4,800 more: type to search");
    const found = pageInfo({ ...raw, matched: 12 }, runs, asSpan);
    assert.equal(runCountText(found, 12, "res"), "12 of 5,000 runs match");
    assert.equal(moreRunsText(found, 12), null);
    assert.equal(needsSearch(pageInfo({ ...raw, total_runs: 3, matched: 3 }, runs, asSpan), ""), false);
  });
});

describe("an older server's whole listing", () => {
  const runs = [run("a", span("1", "ready"), span("2", "loading")), run("b", span("1", "failed"))];
  const page = pageInfo({}, runs, asSpan);

  it("counts from the runs it lists", () => {
    assert.equal(page.totalRuns, 2);
    assert.equal(page.states, null);
    const a = attentionOf(resp(runs), page);
    assert.deepEqual([a.loadingTotal, a.failedTotal], [1, 1]);
    assert.equal(busyOf(resp(runs), page), true);
    assert.equal(busyOf(resp([run("a", span("1", "ready"))]), pageInfo({}, [], asSpan)), false);
    assert.equal(busyOf(resp([run("a", span("1", "ready", { updating: true }))]), null), true);
    assert.equal(needsSearch(page, ""), false);
    assert.equal(runCountText(page, 2, ""), "2 runs");
  });
});
