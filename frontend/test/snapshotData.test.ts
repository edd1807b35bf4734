/** views/memory/snapshotData.ts and the shell's snapshots: bands in a window, what lies under the pointer, zoom
 * windows, colours, sentences; a run's snapshots become workers of one span in the pickers. */
import "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSnapshot, normalizeRuns, SNAPSHOT_SPAN } from "../src/app";
import {
  bandAt,
  bandOffset,
  bandRuns,
  byteTicks,
  columnOfPosition,
  drawnTop,
  frameColor,
  lifetimeText,
  momentLabel,
  NO_STACK,
  oomSentence,
  type SnapshotAllocation,
  type SnapshotBand,
  type SnapshotOom,
  type SnapshotWindow,
  userFirst,
  windowOfColumns,
  zoomAround,
} from "../src/views/memory/snapshotData";
import { OTHER_COLOR, PALETTE } from "../src/views/common/charts";

const MiB = 1024 ** 2;

function band(id: number, size: number, first: number, end: number, steps: number[]): SnapshotBand {
  return { id, size, frame: 0, category: "activation", start: first * 10, end: end * 10, first_column: first, end_column: end, steps };
}

// 4 columns of 10 positions each: a (4 MiB) lives throughout; b (2 MiB) from column 1 to 2 on top of a; c (1 MiB)
// from column 2 on, on top of b, dropping onto a when b is freed in column 3; 1 MiB of smaller ones in column 2
const win: SnapshotWindow = {
  device: 0, start: 0, end: 39, positions: 100, first: [0, 10, 20, 30], at: [5, 15, 25, 35], time_us: [null, null, null, null],
  live_bytes: [4 * MiB, 6 * MiB, 8 * MiB, 5 * MiB], reserved_bytes: [8 * MiB, 8 * MiB, 8 * MiB, 8 * MiB],
  other_bytes: [0, 0, MiB, 0], y_max: 8 * MiB, smaller_than_bytes: 8192,
  bands: [band(0, 4 * MiB, 0, 4, [0, 0]), band(1, 2 * MiB, 1, 3, [1, 4 * MiB]), band(2, MiB, 2, 4, [2, 6 * MiB, 3, 4 * MiB])],
  frames: [{ file: "/u/train.py", line: 3, name: "f", kind: "user", label: "train.py:3 f" }],
};

describe("bands in a window", () => {
  it("runs and offsets follow the steps", () => {
    const c = win.bands[2] as SnapshotBand;
    assert.deepEqual(bandRuns(c), [[2, 3, 6 * MiB], [3, 4, 4 * MiB]]);
    assert.deepEqual([0, 1, 2, 3].map((k) => bandOffset(c, k)), [null, null, 6 * MiB, 4 * MiB]);
    assert.equal(drawnTop(win, 2), 7 * MiB);
  });

  it("what lies under the pointer: a band, the smaller allocations on top, or nothing", () => {
    assert.equal((bandAt(win, 2, 6.5 * MiB) as SnapshotBand).id, 2);
    assert.equal((bandAt(win, 3, 4.5 * MiB) as SnapshotBand).id, 2);
    assert.equal((bandAt(win, 1, 5 * MiB) as SnapshotBand).id, 1);
    assert.equal(bandAt(win, 2, 7.5 * MiB), "other");
    assert.equal(bandAt(win, 3, 5.5 * MiB), null);
    assert.equal(bandAt(win, 9, MiB), null);
  });

  it("positions map to columns, and columns or a zoom to the window to ask for", () => {
    assert.deepEqual([0, 9, 10, 39, 40].map((p) => columnOfPosition(win, p)), [0, 0, 1, 3, -1]);
    assert.deepEqual(windowOfColumns(win, 2, 1), { start: 10, end: 29 });
    assert.deepEqual(windowOfColumns(win, 3, 3), { start: 30, end: 39 });
    assert.deepEqual(zoomAround(win, 2, 0.5), { start: 10, end: 29 });
    assert.deepEqual(zoomAround(win, 0, 10), { start: 0, end: 99 });
  });
});

