/**
 * The GPU page's pure parts (no DOM): headings whose numbers must agree with the table beneath them.
 * Tested under Node (frontend/test/gpuData.test.ts).
 */
import { formatInt } from "../../format";

/**
 * The launch-delay outliers' heading. The server sends the `limit` longest delays (500 by default), so a trace
 * with more outliers than that shows fewer rows than it counts: say so, instead of a count above a shorter table.
 */
export function outlierHeading(outliers: number, listed: number): string {
  const head = `Launch-delay outliers (p95 and above): ${formatInt(outliers)}`;
  return listed < outliers ? `${head}, the ${formatInt(listed)} longest listed` : head;
}
