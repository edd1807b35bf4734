/**
 * The Trace view's pure logic (npm test, node:test): time formats never show
 * "+-" or "-0", labels are elided to their room, each step once, deep host threads open a few levels deep.
 */
import { describe, it } from "node:test";
import { elide, formatCounter, formatOffset, formatTick, mergeSteps, tickUnit, type Step, type TrackMeta } from "../src/views/trace/traceData";
import { formatTime } from "../src/format";
import { HOST_LEVELS, LANE_H, TRACK_PAD, buildLayout, defaultLevels, type TrackRow } from "../src/views/trace/traceLayout";

type Case = [string, () => void];

function eq(actual: unknown, expected: unknown): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`expected ${e}, got ${a}`);
}

/** A monospace font: 6 px a character. */
const mono = (s: string): number => s.length * 6;

const ms = tickUnit(5000);

const track = (id: number, kind: "cpu" | "gpu", depths: number, process: string): TrackMeta =>
  ({ id, kind, label: kind === "gpu" ? `${process} · stream ${id}` : `thread ${id}`, process, depths, skipped: 0 });

export const cases: Case[] = [
  ["an offset before the trace start has one sign", () => {
    eq(formatOffset(-101.64), "\u2212101.64 µs");
    eq(formatOffset(1234.6), "+1.235 ms");
    eq(formatOffset(-2_500_000), "\u22122.500 s");
  }],
  ["an offset that rounds to zero has no sign", () => {
    eq(formatOffset(0), "0 µs");
    eq(formatOffset(-0.0001), "0 ns");
    eq(formatOffset(0.0004), "0 ns");
  }],
  ["durations never read -0", () => {
    eq(formatTime(-0.0004), "0 ns");
    eq(formatTime(-0.4), "-400 ns");
    eq(formatTime(12.3456), "12.346 µs");
  }],
  ["a ruler tick a hair below zero is 0, not -0", () => {
    eq(ms.suffix, "ms");
    eq(formatTick(-1e-9, 1000, ms), "0 ms");
    eq(formatTick(-0.2, 500, ms), "0.0 ms");
    eq(formatTick(-2000, 1000, ms), "-2 ms");
    eq(formatTick(2500, 500, ms), "2.5 ms");
  }],
  ["a trickle of bandwidth is not shown as 0.00", () => {
    eq(formatCounter(0.0016663954434499592, "GB/s"), "0.0017 GB/s");
    eq(formatCounter(10.778808866045615, "GB/s"), "10.78 GB/s");
    eq(formatCounter(0, "GB/s"), "0.00 GB/s");
  }],
  ["a label that fits is kept whole", () => {
    eq(elide("Step 9", 36, mono), "Step 9");
  }],
  ["a label too wide is cut with an ellipsis inside its room", () => {
    const out = elide("ProfilerStep#9", 50, mono);
    eq(out, "Profile…");
    if (out === null || mono(out) > 50) throw new Error("overflows");
  }],
  ["a label with no room is not drawn", () => {
    eq(elide("ProfilerStep#10", 11, mono), null);
    eq(elide("ProfilerStep#10", 0, mono), null);
    eq(elide("", 100, mono), null);
  }],
  ["every elided label stays inside its band", () => {
    for (let room = 0; room < 120; room++) {
      const out = elide("ProfilerStep#10", room, mono);
      if (out !== null && mono(out) > room) throw new Error(`${out} in ${room} px`);
    }
  }],
  ["a step seen in two windows, starts a rounding apart, is one step", () => {
    const first: Step[] = [{ name: "9", start: 1623143089861000.25, dur: 177600 }];
    const second: Step[] = [
      { name: "10", start: 1623143090038600.5, dur: 177000 },
      { name: "9", start: 1623143089861000.5, dur: 177600 },
    ];
    eq(mergeSteps(first, second).map((s) => [s.name, s.start]), [["9", 1623143089861000.25], ["10", 1623143090038600.5]]);
    eq(mergeSteps(mergeSteps(first, second), second).length, 2);
  }],
  ["steps come out in time order", () => {
    const steps: Step[] = [{ name: "3", start: 30, dur: 5 }, { name: "2", start: 20, dur: 5 }, { name: "4", start: 40, dur: 5 }];
    eq(mergeSteps([], steps).map((s) => s.name), ["2", "3", "4"]);
  }],
  ["deep host threads open a few levels deep; GPU streams and shallow threads whole", () => {
    eq(defaultLevels({ kind: "cpu", depths: 28 }), HOST_LEVELS);
    eq(defaultLevels({ kind: "cpu", depths: HOST_LEVELS + 1 }), null);
    eq(defaultLevels({ kind: "gpu", depths: 40 }), null);
  }],
  ["a limited thread offers its hidden levels, an expanded deep one offers fewer", () => {
    const tracks = [track(0, "gpu", 3, "GPU 0"), track(1, "cpu", 28, "python3 (699)"), track(2, "cpu", 8, "python3 (699)")];
    const limited = buildLayout(tracks, [], new Map([[1, HOST_LEVELS]]), new Set());
    const rows = limited.rows.filter((r): r is TrackRow => r.kind === "track");
    eq(rows.map((r) => [r.track.id, r.lanes, r.levels, r.collapsed]), [[0, 3, null, false], [1, HOST_LEVELS, "more", false], [2, 8, "fewer", false]]);
    eq(rows[1]?.h, HOST_LEVELS * LANE_H + TRACK_PAD);
    // GPU 0's header and stream come before the host process
    eq(limited.rows.map((r) => r.kind), ["process", "track", "process", "track", "track"]);
    const collapsed = buildLayout(tracks, [], new Map([[1, 1]]), new Set());
    eq(collapsed.trackRows.get(1)?.collapsed, true);
    eq(collapsed.trackRows.get(1)?.levels, null);
  }],
];

describe("the Trace view's pure logic", () => {
  for (const [name, fn] of cases) it(name, fn);
});