describe("words and colours", () => {
  it("a frame keeps its colour; no stack is grey", () => {
    assert.equal(frameColor("train.py:3 f"), frameColor("train.py:3 f"));
    assert.ok(PALETTE.includes(frameColor("train.py:3 f")));
    assert.equal(frameColor(NO_STACK), OTHER_COLOR);
  });

  it("moments and lifetimes", () => {
    assert.equal(momentLabel(1234, 2_001_500, 1_000_000), "entry 1,234 · +1,001.50 ms");
    assert.equal(momentLabel(7, null, 1), "entry 7");
    assert.equal(momentLabel(-1, null, null), "before the history");
    const a: SnapshotAllocation = { id: 1, size_bytes: MiB, block_bytes: null, address: 0, start: 3, end: null, start_us: 1_000_500, end_us: null, lifetime_us: null, category: "parameter", frame: "x", stack_is_free: false };
    assert.equal(lifetimeText(a, 1_000_000), "allocated at entry 3 · +0.50 ms, live at the end");
    assert.equal(lifetimeText({ ...a, start: -1, end: 9, end_us: 1_002_000, lifetime_us: null }, 1_000_000), "allocated before the history, freed at entry 9 · +2.00 ms");
  });

  it("an out-of-memory's verdict", () => {
    const oom: SnapshotOom = { position: 9, time_us: null, requested_bytes: 12 * MiB, device_free_bytes: 0, limit_bytes: null, live_bytes: 48 * MiB,
      reserved_bytes: 100 * MiB, free_in_reserved_bytes: 52 * MiB, largest_free_bytes: 4 * MiB, reason: "fragmentation", count: 1, step: 2, frame: "train.py:44 forward" };
    assert.equal(oomSentence(oom), "In step 2, train.py:44 forward asked for 12.0 MiB. Fragmentation: 52.0 MiB was free in the reserved segments, but no block larger than 4.00 MiB.");
    assert.match(oomSentence({ ...oom, reason: "live_data", limit_bytes: 1536 * MiB, step: null }), /^train\.py:44 forward asked for .* Live data: 48.0 MiB was live, only 52.0 MiB of the 100 MiB reserved was free, and the process may use 1.50 GiB \(set_per_process_memory_fraction\)\.$/);
  });

  it("user frames first; byte ticks are round", () => {
    assert.deepEqual(userFirst([{ kind: "cpp", n: 1 }, { kind: "user", n: 2 }, { kind: "library", n: 3 }, { kind: "user", n: 4 }]).map((f) => f.n), [2, 4, 1, 3]);
    assert.deepEqual(byteTicks(8 * MiB), [0, 2 * MiB, 4 * MiB, 6 * MiB, 8 * MiB]);
    assert.deepEqual(byteTicks(0), [0]);
  });
});

describe("the shell's snapshots", () => {
  it("a run's snapshots are workers of one span; a run of snapshots only is kept; a name clash keeps the trace", () => {
    const runs = normalizeRuns({
      runs: [
        { name: "oom", workers: [], snapshots: [{ name: "oom.pickle", file: "oom.pickle", size_bytes: 10, mtime: 5, state: "failed", error: "oom.pickle: refused: …" }] },
        { name: "mix", workers: [{ name: "w", spans: [{ span: "1", key: "1", mtime: 1, state: "ready", progress: 1, error: null, file: "w.1.pt.trace.json", size_bytes: 1 }] }],
          snapshots: [{ name: "s.pickle", file: "s.pickle", size_bytes: 3, mtime: 2, state: "ready", error: null }, { name: "w", state: "bogus" }, { nope: 1 }] },
      ],
      logdir: "/x", scanning: false, errors: [],
    });
    const [oom, mix] = runs.runs;
    assert.ok(oom && mix);
    assert.deepEqual(oom.workers.map((w) => [w.name, w.spans[0]?.span, w.spans[0]?.state, w.spans[0]?.error]), [["oom.pickle", SNAPSHOT_SPAN, "failed", "oom.pickle: refused: …"]]);
    assert.deepEqual(mix.workers.map((w) => [w.name, isSnapshot(mix, w)]), [["w", false], ["s.pickle", true]]);
    assert.deepEqual(mix.snapshots.map((s) => s.name), ["s.pickle"]);
  });
});
