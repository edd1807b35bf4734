/**
 * The JSON of ./memory/curve, ./memory/events and ./memory/stats (docs/api/openapi.yaml) and the
 * pure helpers of the Memory page: device order, the time origin, byte units, the size filter.
 * Times from the backend are absolute µs; the page shows them in ms relative to the trace start.
 */
import { formatBytes, formatMs, isNum } from "../../format";

/** One sample: [absolute µs, allocated bytes, reserved bytes]. */
export type CurvePoint = [number, number, number];

export interface CurveDevice {
  points: CurvePoint[];
  peak_allocated_bytes: number;
  peak_time_us?: number;
  peak_reserved_bytes?: number;
  records?: number;
}

export interface CurveResponse {
  /** why there is no curve (old traces, no memory records); null when there are curves */
  reason: string | null;
  devices: Record<string, CurveDevice>;
  /** absolute trace start, when the backend sends it (not in the contract yet) */
  start_us?: number;
}

export interface MemoryEvent {
  name: string;
  device: string;
  size_bytes: number;
  /** null: allocated before the trace started */
  alloc_us: number | null;
  /** null: not freed inside the trace */
  free_us: number | null;
  lifetime_us: number | null;
  addr: number;
  /** the allocating operator's Python call stack (with_stack=True) */
  call_stack?: string | null;
  /** with a range: allocated in it, or allocated before it and live in it */
  in_range?: "allocated" | "live";
}

export interface MemoryStat {
  name: string;
  device: string;
  calls: number;
  size_increase_bytes: number;
  self_size_increase_bytes: number;
  allocation_count: number;
  self_allocation_count: number;
  allocation_size_bytes: number;
  self_allocation_size_bytes: number;
}

