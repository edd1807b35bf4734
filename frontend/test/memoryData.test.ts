/** views/memoryData.ts: the Memory page's pure helpers (device order, time origin, units, filters, zoom). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  SIZE_UNITS,
  axisUnit,
  compareDevices,
  defaultDevice,
  deviceList,
  eventKey,
  minBytesOf,
  normalizeCurve,
  peakLabel,
  peakOf,
  rangeFileSuffix,
  rangeText,
  relayoutRange,
  rowsOf,
  timeOrigin,
  type CurveDevice,
  type MemoryEvent,
  type MemoryStat,
} from "../src/views/memory/memoryData";
import { formatMs, formatSignedBytes } from "../src/format";

function event(device: string, size: number, alloc: number | null, free: number | null): MemoryEvent {
  return { name: "aten::empty", device, size_bytes: size, alloc_us: alloc, free_us: free, lifetime_us: null, addr: 1 };
}

function stat(device: string): MemoryStat {
  return { name: "aten::mm", device, calls: 1, size_increase_bytes: 0, self_size_increase_bytes: 0, allocation_count: 1,
    self_allocation_count: 1, allocation_size_bytes: 8, self_allocation_size_bytes: 8 };
}

describe("normalizeCurve", () => {
  it("keeps devices with a points array and the reason; drops anything malformed", () => {
    const curve = normalizeCurve({
      reason: null,
      devices: { GPU0: { points: [[10, 1, 2]], peak_allocated_bytes: 1 }, CPU: { points: "nope" }, GPU1: null },
      start_us: 5,
    });
    assert.deepEqual(Object.keys(curve.devices), ["GPU0"]);
    assert.equal(curve.reason, null);
    assert.equal(curve.start_us, 5);
    assert.deepEqual(normalizeCurve(null), { reason: null, devices: {} });
    assert.deepEqual(normalizeCurve({ reason: "no memory records", devices: [], start_us: NaN }), { reason: "no memory records", devices: {} });
  });
});

describe("devices", () => {
  it("compareDevices: CPU, then GPUs in numeric order, then other families, then anything else", () => {
    const sorted = ["weird", "XPU0", "GPU10", "GPU2", "CPU", "GPU0", "MTIA1"].sort(compareDevices);
    assert.deepEqual(sorted, ["CPU", "GPU0", "GPU2", "GPU10", "MTIA1", "XPU0", "weird"]);
  });

  it("deviceList gathers curves, events and statistics; defaultDevice prefers a GPU with a curve", () => {
    const curve = normalizeCurve({ reason: null, devices: { CPU: { points: [[1, 1, 1]] }, GPU1: { points: [] } } });
    const devices = deviceList(curve, ["GPU0"], [stat("GPU1"), stat("CPU")]);
    assert.deepEqual(devices, ["CPU", "GPU0", "GPU1"]);
    assert.equal(defaultDevice(devices, curve), "CPU"); // the only device with a curve of points
    const withGpu = normalizeCurve({ reason: null, devices: { CPU: { points: [[1, 1, 1]] }, GPU1: { points: [[2, 3, 4]] } } });
    assert.equal(defaultDevice(devices, withGpu), "GPU1");
    assert.equal(defaultDevice(["CPU", "GPU3"], normalizeCurve({})), "GPU3");
    assert.equal(defaultDevice([], normalizeCurve({})), undefined);
  });
});

describe("timeOrigin", () => {
  it("is the backend's start, else the earliest sample, else the earliest event, else 0", () => {
    const events = [event("GPU0", 1, 700, 900), event("GPU0", 1, null, 650)];
    assert.equal(timeOrigin(normalizeCurve({ devices: {}, start_us: 42 }), events), 42);
    const curve = normalizeCurve({ devices: { GPU0: { points: [[500, 1, 1]] }, CPU: { points: [[300, 1, 1]] } } });
    assert.equal(timeOrigin(curve, events), 300);
    assert.equal(timeOrigin(normalizeCurve({}), events), 650);
    assert.equal(timeOrigin(normalizeCurve({}), []), 0);
  });
});

describe("units and formatting", () => {
  it("axisUnit picks the largest unit the maximum reaches; SIZE_UNITS go up", () => {
    assert.equal(axisUnit(3 * 1024 ** 3).label, "GiB");
    assert.equal(axisUnit(1024 ** 2).label, "MiB");
    assert.equal(axisUnit(1023).label, "B");
    assert.equal(axisUnit(0).label, "B");
    assert.deepEqual(SIZE_UNITS.map((u) => u.label), ["B", "KiB", "MiB", "GiB"]);
  });

  it("formatSignedBytes and formatMs", () => {
    assert.equal(formatSignedBytes(-1.5 * 1024 ** 2), "−1.50 MiB");
    assert.equal(formatSignedBytes(512), "512 B");
    assert.equal(formatSignedBytes(null), "—");
    assert.equal(formatMs(12_345), "12.35 ms");
    assert.equal(formatMs(undefined), "—");
  });
});

describe("relayoutRange", () => {
  it("reads plotly's x-range events, in order, one end from the current range", () => {
    assert.deepEqual(relayoutRange({ "xaxis.range": [5, 2] }), [2, 5]);
    assert.deepEqual(relayoutRange({ "xaxis.range[0]": 1, "xaxis.range[1]": "3.5" }), [1, 3.5]);
    assert.deepEqual(relayoutRange({ "xaxis.range[1]": 9 }, [4, 6]), [4, 9]);
    assert.equal(relayoutRange({ "xaxis.autorange": true }), "reset");
    assert.equal(relayoutRange({ "yaxis.range": [0, 1] }), null);
    assert.equal(relayoutRange({ "xaxis.range[0]": "x", "xaxis.range[1]": 2 }), null);
    assert.equal(relayoutRange({ "xaxis.range[1]": 9 }), null); // no current range to take the start from
  });
});

describe("peak, filter, range and row identity", () => {
  const dev = (points: [number, number, number][], extra: Record<string, number> = {}): CurveDevice =>
    ({ points, peak_allocated_bytes: Number.NaN, ...extra });

  it("peakOf: the server's peak when it sends bytes and time, else the sample with the most allocated", () => {
    assert.deepEqual(peakOf(dev([[10, 5, 9]], { peak_allocated_bytes: 700, peak_time_us: 42 })), { bytes: 700, t: 42 });
    assert.deepEqual(peakOf(dev([[10, 5, 9], [20, 80, 90], [30, 60, 90]])), { bytes: 80, t: 20 });
    // bytes without a time: the server's bytes, the largest sample's time
    assert.deepEqual(peakOf(dev([[10, 5, 9], [20, 80, 90]], { peak_allocated_bytes: 96 })), { bytes: 96, t: 20 });
  });

  it("peakLabel: bytes and ms from the origin", () => {
    assert.equal(peakLabel(dev([[1_000, 1024, 0], [13_345, 1.5 * 1024 ** 3, 0]]), 1_000), "Peak 1.50 GiB at 12.35 ms");
  });

  it("minBytesOf: the number times its unit; nothing, negative or text filters nothing", () => {
    assert.equal(minBytesOf("1.5", "1024"), 1536);
    assert.equal(minBytesOf("2", "1048576"), 2 * 1024 ** 2);
    assert.equal(minBytesOf("3", ""), 3);
    assert.equal(minBytesOf("", "1024"), 0);
    assert.equal(minBytesOf("-4", "1024"), 0);
    assert.equal(minBytesOf("abc", "1024"), 0);
  });

  it("rangeText and rangeFileSuffix: ms from the origin", () => {
    assert.equal(rangeText([13_000, 15_500], 1_000), "12.00 ms – 14.50 ms");
    assert.equal(rangeText(null, 1_000), "whole trace");
    assert.equal(rangeFileSuffix([13_000, 1_235_000], 1_000), "12.00ms-1,234.00ms");
    assert.equal(rangeFileSuffix(null, 0), "");
  });

  it("eventKey and rowsOf", () => {
    assert.equal(eventKey({ device: "GPU0", addr: 4096, alloc_us: 12, free_us: null }), "GPU0\u00004096\u000012\u0000");
    assert.deepEqual(rowsOf({ rows: [1, 2] }), [1, 2]);
    assert.deepEqual(rowsOf(null), []);
    assert.deepEqual(rowsOf({ rows: "x" } as never), []);
  });
});
