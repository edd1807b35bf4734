/**
 * The Overview's answer (`./overview`) as docs/api/openapi.yaml types it, and its parts the cards read.
 */
import type { Answer, Schema } from "../../types";

export type OverviewResponse = Answer<"overview">;
export type Step = OverviewResponse["steps"][number];
export type GpuSummary = OverviewResponse["gpus"][number];
export type Environment = OverviewResponse["environment"];
export type EnvDevice = Environment["devices"][number];
/** A finding of the diagnosis (kept under the old name: the API field is still `recommendations`). */
export type Recommendation = OverviewResponse["recommendations"][number];
/** A link from a finding to the place in another view that shows its evidence. */
export type Evidence = NonNullable<Recommendation["evidence"]>[number];
/** Where in the step a finding's evidence lives: the user's frame, the call it makes there, module, regions. */
export type Where = NonNullable<Recommendation["where"]>;
export type Verdict = OverviewResponse["verdict"];
export type RunContext = OverviewResponse["context"];
export type Mfu = Schema<"Mfu">;
