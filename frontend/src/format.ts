/**
 * Number and value formatting shared by the shell and the view pages: the one place for "is this a number",
 * durations (µs in, people's units out) and bytes. Every formatter answers "—" for what is not a finite number,
 * so a missing field never shows as "NaN" or "undefined".
 */

const intFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export const DASH = "—";

/** A finite number (not NaN, not ±Infinity, not a numeric string). */
export function isNum(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v);
}

/** `v` when it is a finite number, else null (`num(v) ?? 0` where a missing number counts as zero). */
export function num(v: unknown): number | null {
  return isNum(v) ? v : null;
}

export function formatInt(n: number | null | undefined): string {
  return isNum(n) ? intFmt.format(n) : DASH;
}

/** Bytes in binary units with fewer decimals as the value grows: "1023 B", "1.50 MiB", "12.3 GiB", "140 GiB". */
export function formatBytes(bytes: number | null | undefined): string {
  if (!isNum(bytes) || bytes < 0) return DASH;
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${value.toFixed(digits)} ${units[unit] ?? ""}`;
}

/** Microseconds always in ms with `digits` decimals and grouping: "12.35 ms", "1,234.568 ms" (digits 3). */
export function formatMs(us: number | null | undefined, digits = 2): string {
  return isNum(us) ? `${formatFixed(us / 1000, digits)} ms` : DASH;
}

/** Microseconds → "12.345 ms". Kept for views/traceInfo.ts until it calls formatMs(us, 3) itself. */
export function formatDurationUs(us: number | null | undefined): string {
  return formatMs(us, 3);
}

export function formatPercent(fraction: number): string {
  const clamped = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  return `${Math.floor(clamped * 100)}%`;
}

/** Render a scalar from the backend: null → "—", booleans → yes/no. */
export function formatValue(value: unknown): string {
  if (value === null || value === undefined || value === "") return DASH;
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : DASH;
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return DASH;
  }
}


const fixedFormats = new Map<number, Intl.NumberFormat>();

/** A grouped en-US format with exactly `digits` decimals, made once per digit count (formatting is hot). */
function fixed(digits: number): Intl.NumberFormat {
  let format = fixedFormats.get(digits);
  if (!format) {
    format = new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
    fixedFormats.set(digits, format);
  }
  return format;
}

/**
 * Microseconds for people: under 1 ms in µs with one decimal ("632.0 µs"), else in ms with two
 * decimals and grouping ("114.25 ms", "1,234.57 ms"); 0 → "0 µs"; null → "—".
 */
export function formatDuration(us: number | null | undefined): string {
  if (!isNum(us)) return DASH;
  if (us === 0) return "0 µs";
  if (Math.abs(us) < 1000) return `${fixed(1).format(us)} µs`;
  return `${fixed(2).format(us / 1000)} ms`;
}

/** A fraction 0..1 as a percentage with one decimal ("88.0%"); null → "—". Not clamped. */
export function formatPercent1(fraction: number | null | undefined): string {
  if (!isNum(fraction)) return DASH;
  return `${fixed(1).format(fraction * 100)}%`;
}

/** A number with exactly `digits` decimals and grouping ("4.48", "1.00"); null → "—". */
export function formatFixed(n: number | null | undefined, digits = 2): string {
  if (!isNum(n)) return DASH;
  const text = fixed(digits).format(n);
  return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text; // rounds to zero: "0", never "-0" (Intl keeps the sign)
}

/**
 * A duration to the precision a timeline needs: "850 ns", "12.346 µs", "632.50 µs", "1.234 ms", "2.500 s";
 * 0 → "0 µs"; negative values keep their sign.
 */
export function formatTime(us: number | null | undefined): string {
  if (!isNum(us)) return DASH;
  const a = Math.abs(us);
  if (a === 0) return "0 µs";
  if (a < 1) return `${formatFixed(us * 1000, 0)} ns`;
  if (a < 1000) return `${formatFixed(us, a < 100 ? 3 : 2)} µs`;
  if (a < 1_000_000) return `${formatFixed(us / 1000, 3)} ms`;
  return `${formatFixed(us / 1_000_000, 3)} s`;
}

/** Bytes that may be negative (a size increase): "−1.50 MiB" (a minus sign, not a hyphen). */
export function formatSignedBytes(n: number | null | undefined): string {
  if (!isNum(n)) return DASH;
  return n < 0 ? `−${formatBytes(-n)}` : formatBytes(n);
}

/** Exact microseconds for tooltips ("1,504.506 µs"). */
export function formatExactUs(us: number | null | undefined): string {
  if (!isNum(us)) return DASH;
  return `${new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 }).format(us)} µs`;
}

/** A signed change in µs for people: "+7.47 ms", "-58.08 ms", "+632.0 µs", "0 µs"; null → "—". */
export function formatSignedDuration(us: number | null | undefined): string {
  if (!isNum(us)) return DASH;
  if (us === 0) return "0 µs";
  return `${us > 0 ? "+" : "-"}${formatDuration(Math.abs(us))}`;
}

/** A signed change as a fraction: "+64.9%", "-98.0%"; null, NaN or ±Infinity → "—" (never "Infinity%"). */
export function formatSignedPercent(fraction: number | null | undefined): string {
  if (!isNum(fraction)) return DASH;
  const text = formatPercent1(Math.abs(fraction));
  if (text === "0.0%") return text;
  return `${fraction > 0 ? "+" : "-"}${text}`;
}

/** FLOPs or FLOP/s with SI prefixes up to peta: "989.5 TFLOP/s", "336 GFLOP" (`unit` "FLOP"), "—" for no number. */
export function formatFlops(n: number | null | undefined, unit = "FLOP/s"): string {
  if (!isNum(n) || n < 0) return DASH;
  const scales: [number, string][] = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [scale, prefix] of scales) {
    if (n >= scale) {
      const v = n / scale;
      return `${v.toFixed(1)} ${prefix}${unit}`;
    }
  }
  return `${n.toFixed(0)} ${unit}`;
}

/**
 * CUPTI's version as Kineto writes it (`cupti_version`): from CUDA 13 on, major·10000 + minor·100 + patch
 * (130001 → "13.0.1"); before, CUPTI's API version, a small integer (24 → "API version 24"). Strings pass
 * through; anything else is null.
 */
export function formatCuptiVersion(v: unknown): string | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 10000) return `${Math.floor(v / 10000)}.${Math.floor((v % 10000) / 100)}.${v % 100}`;
  if (typeof v === "number" && Number.isInteger(v) && v > 0) return `API version ${v}`;
  return typeof v === "string" && v !== "" ? v : null;
}
