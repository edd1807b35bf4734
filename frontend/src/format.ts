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

