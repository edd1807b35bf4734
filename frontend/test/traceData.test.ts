/** views/traceData.ts: a ./trace/window answer turned into the typed arrays the Trace renderer walks. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  PALETTE_SIZE,
  colourOf,
  formatBytesShort,
  formatCounter,
  firstMarkedLane,
  formatTick,
  locate,
  lowerBound,
  makePalette,
  niceStep,
  parseWindow,
  stepLane,
  stepOfRange,
  tickUnit,
} from "../src/views/trace/traceData";
import type { TraceWindowResponse } from "../src/views/trace/traceTypes";

/** Two tracks: a CPU thread with two depths (one event and one box at depth 0, one event at depth 1) and a
 * collapsed GPU stream with no lane in this window; a flow, two steps, a counter with a gap. */
function answer(): TraceWindowResponse {
  return {
    t0: 1_000_000,
    t1: 1_000_500,
    px_us: 0.5,
    bounds: [999_000, 1_002_000],
    names: ["aten::mm", "aten::add", "ProfilerStep#3"],
    tracks: [
      {
        id: 4,
        kind: "cpu",
        label: "thread 7",
        process: "python (100)",
        depths: 2,
        collapsed: false,
        lanes: [
          { depth: 0, events: { t: [10, 200], d: [100, 50], n: [0, 1], id: [11, 12] }, boxes: { t: [300], d: [2], count: [5], busy: [0.4], n: [1] } },
          { depth: 1, events: { t: [20], d: [30], n: [1], id: [13] }, boxes: { t: [], d: [], count: [], busy: [], n: [] } },
        ],
      },
      { id: 9, kind: "gpu", label: "stream 7", process: "GPU 0", depths: 0, collapsed: true, lanes: [] },
    ],
    flows: [[11, 4, 10, 13, 4, 20]],
    flows_truncated: false,
    steps: [["ProfilerStep#3", -50, 400], ["ProfilerStep#4", 350, 300]],
    counters: [{ name: "GPU 0 utilization", unit: "fraction", values: [0.25, null, 0.75] }],
  };
}

describe("parseWindow", () => {
  const data = parseWindow(answer(), "9");

  it("keeps the window, bounds, names and the levels key", () => {
    assert.equal(data.t0, 1_000_000);
    assert.equal(data.t1, 1_000_500);
    assert.equal(data.pxUs, 0.5);
    assert.deepEqual(data.bounds, [999_000, 1_002_000]);
    assert.deepEqual(data.names, ["aten::mm", "aten::add", "ProfilerStep#3"]);
    assert.equal(data.levelsKey, "9");
  });

  it("turns lanes into typed arrays by depth and counts what will be drawn", () => {
    const cpu = data.trackById.get(4);
    assert.ok(cpu);
    const lane0 = cpu.lanes[0];
    const lane1 = cpu.lanes[1];
    assert.ok(lane0 && lane1);
    assert.ok(lane0.et instanceof Float64Array && lane0.en instanceof Int32Array && lane0.ec instanceof Uint8Array);
    assert.deepEqual([...lane0.et], [10, 200]);
    assert.deepEqual([...lane0.ed], [100, 50]);
    assert.deepEqual([...lane0.eid], [11, 12]);
    assert.deepEqual([...lane0.en], [0, 1]);
    assert.deepEqual([...lane0.ec], [colourOf("aten::mm"), colourOf("aten::add")]);
    assert.deepEqual([...lane0.bcount], [5]);
    assert.deepEqual([...lane0.bbusy], [0.4]);
    assert.deepEqual([...lane0.bc], [colourOf("aten::add")]);
    assert.equal(lane1.depth, 1);
    assert.equal(data.eventCount, 3);
    assert.equal(data.boxCount, 1);
  });

  it("keeps a track's kind and at least one depth, collapsed or not", () => {
    const gpu = data.trackById.get(9);
    assert.ok(gpu);
    assert.equal(gpu.kind, "gpu");
    assert.equal(gpu.depths, 1);
    assert.equal(gpu.collapsed, true);
    assert.deepEqual(gpu.lanes, []);
  });

  it("makes steps absolute and counters typed, a null as NaN outside the maximum", () => {
    assert.deepEqual(data.steps, [
      { name: "ProfilerStep#3", start: 999_950, dur: 400 },
      { name: "ProfilerStep#4", start: 1_000_350, dur: 300 },
    ]);
    const counter = data.counters[0];
    assert.ok(counter);
    assert.equal(counter.values[0], 0.25);
    assert.ok(Number.isNaN(counter.values[1]));
    assert.equal(counter.max, 0.75);
    assert.deepEqual(data.flows, [[11, 4, 10, 13, 4, 20]]);
  });

  it("tolerates an answer with missing lists", () => {
    const bare = parseWindow({ ...answer(), tracks: undefined, names: undefined, steps: undefined, counters: undefined, flows: undefined } as unknown as TraceWindowResponse, "");
    assert.deepEqual([bare.tracks.length, bare.names.length, bare.steps.length, bare.counters.length, bare.flows.length], [0, 0, 0, 0, 0]);
  });
});

describe("locate", () => {
  it("finds an event drawn in the window by id, with its absolute start", () => {
    const data = parseWindow(answer(), "");
    assert.deepEqual(locate(data, 12), { id: 12, track: 4, depth: 0, start: 1_000_200, dur: 50, name: "aten::add" });
    assert.deepEqual(locate(data, 13), { id: 13, track: 4, depth: 1, start: 1_000_020, dur: 30, name: "aten::add" });
    assert.equal(locate(data, 999), null);
    assert.ok(data.index && data.index.size === 3); // built once, then reused
  });
});

