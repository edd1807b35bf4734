/** views/diff/diffLink.ts: a Diff link's experiment is checked and what it leaves out is said, never guessed silently. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { linkedExperiment } from "../src/views/diff/diffLink";
import type { RunInfo } from "../src/types";

const span = (n: string, key: string) => ({ span: n, key, file: `w.${key}.pt.trace.json`, state: "ready", progress: 1, error: null, size: 1 });
const runs = [
  { name: "base", workers: [{ name: "w", spans: [span("1", "100"), span("2", "200")] }] },
  { name: "exp", workers: [{ name: "w", spans: [span("1", "300"), span("2", "400")] }, { name: "v", spans: [span("1", "500")] }] },
] as unknown as RunInfo[];
const base = { run: "base", worker: "w", span: "1" };

describe("linkedExperiment", () => {
  it("a link naming all three is taken as it is, by position or by stable key", () => {
    assert.deepEqual(linkedExperiment(runs, base, { exp_run: "exp", exp_worker: "v", exp_span: "1" }), { target: { run: "exp", worker: "v", span: "1" }, note: null });
    assert.deepEqual(linkedExperiment(runs, base, { exp_run: "exp", exp_worker: "w", exp_span: "400" })?.target, { run: "exp", worker: "w", span: "2" });
    assert.equal(linkedExperiment(runs, base, {}), null);
  });

  it("exp_run without exp_span compares that run (the baseline's worker, its first span) and says so", () => {
    const got = linkedExperiment(runs, base, { exp_run: "exp" });
    if (!got) throw new Error("a link with exp_run names an experiment");
    assert.deepEqual(got.target, { run: "exp", worker: "w", span: "1" });
    assert.equal(got.note, "The link does not name the experiment's worker or span: comparing with exp · w · span 1, span 1 of the 2 this worker has.");
    // the same run as the baseline: the first span that is not the baseline
    assert.deepEqual(linkedExperiment(runs, base, { exp_run: "base" })?.target, { run: "base", worker: "w", span: "2" });
  });

  it("a link to what is not there says so instead of comparing another trace", () => {
    assert.deepEqual(linkedExperiment(runs, base, { exp_run: "gone", exp_span: "1" }), { target: null, note: 'The link\'s experiment run "gone" is not in the log directory' });
    assert.equal(linkedExperiment(runs, base, { exp_run: "exp", exp_worker: "x" })?.target, null);
    assert.match(linkedExperiment(runs, base, { exp_run: "exp", exp_worker: "w", exp_span: "9" })?.note ?? "", /has no span "9" \(it has 2\)/);
  });
});
