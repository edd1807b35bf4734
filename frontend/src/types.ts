/**
 * Types of the backend's JSON contract, generated from docs/api/openapi.yaml (src/generated/api.ts, written
 * by the build): the contract tests/unit/test_openapi.py checks on the server is the one compiled here. All
 * routes are relative to the plugin's route root (`./runs`, `./views`, `./summary`).
 */
import type { components, paths } from "./generated/api";

/** A schema of the OpenAPI file by name ("Runs", "Summary", "Span", ...). */
export type Schema<Name extends keyof components["schemas"]> = components["schemas"][Name];

/** A route of the plugin, as `getRoute` takes it: "runs", "trace/window", ... (no leading slash). */
export type Route = {
  [P in keyof paths]: P extends `/${infer R}` ? (paths[P] extends { get: unknown } ? R : never) : never;
}[keyof paths];

type Get<R extends Route> = paths[`/${R}`] extends { get: infer G } ? G : never;

/** The JSON a route answers with 200. */
export type Answer<R extends Route> = Get<R> extends { responses: { 200: { content: { "application/json": infer B } } } }
  ? B
  : never;

/** The query parameters a route takes (an empty object for none). */
export type Query<R extends Route> = Get<R> extends { parameters: { query?: infer Q } }
  ? Q extends undefined ? Record<string, never> : NonNullable<Q>
  : Record<string, never>;

/**
 * A contract type whose fields may each be null: the summary of an odd trace (or an older server) degrades
 * one tile, never the page, so the code that renders it checks each field.
 */
export type Nullable<T> = { [K in keyof T]: T[K] | null };

export type SpanInfo = Schema<"Span">;
export type SpanState = SpanInfo["state"];
/** `errors` is optional here as it was before the types were generated: app.ts still guards it (the lead drops
 * the guard and this `Partial` after merging the Trace branch, which is rewriting app.ts). */
export type RunsResponse = Omit<Answer<"runs">, "errors"> & Partial<Pick<Answer<"runs">, "errors">>;
export type RunInfo = RunsResponse["runs"][number];
export type WorkerInfo = RunInfo["workers"][number];

/** View names the backend may list; the registry maps some of them to a page. */
export const VIEW_NAMES = [
  "Overview",
  "Operator",
  "Flame",
  "Kernel",
  "GPU",
  "Trace",
  "Memory",
  "Module",
  "Distributed",
  "Diff",
] as const;
export type ViewName = (typeof VIEW_NAMES)[number];

/** Names outside the contract's list (a newer server) are passed over by the registry, so they are typed as text. */
export type ViewsResponse = Omit<Answer<"views">, "views"> & { views: string[] };

export type SummaryResponse = Nullable<Answer<"summary">>;
export type DeviceInfo = NonNullable<NonNullable<SummaryResponse["devices"]>[number]>;
export type TraceMetadata = NonNullable<SummaryResponse["metadata"]>;
export type DistributedInfo = NonNullable<TraceMetadata["distributed"]>;

export type ErrorResponse = Schema<"Error">;