describe("colours", () => {
  it("colourOf is stable, in the palette, and ignores a trailing #number", () => {
    const c = colourOf("ProfilerStep#3");
    assert.equal(c, colourOf("ProfilerStep#12"));
    assert.equal(c, colourOf("ProfilerStep"));
    assert.ok(c >= 0 && c < PALETTE_SIZE);
    const spread = new Set(["aten::mm", "aten::add", "aten::conv2d", "cudaLaunchKernel", "nccl:all_reduce", "Memcpy HtoD"].map(colourOf));
    assert.ok(spread.size >= 4, `names should spread over the palette, got ${spread.size} colours`);
  });

  it("makePalette gives one fill per hue, darker in the dark theme", () => {
    const light = makePalette(false);
    const dark = makePalette(true);
    assert.equal(light.fill.length, PALETTE_SIZE);
    assert.equal(light.fill[0], "hsl(210 55% 64%)");
    assert.equal(dark.fill[0], "hsl(210 45% 40%)");
    assert.ok(light.darkText.every(Boolean) && dark.darkText.every((d) => !d));
  });
});

describe("rulers and numbers", () => {
  it("lowerBound: the first index not below the value", () => {
    const arr = Float64Array.from([1, 3, 3, 7]);
    assert.deepEqual([0, 1, 2, 3, 4, 7, 8].map((v) => lowerBound(arr, v)), [0, 0, 1, 1, 3, 3, 4]);
    assert.equal(lowerBound(new Float64Array(0), 5), 0);
  });

  it("niceStep: 1, 2 or 5 × 10^k, at least the minimum", () => {
    assert.deepEqual([0.7, 1, 1.2, 3, 7, 45, 0.013].map(niceStep), [1, 1, 2, 5, 10, 50, 0.02]);
    assert.equal(niceStep(0), 1);
    assert.equal(niceStep(NaN), 1);
  });

  it("tickUnit and formatTick: the unit of the furthest label, the decimals the step needs", () => {
    assert.deepEqual(tickUnit(999), { us: 1, suffix: "µs" });
    assert.deepEqual(tickUnit(1000), { us: 1000, suffix: "ms" });
    assert.deepEqual(tickUnit(2_000_000), { us: 1_000_000, suffix: "s" });
    assert.equal(formatTick(2500, 500, tickUnit(5000)), "2.5 ms");
    assert.equal(formatTick(2500, 1000, tickUnit(5000)), "3 ms");
    assert.equal(formatTick(12_345_000, 20_000, tickUnit(2e7)), "12.35 s");
    assert.equal(formatTick(40, 20, tickUnit(100)), "40 µs");
  });

  it("formatBytesShort and formatCounter", () => {
    assert.equal(formatBytesShort(512), "512 B");
    assert.equal(formatBytesShort(1536), "1.5 KiB");
    assert.equal(formatBytesShort(3 * 1024 ** 3), "3.00 GiB");
    assert.equal(formatCounter(0.256, "fraction"), "25.6%");
    assert.equal(formatCounter(1024 ** 2 * 20, "bytes"), "20.0 MiB");
    assert.equal(formatCounter(1234, "count"), "1,234");
    assert.equal(formatCounter(12.345, "GB/s"), "12.35 GB/s");
    assert.equal(formatCounter(NaN, "bytes"), "—");
  });
});

describe("steps on screen", () => {
  it("stepLane finds the host lane of a step's ProfilerStep event, and the skipped levels are read", () => {
    const resp = answer();
    const cpu = resp.tracks[0];
    if (!cpu) throw new Error("no track");
    cpu.skipped = 7;
    cpu.lanes[1] = { ...cpu.lanes[1], events: { t: [20], d: [30], n: [2], id: [13] } } as (typeof cpu.lanes)[number];
    const data = parseWindow(resp, "");
    assert.equal(data.tracks[0]?.skipped, 7);
    assert.deepEqual(stepLane(data, "3"), { track: 4, depth: 1 });
    assert.equal(stepLane(data, "4"), null);
    assert.equal(parseWindow(answer(), "").tracks[0]?.skipped, 0); // older servers: nothing skipped
  });

  it("firstMarkedLane: the first lane holding a highlighted event or box, in the tracks' order", () => {
    assert.equal(firstMarkedLane(parseWindow(answer(), "")), null); // nothing highlighted
    const resp = answer();
    const cpu = resp.tracks[0];
    if (!cpu) throw new Error("no track");
    cpu.lanes[1] = { ...cpu.lanes[1], events: { t: [20], d: [30], n: [1], id: [13], hl: [1] } } as (typeof cpu.lanes)[number];
    assert.deepEqual(firstMarkedLane(parseWindow(resp, "")), { track: 4, depth: 1 });
    cpu.lanes[0] = { ...cpu.lanes[0], events: { t: [10, 200], d: [100, 50], n: [0, 1], id: [11, 12], hl: [0, 0] }, boxes: { t: [300], d: [2], count: [5], busy: [0.4], n: [1], hl: [0.5] } } as (typeof cpu.lanes)[number];
    assert.deepEqual(firstMarkedLane(parseWindow(resp, "")), { track: 4, depth: 0 }); // a marked box counts too
  });

  it("stepOfRange: the step covering at least half of a linked range", () => {
    const steps = [{ name: "2", start: 0, dur: 100 }, { name: "3", start: 100, dur: 100 }];
    assert.equal(stepOfRange(steps, 98, 202)?.name, "3");
    assert.equal(stepOfRange(steps, -2, 102)?.name, "2");
    assert.equal(stepOfRange(steps, 300, 400), null);
    assert.equal(stepOfRange(steps, 50, 260), null); // no step covers half of it
  });
});