export interface RowsResponse<R> {
  rows: R[];
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** ./memory/curve's answer with anything malformed dropped (devices without a points array). */
export function normalizeCurve(raw: unknown): CurveResponse {
  const body = isObj(raw) ? raw : {};
  const devices: Record<string, CurveDevice> = {};
  if (isObj(body["devices"])) {
    for (const [name, dev] of Object.entries(body["devices"])) {
      if (isObj(dev) && Array.isArray(dev["points"])) devices[name] = dev as unknown as CurveDevice;
    }
  }
  const out: CurveResponse = { reason: typeof body["reason"] === "string" ? body["reason"] : null, devices };
  if (isNum(body["start_us"])) out.start_us = body["start_us"];
  return out;
}

/** CPU first, then GPU0, GPU1, … (numeric order), then anything else by name. */
export function compareDevices(a: string, b: string): number {
  const rank = (d: string): [number, number, string] => {
    if (d === "CPU") return [0, 0, d];
    const m = /^([A-Za-z]+)(\d+)$/.exec(d);
    if (m) return [m[1] === "GPU" ? 1 : 2, Number(m[2]), m[1] ?? d];
    return [3, 0, d];
  };
  const [ra, na, sa] = rank(a);
  const [rb, nb, sb] = rank(b);
  return ra - rb || sa.localeCompare(sb) || na - nb;
}

/** Every device that has a curve, events (`eventDevices`: the server's list) or a statistics row, in display order. */
export function deviceList(curve: CurveResponse, eventDevices: readonly string[], stats: readonly MemoryStat[]): string[] {
  const set = new Set<string>(Object.keys(curve.devices));
  for (const d of eventDevices) set.add(d);
  for (const s of stats) set.add(s.device);
  return [...set].sort(compareDevices);
}

/** The device shown first: the first GPU with a curve, else the first with a curve, else the first. */
export function defaultDevice(devices: readonly string[], curve: CurveResponse): string | undefined {
  const withCurve = devices.filter((d) => (curve.devices[d]?.points.length ?? 0) > 0);
  return withCurve.find((d) => d !== "CPU") ?? withCurve[0] ?? devices.find((d) => d !== "CPU") ?? devices[0];
}

/**
 * The time origin (absolute µs) for "ms from the trace start": the backend's start when it sends
 * one, else the earliest curve sample over every device, else the earliest event.
 */
export function timeOrigin(curve: CurveResponse, events: readonly MemoryEvent[]): number {
  if (isNum(curve.start_us)) return curve.start_us;
  let t = Infinity;
  for (const dev of Object.values(curve.devices)) {
    const first = dev.points[0]?.[0];
    if (isNum(first)) t = Math.min(t, first);
  }
  if (t === Infinity) {
    for (const e of events) {
      if (isNum(e.alloc_us)) t = Math.min(t, e.alloc_us);
      if (isNum(e.free_us)) t = Math.min(t, e.free_us);
    }
  }
  return t === Infinity ? 0 : t;
}

export interface ByteUnit {
  label: string;
  bytes: number;
}

const UNITS: ByteUnit[] = [
  { label: "GiB", bytes: 1024 ** 3 },
  { label: "MiB", bytes: 1024 ** 2 },
  { label: "KiB", bytes: 1024 },
  { label: "B", bytes: 1 },
];

/** The axis unit for values up to `maxBytes` (GiB from 1 GiB, MiB from 1 MiB, …). */
export function axisUnit(maxBytes: number): ByteUnit {
  return UNITS.find((u) => maxBytes >= u.bytes) ?? { label: "B", bytes: 1 };
}

/** Units of the size filter. */
export const SIZE_UNITS: readonly ByteUnit[] = [...UNITS].reverse();

/**
 * Read an x-range (ms) out of a plotly_relayout event: "reset" on autorange, null when the event
 * does not touch the x-axis. An event that moves one end only takes the other from `current`.
 */
export function relayoutRange(
  event: Record<string, unknown>,
  current?: readonly unknown[] | null,
): [number, number] | "reset" | null {
  const whole = event["xaxis.range"];
  let a: unknown;
  let b: unknown;
  if (Array.isArray(whole)) [a, b] = whole as unknown[];
  else if ("xaxis.range[0]" in event || "xaxis.range[1]" in event) {
    a = "xaxis.range[0]" in event ? event["xaxis.range[0]"] : current?.[0];
    b = "xaxis.range[1]" in event ? event["xaxis.range[1]"] : current?.[1];
  } else if (event["xaxis.autorange"] === true) return "reset";
  else return null;
  const x0 = Number(a);
  const x1 = Number(b);
  if (!Number.isFinite(x0) || !Number.isFinite(x1)) return null;
  return x0 <= x1 ? [x0, x1] : [x1, x0];
}

/** The rows of an events or statistics answer; none for a malformed one. */
export function rowsOf<R>(resp: RowsResponse<R> | null | undefined): R[] {
  return resp && Array.isArray(resp.rows) ? resp.rows : [];
}

/** An allocation's identity: device, address and both times (NUL-separated). */
export function eventKey(e: Pick<MemoryEvent, "device" | "addr" | "alloc_us" | "free_us">): string {
  return `${e.device}\u0000${e.addr}\u0000${e.alloc_us ?? ""}\u0000${e.free_us ?? ""}`;
}

/** A device's peak: the server's when it sends bytes and time, else the sample with the most allocated. */
export function peakOf(dev: CurveDevice): { bytes: number; t: number } {
  if (isNum(dev.peak_allocated_bytes) && isNum(dev.peak_time_us)) return { bytes: dev.peak_allocated_bytes, t: dev.peak_time_us };
  let best = dev.points[0] ?? [0, 0, 0];
  for (const p of dev.points) if (p[1] > best[1]) best = p;
  return { bytes: isNum(dev.peak_allocated_bytes) ? dev.peak_allocated_bytes : best[1], t: best[0] };
}

/** "Peak 1.50 GiB at 12.35 ms" (ms from `origin`). */
export function peakLabel(dev: CurveDevice, origin: number): string {
  const peak = peakOf(dev);
  return `Peak ${formatBytes(peak.bytes)} at ${formatMs(peak.t - origin)}`;
}

/** The size filter in bytes: the typed number times its unit; 0 (no filter) for nothing, a negative or not a number. */
export function minBytesOf(typed: string, unitBytes: string): number {
  const v = Number(typed);
  const unit = Number(unitBytes) || 1;
  return Number.isFinite(v) && v > 0 ? v * unit : 0;
}

/** The selected range for people ("12.00 ms – 15.50 ms", ms from `origin`), "whole trace" for none. */
export function rangeText(range: readonly [number, number] | null, origin: number): string {
  return range ? `${formatMs(range[0] - origin)} – ${formatMs(range[1] - origin)}` : "whole trace";
}

/** The range in a CSV file name ("12.00ms-15.50ms"), "" for none. */
export function rangeFileSuffix(range: readonly [number, number] | null, origin: number): string {
  return range ? `${formatMs(range[0] - origin)}-${formatMs(range[1] - origin)}`.replace(/ ms/g, "ms") : "";
}
