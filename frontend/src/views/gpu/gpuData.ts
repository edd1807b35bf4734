/**
 * The GPU page's pure parts (no DOM): headings whose numbers must agree with the table beneath them.
 * Tested under Node (frontend/test/gpuData.test.ts).
 */
import { formatInt } from "../../format";
import type { Answer } from "../../types";

/** The GPU insights' answers as docs/api/openapi.yaml types them. */
export type IdleResponse = Answer<"idle">;
export type IdleStream = IdleResponse["streams"][number];
/** The step window GPU insights are measured in (absolute µs). */
export type Window = IdleResponse["window"];
export type LaunchStatsResponse = Answer<"launch_stats">;
export type LaunchRow = LaunchStatsResponse["rows"][number];
export type LaunchByName = LaunchStatsResponse["by_name"][number];
export type QueueLengthResponse = Answer<"queue_length">;
export type QueueStream = QueueLengthResponse["streams"][number];
export type BandwidthResponse = Answer<"memory_bandwidth">;
export type BandwidthRow = BandwidthResponse["rows"][number];
export type KernelSequencesResponse = Answer<"kernel_sequences">;
export type KernelSequence = KernelSequencesResponse["sequences"][number];
export type CuptiCountersResponse = Answer<"cupti_counters">;
export type CuptiCounterRow = CuptiCountersResponse["rows"][number];
export type CuptiCounterOperator = CuptiCountersResponse["operators"][number];

/**
 * The launch-delay outliers' heading. The server sends the `limit` longest delays (500 by default), so a trace
 * with more outliers than that shows fewer rows than it counts: say so, instead of a count above a shorter table.
 */
export function outlierHeading(outliers: number, listed: number): string {
  const head = `Launch-delay outliers (p95 and above): ${formatInt(outliers)}`;
  return listed < outliers ? `${head}, the ${formatInt(listed)} longest listed` : head;
}
