/**
 * The Operator page's pure part: its answer types (generated from docs/api/openapi.yaml), which columns and
 * notes the answer calls for, which groupings the trace can offer and the key a row keeps across regroupings.
 * DOM-free, so frontend/test/operatorData.test.ts checks the numbers.
 */
import type { Answer } from "../../types";

export type OperatorsResponse = Answer<"operators">;
export type OperatorRow = OperatorsResponse["rows"][number];
export type OperatorGrouping = OperatorsResponse["group_by"];
export type AnnotationsResponse = Answer<"annotations">;
export type AnnotationRow = AnnotationsResponse["rows"][number];

/** What the page shows of the by-name answer. */
export interface OperatorSummary {
  rows: OperatorRow[];
  /** all GPU work summed, and the time at least one GPU event ran (µs; 0 when not sent) */
  sumUs: number;
  busyUs: number;
  /** the trace has GPU time: device columns, pies and sort */
  device: boolean;
  /** the summed GPU work differs from the busy time by more than 1% (concurrent streams): the note says both */
  overlap: boolean;
}

export function operatorSummary(resp: OperatorsResponse): OperatorSummary {
  const rows = Array.isArray(resp.rows) ? resp.rows : [];
  const sumUs = resp.totals.device_sum_us ?? 0;
  const busyUs = resp.totals.device_busy_us ?? 0;
  const device = sumUs > 0 || rows.some((r) => r.device_total_us > 0);
  return { rows, sumUs, busyUs, device, overlap: sumUs > 0 && Math.abs(sumUs - busyUs) > 0.01 * sumUs };
}

/** Whether the "Device wall" column says anything: some row's covered device time differs from its sum. */
export function hasWallTime(rows: readonly OperatorRow[]): boolean {
  return rows.some((r) => Math.abs(r.device_total_wall_us - r.device_total_us) > 1e-6 * Math.max(1, r.device_total_us));
}

/** Why a grouping cannot be offered for this trace (its data was not recorded), or null when it can. */
export function groupingUnsupported(g: OperatorGrouping, byName: Pick<OperatorsResponse, "has_input_shapes" | "has_call_stacks">): string | null {
  if (g === "name_shape" && byName.has_input_shapes === false) return "This trace has no input shapes (record with record_shapes=True).";
  if (g === "name_stack" && byName.has_call_stacks === false) return "This trace has no call stacks (record with with_stack=True).";
  return null;
}

/** A row's identity: name, input shape and call stack (NUL-separated). */
export function operatorRowKey(r: Pick<OperatorRow, "name" | "input_shape" | "call_stack">): string {
  return `${r.name}\u0000${r.input_shape ?? ""}\u0000${r.call_stack ?? ""}`;
}

/** As many table rows as fit a frame `height` px tall (about 28 px a row, the table's head and pager aside), 15 to
 * 100: a page of 10 left most of a tall screen empty. */
export function rowsThatFit(height: number): number {
  return Math.min(100, Math.max(15, Math.floor((height - 140) / 28)));
}
