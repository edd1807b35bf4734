/** capture/captureData.ts: the run offered first, the job line, the request body, rank rows and when to open. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type CaptureProgress,
  type CaptureTarget,
  jobLine,
  listed,
  openTarget,
  pickTarget,
  rankRows,
  ranksNotShown,
  requestBody,
  SHOWN_RANKS,
  targetLabel,
} from "../src/capture/captureData";
import type { RunsResponse } from "../src/types";

const target = (run: string, listening: number): CaptureTarget => ({ run, listening, heard_s: listening ? 2 : null });

function progress(over: Partial<CaptureProgress>): CaptureProgress {
  return {
    id: "0123456789abcdef", run: "job", state: "written", done: true, summary: "2 of 2 ranks written: steps 11–13",
    message: null, steps: 3, start_step: 10, world_size: 2, span: "1795738053740002619", created: 0, deadline: 60,
    requester: "page", options: { activities: ["cpu"], record_shapes: false, profile_memory: false, with_stack: false },
    files: ["rank0.1795738053740002619.pt.trace.json.gz", "rank1.1795738053740002619.pt.trace.json.gz"],
    ranks: [0, 1].map((r) => ({
      rank: r, worker: `rank${r}`, state: "written" as const, step: 13, file: `rank${r}.1795738053740002619.pt.trace.json.gz`,
      reason: null, host: "vm",
    })),
    ranks_left_out: 0,
    ...over,
  };
}

describe("targets", () => {
  it("labels a run by the ranks listening there", () => {
    assert.equal(targetLabel(target("job", 4)), "job · 4 ranks listening");
    assert.equal(targetLabel(target("job", 1)), "job · 1 rank listening");
    assert.equal(targetLabel(target("old", 0)), "old · no job listening");
  });
  it("offers the run on screen if a job listens there, else the first one listened in", () => {
    const targets = [target("job", 4), target("other", 2), target("old", 0)];
    assert.equal(pickTarget(targets, "other"), "other");
    assert.equal(pickTarget(targets, "old"), "job");
    assert.equal(pickTarget([target("old", 0), target("older", 0)], "older"), "older");
    assert.equal(pickTarget([target("old", 0)], undefined), "old");
    assert.equal(pickTarget([], "x"), undefined);
  });
});

describe("jobLine", () => {
  it("says how many ranks listen, the step and the rate", () => {
    assert.equal(jobLine({ listening: 8, ended: false, world_size: 8, step: 40012, steps_per_s: 12.345, heard_s: 3 }),
      "Job listening: 8 ranks, step 40,012 (12.3 steps/s), heard 3 s ago.");
    assert.equal(jobLine({ listening: 3, ended: false, world_size: 8, step: 7, steps_per_s: 0, heard_s: null }),
      "Job listening: 3 of 8 ranks, step 7.");
  });
  it("says when nobody listens or the job ended", () => {
    assert.match(jobLine(null), /^No job is listening in this run's folder/);
    assert.equal(jobLine({ listening: 0, ended: true, world_size: 2, step: 9, steps_per_s: 0, heard_s: 1 }),
      "The job that listened here has ended.");
  });
});

describe("requestBody", () => {
  const form = { steps: 3, activities: ["cuda", "cpu"], recordShapes: true, profileMemory: false, withStack: true };
  it("builds the POST body in the whitelist's order", () => {
    assert.deepEqual(requestBody(form), {
      steps: 3, activities: ["cpu", "cuda"], record_shapes: true, profile_memory: false, with_stack: true, deadline_s: 60,
    });
  });
  it("says what is wrong instead", () => {
    assert.equal(requestBody({ ...form, steps: 0 }), "Steps must be a whole number from 1 to 50.");
    assert.equal(requestBody({ ...form, steps: 2.5 }), "Steps must be a whole number from 1 to 50.");
    assert.equal(requestBody({ ...form, steps: 51 }), "Steps must be a whole number from 1 to 50.");
    assert.equal(requestBody({ ...form, activities: ["gpu"] }), "Choose at least one activity to trace.");
  });
});

describe("progress", () => {
  it("lists each rank with its file or reason", () => {
    const failed = progress({
      state: "failed",
      ranks: [
        { rank: 0, worker: "rank0", state: "written", step: 13, file: "rank0.1.pt.trace.json.gz", reason: "cuda not available on this host", host: "a" },
        { rank: 1, worker: "rank1", state: "missing", step: null, file: null, reason: "never answered the request", host: "" },
      ],
    });
    assert.deepEqual(rankRows(failed), [
      { rank: "rank0", state: "written", step: "13", detail: "rank0.1.pt.trace.json.gz · cuda not available on this host" },
      { rank: "rank1", state: "never answered", step: "", detail: "never answered the request" },
    ]);
    assert.equal(openTarget(failed), null);
  });
  it("shows the first ranks of many and counts the others", () => {
    const row = progress({}).ranks[0];
    assert.ok(row);
    const many = progress({ ranks: Array.from({ length: 100 }, (_, r) => ({ ...row, rank: r, worker: `rank${r}` })), ranks_left_out: 5 });
    assert.equal(rankRows(many).length, SHOWN_RANKS);
    assert.equal(ranksNotShown(many), 100 - SHOWN_RANKS + 5);
  });
  it("opens the new span on the first rank once it is listed on every rank that wrote", () => {
    const done = progress({});
    const open = openTarget(done);
    assert.deepEqual(open, { run: "job", worker: "rank0", span: "1795738053740002619" });
    const span = (key: string) => ({ span: "1", key, mtime: 0, state: "ready" as const, progress: 1, error: null, file: "f", size_bytes: 1, updating: false });
    const runs = (workers: string[], key: string): RunsResponse => ({
      runs: [{ name: "job", snapshots: [], workers: workers.map((name) => ({ name, spans: [span(key)] })) }], logdir: "/l", scanning: false, errors: [],
    });
    assert.equal(listed(runs(["rank0"], "1795738053740002619"), open, done), false);
    assert.equal(listed(runs(["rank0", "rank1"], "1"), open, done), false);
    assert.equal(listed(runs(["rank0", "rank1"], "1795738053740002619"), open, done), true);
    assert.equal(openTarget(progress({ state: "capturing", done: false })), null);
  });
});
