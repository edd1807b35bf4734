/**
 * The Trace view's controllers' pure parts, on hand-checked cases: the flow arrows of a selection
 * (traceSelection.selectionArrows), the view that reveals an event (revealTarget), the tracks a drawn range spans
 * (traceRange.rangeTracks), wheel deltas in pixels and the tooltip's text (traceInput).
 */
import { container } from "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseWindow, type TraceEventResponse, type TraceWindowResponse } from "../src/views/trace/traceData";
import { tooltipContent, wheelPixels } from "../src/views/trace/traceInput";
import type { Row } from "../src/views/trace/traceLayout";
import { rangeTracks } from "../src/views/trace/traceRange";
import { revealTarget, selectionArrows } from "../src/views/trace/traceSelection";
import type { Selected } from "../src/views/trace/traceState";

/** One CPU thread (track 4) with events 11 (depth 0, at t0+10) and 13 (depth 1, at t0+20), a flow 11 → 13. */
function window(): TraceWindowResponse {
  return {
    t0: 1_000_000, t1: 1_000_500, px_us: 0.5, bounds: [999_000, 1_002_000], names: ["aten::mm", "aten::add"],
    tracks: [{
      id: 4, kind: "cpu", label: "thread 7", process: "python (100)", depths: 2, skipped: 0, shown_depths: 2, collapsed: false,
      lanes: [
        { depth: 0, events: { t: [10], d: [100], n: [0], id: [11] }, boxes: { t: [], d: [], count: [], busy: [], n: [] } },
        { depth: 1, events: { t: [20], d: [30], n: [1], id: [13] }, boxes: { t: [], d: [], count: [], busy: [], n: [] } },
      ],
    }],
    flows: [[11, 4, 10, 13, 4, 20, 0, 1]], flows_truncated: false, steps: [], counters: [],
  };
}

const selected = (id: number, depth: number | null, details: TraceEventResponse | null = null): Selected =>
  ({ id, name: "aten::mm", track: 4, depth, start: 1_000_010, dur: 100, details });

describe("selectionArrows", () => {
  it("draws the window's flows from and to the selected event, the far end's lane located in the window", () => {
    const data = parseWindow(window(), "");
    assert.deepEqual(selectionArrows(selected(11, 0), data), [
      { from: { track: 4, depth: 0, t: 1_000_010 }, to: { track: 4, depth: 1, t: 1_000_020 } },
    ]);
    // the selected end keeps the selection's own depth (it may be known before the window has it)
    assert.deepEqual(selectionArrows(selected(13, 5), data)[0]?.to, { track: 4, depth: 5, t: 1_000_020 });
    assert.deepEqual(selectionArrows(selected(99, 0), data), []);
    assert.deepEqual(selectionArrows(null, data), []);
  });

  it("adds the details' launch partners once, and none with no track", () => {
    const details = {
      id: 11, track: 4, start_us: 1_000_010,
      launched_by: null,
      launched: [{ id: 13, track: 4, start_us: 1_000_020 }, { id: 77, track: 9, start_us: 1_000_400 }, { id: 78, track: null, start_us: 1 }],
    } as unknown as TraceEventResponse;
    const arrows = selectionArrows(selected(11, 0, details), parseWindow(window(), ""));
    assert.deepEqual(arrows.map((a) => [a.to.track, a.to.depth, a.to.t]), [[4, 1, 1_000_020], [9, null, 1_000_400]]);
    // without a window: the details alone, far depths unknown
    assert.deepEqual(selectionArrows(selected(11, 0, details), null).map((a) => a.to.depth), [null, null]);
  });
});

describe("revealTarget", () => {
  const view = { start: 0, end: 1000 }; // 1,000 µs over 500 px: 0.5 px a µs
  it("zooms in to 12 times an event under 4 px (20 µs at least), centred on it", () => {
    assert.deepEqual(revealTarget({ start_us: 500, dur_us: 2 }, view, 500), { start: 489, end: 513 }); // 1 px: 24 µs
    assert.deepEqual(revealTarget({ start_us: 100, dur_us: 1 }, view, 500), { start: 90.5, end: 110.5 }); // 20 µs
  });
  it("zooms out around an event filling 90 % of the view, centres one off screen, else keeps the view", () => {
    assert.deepEqual(revealTarget({ start_us: 0, dur_us: 950 }, view, 500), { start: -95, end: 1045 });
    assert.deepEqual(revealTarget({ start_us: 1900, dur_us: 100 }, view, 500), { start: 1450, end: 2450 });
    assert.equal(revealTarget({ start_us: 200, dur_us: 100 }, view, 500), view);
  });
});

describe("rangeTracks", () => {
  const track = (id: number, y: number): Row => ({
    kind: "track", y, h: 20, label: `t${id}`, collapsed: false, lanes: 1, levels: null,
    track: { id, kind: "cpu", label: `t${id}`, process: "p", depths: 1, skipped: 0 },
  });
  const rows: Row[] = [
    { kind: "process", y: 0, h: 18, key: "p", label: "p", folded: false, trackIds: [1, 2] },
    track(1, 18), track(2, 38),
    { kind: "process", y: 58, h: 18, key: "q", label: "q", folded: true, trackIds: [7, 8] },
    track(3, 76),
  ];
  it("lists the tracks the box overlaps, a folded process as its tracks", () => {
    assert.deepEqual(rangeTracks(rows, { y0: 20, y1: 30 }, 7), [1]);
    assert.deepEqual(rangeTracks(rows, { y0: 38, y1: 60 }, 7), [2, 7, 8]);
    assert.deepEqual(rangeTracks(rows, { y0: 37.9, y1: 38 }, 7), [1]); // touching the next row's top is not in it
  });
  it("means every track (null) with no height, no track spanned or all of them", () => {
    assert.equal(rangeTracks(rows, { y0: null, y1: null }, 7), null);
    assert.equal(rangeTracks(rows, { y0: 0, y1: 10 }, 7), null); // an unfolded process's header only
    assert.equal(rangeTracks(rows, { y0: 0, y1: 200 }, 5), null);
  });
});

describe("traceInput", () => {
  it("turns wheel lines and pages into pixels", () => {
    assert.equal(wheelPixels({ deltaMode: 0 }, 30, 700), 30);
    assert.equal(wheelPixels({ deltaMode: 1 }, 3, 700), 48);
    assert.equal(wheelPixels({ deltaMode: 2 }, -1, 700), -700);
  });

  it("says what the pointer is over, times from the trace's start", () => {
    container();
    const event = tooltipContent({ kind: "event", id: 1, track: 4, depth: 0, start: 1_250, dur: 1_500, name: "aten::mm" }, 1_000);
    assert.equal(event?.textContent, "aten::mm1.500 ms · at +250.00 µs");
    const box = tooltipContent({ kind: "box", track: 4, depth: 0, start: 0, dur: 40, count: 12_345, busy: 0.426, name: "aten::add" }, 0);
    assert.equal(box?.textContent, "12,345 eventsmostly aten::add40.000 µs span · 43% busy · click to zoom in");
    assert.equal(tooltipContent({ kind: "ruler", t: 5 }, 0), null);
    assert.equal(tooltipContent(null, 0), null);
  });
});
