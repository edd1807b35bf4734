/** traceViewport.ts: the Trace view's time axis, zoom, pan, glide and held keys, on hand-checked numbers. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ANIMATE_MS,
  anchorX,
  clampView,
  glideAt,
  keyMotion,
  MIN_SPAN_US,
  panView,
  plotWidth,
  pxToUs,
  timeToX,
  xToTime,
  zoomView,
} from "../src/views/trace/traceViewport";

// a 1,100 px canvas with a 100 px label column: 1,000 px of plot for 1,000..3,000 µs, 2 µs a pixel
const AXIS = { width: 1100, labelW: 100, view: { start: 1000, end: 3000 } };

describe("time and pixels", () => {
  it("maps the plot's edges to the range's ends and back", () => {
    assert.equal(plotWidth(AXIS), 1000);
    assert.equal(timeToX(AXIS, 1000), 100);
    assert.equal(timeToX(AXIS, 3000), 1100);
    assert.equal(timeToX(AXIS, 2000), 600);
    assert.equal(xToTime(AXIS, 600), 2000);
    assert.equal(xToTime(AXIS, timeToX(AXIS, 1234.5)), 1234.5);
    assert.equal(pxToUs(AXIS, 10), 20);
  });

  it("never divides by a plot narrower than a pixel", () => {
    assert.equal(plotWidth({ width: 50, labelW: 100 }), 1);
  });
});

describe("clampView", () => {
  const bounds: [number, number] = [0, 10_000];

  it("passes a valid range unchanged", () => {
    assert.deepEqual(clampView({ start: 1000, end: 3000 }, bounds), { start: 1000, end: 3000 });
  });

  it("widens a range narrower than 50 ns around its centre", () => {
    const v = clampView({ start: 500, end: 500 }, bounds);
    assert.ok(Math.abs(v.end - v.start - MIN_SPAN_US) < 1e-9 && Math.abs((v.start + v.end) / 2 - 500) < 1e-9);
  });

  it("narrows a range wider than 1.5 traces, and brings its centre back into the trace", () => {
    assert.deepEqual(clampView({ start: -50_000, end: 50_000 }, bounds), { start: -7500, end: 7500 }); // centre 0: on the edge
    assert.deepEqual(clampView({ start: 20_000, end: 22_000 }, bounds), { start: 9000, end: 11_000 });
  });

  it("without bounds only the narrow limit applies; a NaN range becomes the narrowest", () => {
    assert.deepEqual(clampView({ start: -1e9, end: 1e9 }, null), { start: -1e9, end: 1e9 });
    const v = clampView({ start: 0, end: Number.NaN }, null);
    assert.ok(Number.isNaN(v.start) || v.end - v.start <= MIN_SPAN_US + 1e-9);
  });
});

describe("zoom and pan", () => {
  it("keeps the time under the anchor pixel in place", () => {
    const v = zoomView(AXIS, 0.5, 300); // 300 px is 1,400 µs
    assert.deepEqual(v, { start: 1200, end: 2200 });
    assert.equal(xToTime({ ...AXIS, view: v }, 300), 1400);
    assert.deepEqual(zoomView(AXIS, 2, 600), { start: 0, end: 4000 });
  });

  it("stops at the narrowest range", () => {
    const v = zoomView(AXIS, 1e-12, 600);
    assert.ok(Math.abs(v.end - v.start - MIN_SPAN_US) < 1e-9);
  });

  it("anchors at the pointer over the plot, else the mouse, else the centre", () => {
    assert.equal(anchorX(AXIS, 300, 900), 300);
    assert.equal(anchorX(AXIS, 50, 900), 900); // over the labels: the mouse
    assert.equal(anchorX(AXIS, null, 20), 600); // the mouse over the labels too: the centre
    assert.equal(anchorX(AXIS, 1200, null), 600);
  });

  it("pans by a time", () => {
    assert.deepEqual(panView({ start: 10, end: 20 }, -5), { start: 5, end: 15 });
  });
});

describe("glides and held keys", () => {
  const g = { from: { start: 0, end: 1000 }, to: { start: 4000, end: 4010 }, t0: 100 };

  it("starts at the origin and ends exactly at the target", () => {
    assert.deepEqual(glideAt(g, 100), { view: { start: 0, end: 1000 }, done: false });
    assert.deepEqual(glideAt(g, 100 + ANIMATE_MS), { view: { start: 4000, end: 4010 }, done: true });
  });

  it("changes the span geometrically: halfway through the eased time the span is the geometric mean", () => {
    // eased progress e = 1 - (1 - p)^3 is 0.5 at p = 1 - 0.5^(1/3)
    const p = 1 - 0.5 ** (1 / 3);
    const { view, done } = glideAt(g, 100 + p * ANIMATE_MS);
    assert.equal(done, false);
    assert.ok(Math.abs(view.end - view.start - Math.sqrt(1000 * 10)) < 1e-6);
    assert.ok(Math.abs((view.start + view.end) / 2 - (500 + 4005) / 2) < 1e-6);
  });

  it("W/S zoom by e^(∓1.8·dt), A/D pan by 1.1 spans a second, other keys nothing", () => {
    assert.deepEqual(keyMotion("w", 100, 0.5), { zoom: Math.exp(-0.9) });
    assert.deepEqual(keyMotion("s", 100, 0.5), { zoom: Math.exp(0.9) });
    assert.deepEqual(keyMotion("a", 100, 0.5), { pan: -55.00000000000001 });
    assert.deepEqual(keyMotion("d", 100, 0.5), { pan: 55.00000000000001 });
    assert.equal(keyMotion("q", 100, 0.5), null);
  });
});
