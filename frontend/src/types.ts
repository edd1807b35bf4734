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

/** A route that writes (POST): only `capture`. */
export type PostRoute = {
  [P in keyof paths]: P extends `/${infer R}` ? (paths[P] extends { post: unknown } ? R : never) : never;
}[keyof paths];

type Post<R extends PostRoute> = paths[`/${R}`] extends { post: infer O } ? O : never;

type Json<S extends number, T> = T extends { responses: { [K in S]: { content: { "application/json": infer B } } } } ? B : never;

/** The JSON a writing route answers with: its 200, 201 or 202 (capture answers 202: written, where it stands). */
export type PostAnswer<R extends PostRoute> = Json<200, Post<R>> | Json<201, Post<R>> | Json<202, Post<R>>;

/** The query parameters of a writing route. */
export type PostQuery<R extends PostRoute> = Post<R> extends { parameters: { query?: infer Q } }
  ? Q extends undefined ? Record<string, never> : NonNullable<Q>
  : Record<string, never>;

/** The JSON body a writing route takes. */
export type PostBody<R extends PostRoute> = Post<R> extends { requestBody: { content: { "application/json": infer B } } }
  ? B
  : never;

/** The routes of one span: their query names the run, the worker and the span. */
export type SpanRoute = {
  [R in Route]: Query<R> extends { run: string; worker: string; span: string } ? R : never;
}[Route];

/** A span route's query beyond run, worker and span. */
export type SpanExtra<R extends SpanRoute> = Omit<Query<R>, "run" | "worker" | "span">;

/** The span routes with a `group_by` choice, and their choices. */
export type GroupedRoute = { [R in SpanRoute]: "group_by" extends keyof Query<R> ? R : never }[SpanRoute];
export type Grouping<R extends GroupedRoute> = NonNullable<Query<R>["group_by" & keyof Query<R>]> & string;

/**
 * A contract type whose fields may each be null: the summary of an odd trace (or an older server) degrades
 * one tile, never the page, so the code that renders it checks each field.
 */
export type Nullable<T> = { [K in keyof T]: T[K] | null };

export type SpanInfo = Schema<"Span">;
export type SpanState = SpanInfo["state"];
export type RunsResponse = Answer<"runs">;
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

export type SummaryResponse = Nullable<Answer<"summary">>;
export type DeviceInfo = NonNullable<NonNullable<SummaryResponse["devices"]>[number]>;
export type TraceMetadata = NonNullable<SummaryResponse["metadata"]>;
export type DistributedInfo = NonNullable<TraceMetadata["distributed"]>;

export type ErrorResponse = Schema<"Error">;
