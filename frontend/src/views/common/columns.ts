/**
 * Column makers the table pages share: a duration (µs in, people's units in the cell, exact µs in the tooltip,
 * "(us)" in the CSV header) and a byte count (binary units in the cell, exact bytes in the tooltip, "(bytes)" in the
 * CSV header), so every page shows and exports times and sizes alike.
 */
import { formatBytes, formatDuration, formatExactUs, formatInt, formatSignedBytes } from "../../format";
import type { Column } from "./table";

function numericColumn<R>(key: string, label: string, help: string, get: (r: R) => number | null): Column<R> {
  return { key, label, help, numeric: true, value: get };
}

export function durationColumn<R>(key: string, label: string, help: string, get: (r: R) => number | null): Column<R> {
  return {
    ...numericColumn(key, label, help, get),
    text: (r) => formatDuration(get(r)),
    exact: (r) => formatExactUs(get(r)),
    csvHeader: `${label} (us)`,
  };
}

/** `signed`: a change that may be negative ("−1.50 MiB"). */
export function bytesColumn<R>(key: string, label: string, help: string, get: (r: R) => number, signed = false): Column<R> {
  return {
    ...numericColumn(key, label, help, get),
    text: (r) => (signed ? formatSignedBytes(get(r)) : formatBytes(get(r))),
    exact: (r) => `${formatInt(get(r))} bytes`,
    csvHeader: `${label} (bytes)`,
  };
}
