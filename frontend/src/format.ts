/** Number and value formatting shared by the shell and the view pages. */

const intFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export const DASH = "—";

export function formatInt(n: number | null | undefined): string {
  return typeof n === "number" && Number.isFinite(n) ? intFmt.format(n) : DASH;
}

export function formatBytes(bytes: number | null | undefined): string {
  if (typeof bytes !== "number" || !Number.isFinite(bytes) || bytes < 0) return DASH;
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

/** Microseconds → "12.345 ms" (three decimals under 1 s, then grouped). */
export function formatDurationUs(us: number | null | undefined): string {
  if (typeof us !== "number" || !Number.isFinite(us)) return DASH;
  const ms = us / 1000;
  return `${new Intl.NumberFormat("en-US", { minimumFractionDigits: 3, maximumFractionDigits: 3 }).format(ms)} ms`;
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


const fixed = (digits: number): Intl.NumberFormat =>
  new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const fixed1 = fixed(1);
const fixed2 = fixed(2);

/**
 * Microseconds for people: under 1 ms in µs with one decimal ("632.0 µs"), else in ms with two
 * decimals and grouping ("114.25 ms", "1,234.57 ms"); 0 → "0 µs"; null → "—".
 */
export function formatDuration(us: number | null | undefined): string {
  if (typeof us !== "number" || !Number.isFinite(us)) return DASH;
  if (us === 0) return "0 µs";
  if (Math.abs(us) < 1000) return `${fixed1.format(us)} µs`;
  return `${fixed2.format(us / 1000)} ms`;
}

/** A fraction 0..1 as a percentage with one decimal ("88.0%"); null → "—". Not clamped. */
export function formatPercent1(fraction: number | null | undefined): string {
  if (typeof fraction !== "number" || !Number.isFinite(fraction)) return DASH;
  return `${fixed1.format(fraction * 100)}%`;
}

/** A number with exactly `digits` decimals and grouping ("4.48", "1.00"); null → "—". */
export function formatFixed(n: number | null | undefined, digits = 2): string {
  if (typeof n !== "number" || !Number.isFinite(n)) return DASH;
  return (digits === 1 ? fixed1 : digits === 2 ? fixed2 : fixed(digits)).format(n);
}

/** Exact microseconds for tooltips ("1,504.506 µs"). */
export function formatExactUs(us: number | null | undefined): string {
  if (typeof us !== "number" || !Number.isFinite(us)) return DASH;
  return `${new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 }).format(us)} µs`;
}

/** A signed change in µs for people: "+7.47 ms", "-58.08 ms", "+632.0 µs", "0 µs"; null → "—". */
export function formatSignedDuration(us: number | null | undefined): string {
  if (typeof us !== "number" || !Number.isFinite(us)) return DASH;
  if (us === 0) return "0 µs";
  return `${us > 0 ? "+" : "-"}${formatDuration(Math.abs(us))}`;
}

/** A signed change as a fraction: "+64.9%", "-98.0%"; null, NaN or ±Infinity → "—" (never "Infinity%"). */
export function formatSignedPercent(fraction: number | null | undefined): string {
  if (typeof fraction !== "number" || !Number.isFinite(fraction)) return DASH;
  const text = formatPercent1(Math.abs(fraction));
  if (text === "0.0%") return text;
  return `${fraction > 0 ? "+" : "-"}${text}`;
}
