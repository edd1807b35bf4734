/** format.ts: the one "is this a number" and the formatters every page shows numbers with. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  DASH,
  formatBytes,
  formatCuptiVersion,
  formatDuration,
  formatDurationUs,
  formatExactUs,
  formatFixed,
  formatFlops,
  formatInt,
  formatMs,
  formatPercent,
  formatPercent1,
  formatSignedBytes,
  formatSignedDuration,
  formatSignedPercent,
  formatTime,
  formatValue,
  isNum,
  num,
} from "../src/format";

const NOT_NUMBERS: unknown[] = [null, undefined, NaN, Infinity, -Infinity, "12", {}, [], true];

describe("isNum and num", () => {
  it("accept finite numbers only", () => {
    for (const v of [0, -0, 1.5, -3, Number.MAX_SAFE_INTEGER, 1e-300]) {
      assert.equal(isNum(v), true, String(v));
      assert.equal(num(v), v);
    }
    for (const v of NOT_NUMBERS) {
      assert.equal(isNum(v), false, String(v));
      assert.equal(num(v), null);
    }
  });
});

describe("durations", () => {
  it("formatDuration: µs under 1 ms, then ms with two decimals and grouping", () => {
    assert.equal(formatDuration(0), "0 µs");
    assert.equal(formatDuration(632), "632.0 µs");
    assert.equal(formatDuration(999.94), "999.9 µs");
    assert.equal(formatDuration(114_250), "114.25 ms");
    assert.equal(formatDuration(1_234_567), "1,234.57 ms");
    assert.equal(formatDuration(-1500), "-1.50 ms");
  });

  it("formatMs: always ms, the decimals asked for; formatDurationUs is formatMs(us, 3)", () => {
    assert.equal(formatMs(12_345), "12.35 ms");
    assert.equal(formatMs(12_345, 3), "12.345 ms");
    assert.equal(formatMs(1_234_567.8, 1), "1,234.6 ms");
    assert.equal(formatMs(0), "0.00 ms");
    assert.equal(formatDurationUs(1_504_506), "1,504.506 ms");
    assert.equal(formatDurationUs(null), DASH);
  });

  it("formatTime: ns, µs, ms or s at the precision a timeline needs", () => {
    assert.equal(formatTime(0), "0 µs");
    assert.equal(formatTime(0.85), "850 ns");
    assert.equal(formatTime(12.3456), "12.346 µs");
    assert.equal(formatTime(632.5), "632.50 µs");
    assert.equal(formatTime(1234), "1.234 ms");
    assert.equal(formatTime(2_500_000), "2.500 s");
    assert.equal(formatTime(-1234), "-1.234 ms");
  });

  it("formatExactUs and formatSignedDuration", () => {
    assert.equal(formatExactUs(1504.506), "1,504.506 µs");
    assert.equal(formatExactUs(2), "2 µs");
    assert.equal(formatSignedDuration(7470), "+7.47 ms");
    assert.equal(formatSignedDuration(-58_080), "-58.08 ms");
    assert.equal(formatSignedDuration(632), "+632.0 µs");
    assert.equal(formatSignedDuration(0), "0 µs");
  });
});

describe("bytes", () => {
  it("formatBytes: binary units, fewer decimals as the value grows", () => {
    assert.equal(formatBytes(0), "0 B");
    assert.equal(formatBytes(1023), "1023 B");
    assert.equal(formatBytes(1024), "1.00 KiB");
    assert.equal(formatBytes(1.5 * 1024 ** 2), "1.50 MiB");
    assert.equal(formatBytes(12.34 * 1024 ** 3), "12.3 GiB");
    assert.equal(formatBytes(140 * 1024 ** 3), "140 GiB");
    assert.equal(formatBytes(3 * 1024 ** 5), "3.00 PiB");
    assert.equal(formatBytes(-1), DASH);
  });

  it("formatSignedBytes: a size change keeps its minus sign", () => {
    assert.equal(formatSignedBytes(-1.5 * 1024 ** 2), "−1.50 MiB");
    assert.equal(formatSignedBytes(2048), "2.00 KiB");
    assert.equal(formatSignedBytes(null), DASH);
  });
});

describe("other numbers", () => {
  it("percentages, fixed decimals, integers", () => {
    assert.equal(formatPercent(0.999), "99%");
    assert.equal(formatPercent(1.7), "100%");
    assert.equal(formatPercent(NaN), "0%");
    assert.equal(formatPercent1(0.88), "88.0%");
    assert.equal(formatPercent1(1.234), "123.4%");
    assert.equal(formatSignedPercent(0.649), "+64.9%");
    assert.equal(formatSignedPercent(-0.98), "-98.0%");
    assert.equal(formatSignedPercent(0.0001), "0.0%");
    assert.equal(formatSignedPercent(Infinity), DASH);
    assert.equal(formatFixed(4.478), "4.48");
    assert.equal(formatFixed(1234.5, 0), "1,235");
    assert.equal(formatFixed(1, 4), "1.0000");
    assert.equal(formatInt(1_234_567.4), "1,234,567");
    assert.equal(formatInt(undefined), DASH);
  });

  it("formatValue: a backend scalar as text", () => {
    assert.equal(formatValue(null), DASH);
    assert.equal(formatValue(""), DASH);
    assert.equal(formatValue(true), "yes");
    assert.equal(formatValue(false), "no");
    assert.equal(formatValue(12.5), "12.5");
    assert.equal(formatValue(NaN), DASH);
    assert.equal(formatValue("2.3.0"), "2.3.0");
    assert.equal(formatValue({ a: 1 }), '{"a":1}');
  });

  it("every formatter answers a dash for what is not a number", () => {
    const formatters = [formatBytes, formatDuration, formatMs, formatTime, formatExactUs, formatSignedDuration,
      formatPercent1, formatSignedPercent, formatFixed, formatInt, formatSignedBytes];
    for (const f of formatters) {
      for (const v of [null, undefined, NaN, Infinity]) assert.equal(f(v), DASH, `${f.name}(${String(v)})`);
    }
  });
});

describe("formatFixed never shows a negative zero", () => {
  it("a value that rounds to zero reads 0, a real negative keeps its sign", () => {
    assert.equal(formatFixed(-0.0004, 3), "0.000");
    assert.equal(formatFixed(-0.4, 0), "0");
    assert.equal(formatFixed(-0.5, 0), "-1");
    assert.equal(formatTime(-0.0004), "0 ns");
    assert.equal(formatFixed(-1234.5, 1), "-1,234.5");
  });
});

describe("formatFlops", () => {
  it("uses SI prefixes up to peta with one decimal, and a dash for no number", () => {
    assert.equal(formatFlops(989.5e12), "989.5 TFLOP/s");
    assert.equal(formatFlops(17.57e12), "17.6 TFLOP/s");
    assert.equal(formatFlops(3.36e11, "FLOP"), "336.0 GFLOP");
    assert.equal(formatFlops(1.5e15), "1.5 PFLOP/s");
    assert.equal(formatFlops(12), "12 FLOP/s");
    assert.equal(formatFlops(null), DASH);
    assert.equal(formatFlops(-1), DASH);
  });
});

describe("CUPTI versions", () => {
  it("reads Kineto's number as CUPTI encodes it, never shows it raw", () => {
    assert.equal(formatCuptiVersion(130001), "13.0.1"); // CUDA 13: major·10000 + minor·100 + patch
    assert.equal(formatCuptiVersion(120803), "12.8.3");
    assert.equal(formatCuptiVersion(24), "API version 24"); // CUDA 12.x: CUPTI's API version
    assert.equal(formatCuptiVersion("13.0"), "13.0");
    for (const v of [null, undefined, "", NaN, -1, 0, 1.5]) assert.equal(formatCuptiVersion(v), null);
  });
});
