/** views/memoryChart.ts: the Memory page's curve figure (units, peak marker, zoomed range, marked allocation). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { memoryFigure } from "../src/views/memory/memoryChart";
import type { CurveDevice, MemoryEvent } from "../src/views/memory/memoryData";

const MiB = 1024 ** 2;
// samples at 1, 3 and 5 ms after the origin (1,000 µs): allocated 1, 4, 2 MiB; reserved 8 MiB throughout
const dev: CurveDevice = { points: [[2_000, MiB, 8 * MiB], [4_000, 4 * MiB, 8 * MiB], [6_000, 2 * MiB, 8 * MiB]], peak_allocated_bytes: 4 * MiB, peak_time_us: 4_000 };

function event(alloc: number | null, free: number | null): MemoryEvent {
  return { name: "aten::empty", device: "GPU0", size_bytes: 3 * MiB, alloc_us: alloc, free_us: free, lifetime_us: null, addr: 1 };
}

type Trace = { name: string; x: number[]; y: number[] };

describe("memoryFigure", () => {
  it("draws allocated and reserved in MiB over ms from the origin, with the peak marked", () => {
    const fig = memoryFigure({ dev, origin: 1_000, range: null, marked: null }, "light");
    const [allocated, reserved, peak] = fig.data as unknown as [Trace, Trace, Trace];
    assert.deepEqual(allocated.x, [1, 3, 5]);
    assert.deepEqual(allocated.y, [1, 4, 2]);
    assert.deepEqual(reserved.y, [8, 8, 8]);
    assert.deepEqual([peak.name, peak.x, peak.y], ["Peak", [3], [4]]);
    assert.deepEqual(fig.layout.yaxis?.title, { text: "Memory (MiB)" });
    assert.equal(fig.layout.annotations?.[0]?.text, "<b>Peak 4.00 MiB at 3.00 ms</b>");
    assert.equal(fig.layout.xaxis?.autorange, true);
    assert.deepEqual(fig.layout.shapes, []);
  });

  it("a zoomed range fixes the x-axis; a marked allocation is a band with its edges", () => {
    const fig = memoryFigure({ dev, origin: 1_000, range: [2_000, 5_000], marked: event(2_500, 4_500) }, "dark");
    assert.deepEqual(fig.layout.xaxis?.range, [1, 4]);
    const shapes = fig.layout.shapes ?? [];
    assert.deepEqual(shapes.map((s): unknown[] => [s.type, s.x0, s.x1]), [["rect", 1.5, 3.5], ["line", 1.5, 1.5], ["line", 3.5, 3.5]]);
    assert.equal(fig.layout.annotations?.[1]?.text, " aten::empty · 3.00 MiB · alloc 1.50 ms → free 3.50 ms ");
  });

  it("an allocation from before the trace and never freed spans the whole curve, with no edges", () => {
    const fig = memoryFigure({ dev, origin: 1_000, range: null, marked: event(null, null) }, "light");
    const shapes = fig.layout.shapes ?? [];
    assert.deepEqual(shapes.map((s): unknown[] => [s.type, s.x0, s.x1]), [["rect", 1, 5]]);
    assert.equal(fig.layout.annotations?.[1]?.text, " aten::empty · 3.00 MiB · allocated before the trace → not freed in the trace ");
  });
});
