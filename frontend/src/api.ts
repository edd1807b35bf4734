/**
 * Typed access to the plugin's JSON routes. Every URL is relative ("./runs"), so it resolves
 * against the <base href> of TensorBoard's plugin_entry.html and survives --path_prefix,
 * reverse proxies and VS Code port forwarding. Never build "/data/plugin/..." URLs.
 *
 * `get("kernels", {...})` types the query and the answer from docs/api/openapi.yaml (src/generated/api.ts);
 * `getJSON<T>` is the untyped form for callers that still declare their own answer types.
 */
import { announceComputing, computingOf, retryDelayMs } from "./computing";
import type { Answer, Query, Route } from "./types";

export type QueryValue = string | number | boolean | null | undefined;
export type QueryParams = Record<string, QueryValue>;

export type ApiErrorKind =
  /** the request never got an HTTP answer (server down, network gone, timeout) */
  | "network"
  /** the server answered 4xx/5xx; message is its {"error": ...} sentence when it sent one */
  | "http"
  /** the server answered 2xx with something that is not JSON */
  | "parse"
  /** the caller aborted the request */
  | "aborted";

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    message: string,
    readonly kind: ApiErrorKind,
    /** HTTP status, 0 when there was no HTTP answer */
    readonly status: number,
    readonly route: string,
  ) {
    super(message);
  }

  /** True when the server could not be reached at all. */
  get unreachable(): boolean {
    return this.kind === "network";
  }
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** default 30 s, per request (a route that answers "computing" is asked again, each time with this limit) */
  timeoutMs?: number;
}

export interface Api {
  /** GET a route of the contract; its query and its answer are the OpenAPI file's. Throws ApiError. */
  get<R extends Route>(route: R, params: Query<R>, options?: RequestOptions): Promise<Answer<R>>;
  /** GET `./<route>?<params>` and parse JSON; throws ApiError. */
  getJSON<T>(route: string, params?: QueryParams, options?: RequestOptions): Promise<T>;
  /** The relative URL for a route, e.g. for links or downloads. */
  url(route: string, params?: QueryParams): string;
  /**
   * POST a JSON body to a route that writes (only `capture` does) and parse its JSON answer; throws ApiError.
   * Sends the plugin's own header, which the server requires (a cross-site form cannot send it).
   */
  postJSON<T>(route: string, params: QueryParams | undefined, body: unknown, options?: RequestOptions): Promise<T>;
}

/** The header a writing route requires (see tb_plugin/api/capture.py). */
export const WRITE_HEADER = "X-PTP-Capture";

export function buildUrl(route: string, params?: QueryParams): string {
  // Strip leading "./" or "/" so the path always stays relative to the plugin root.
  const path = "./" + route.replace(/^(\.\/|\/)+/, "");
  const query = new URLSearchParams();
  if (params) {
    for (const [key, value] of Object.entries(params)) {
      if (value !== null && value !== undefined) query.append(key, String(value));
    }
  }
  const qs = query.toString();
  return qs ? `${path}?${qs}` : path;
}

function errorSentence(body: unknown): string | null {
  if (typeof body === "object" && body !== null && "error" in body) {
    const error = body.error;
    if (typeof error === "string" && error.trim() !== "") return error;
  }
  return null;
}

export function createApi(fetchImpl: typeof fetch = window.fetch.bind(window)): Api {
  const getJSON = <T>(route: string, params?: QueryParams, options: RequestOptions = {}): Promise<T> =>
    requestJSON<T>(fetchImpl, route, params, options);
  const postJSON = async <T>(route: string, params: QueryParams | undefined, body: unknown,
    options: RequestOptions = {}): Promise<T> => {
    const init: RequestInit = {
      method: "POST",
      headers: { Accept: "application/json", "Content-Type": "application/json", [WRITE_HEADER]: "1" },
      body: JSON.stringify(body),
    };
    const response = await fetchWithin(fetchImpl, buildUrl(route, params), route, options, init);
    const { body: answer, parsed } = await parseBody(response);
    return answerOf(route, response, answer, parsed) as T;
  };
  return {
    url: buildUrl,
    postJSON,
    getJSON,
    get: <R extends Route>(route: R, params: Query<R>, options?: RequestOptions) =>
      getJSON<Answer<R>>(route, params, options),
  };
}

/** Fetch with a time limit and the caller's abort signal; every failure becomes an ApiError saying which. */
async function fetchWithin(fetchImpl: typeof fetch, url: string, route: string, options: RequestOptions,
  init: RequestInit = { headers: { Accept: "application/json" } }): Promise<Response> {
  const controller = new AbortController();
  const timeoutMs = options.timeoutMs ?? 30_000;
  const timeout = { hit: false };
  const timer = window.setTimeout(() => {
    timeout.hit = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = (): void => {
    controller.abort();
  };
  options.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return await fetchImpl(url, { ...init, signal: controller.signal, credentials: "same-origin" });
  } catch {
    if (options.signal?.aborted) throw new ApiError("The request was cancelled.", "aborted", 0, route);
    throw new ApiError(
      timeout.hit
        ? `The TensorBoard server did not answer within ${Math.round(timeoutMs / 1000)} s.`
        : "The TensorBoard server cannot be reached.",
      "network",
      0,
      route,
    );
  } finally {
    window.clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * GET and parse JSON. A 409 "computing" (an analysis of a big trace computed in the background, see computing.ts)
 * is not an error: the listeners are told its progress and the route is asked again, backing off, until it answers
 * or the caller aborts.
 */
async function requestJSON<T>(fetchImpl: typeof fetch, route: string, params: QueryParams | undefined, options: RequestOptions): Promise<T> {
  let waited = false;
  try {
    for (let attempt = 0; ; attempt++) {
      const { response, body, parsed } = await fetchBody(fetchImpl, route, params, options);
      const computing = response.status === 409 ? computingOf(body) : null;
      if (!computing) return answerOf(route, response, body, parsed) as T;
      waited = true;
      announceComputing(route, computing);
      await pause(retryDelayMs(attempt, computing.retryAfterMs), route, options.signal);
    }
  } finally {
    if (waited) announceComputing(route, null);
  }
}

/** The answer's JSON, or the ApiError it is. */
function answerOf(route: string, response: Response, body: unknown, parsed: boolean): unknown {
  if (!response.ok) {
    const sentence =
      errorSentence(body) ??
      `The server answered ${response.status}${response.statusText ? " " + response.statusText : ""} for ${route}.`;
    throw new ApiError(sentence, "http", response.status, route);
  }
  if (!parsed) {
    throw new ApiError(`The server sent a reply to ${route} that is not JSON.`, "parse", response.status, route);
  }
  return body;
}

async function fetchBody(fetchImpl: typeof fetch, route: string, params: QueryParams | undefined,
  options: RequestOptions): Promise<{ response: Response; body: unknown; parsed: boolean }> {
  const response = await fetchWithin(fetchImpl, buildUrl(route, params), route, options);
  return { response, ...(await parseBody(response)) };
}

async function parseBody(response: Response): Promise<{ body: unknown; parsed: boolean }> {
  const text = await response.text().catch(() => "");
  if (text === "") return { body: undefined, parsed: false };
  try {
    return { body: JSON.parse(text) as unknown, parsed: true };
  } catch {
    return { body: undefined, parsed: false };
  }
}

/** Wait `ms`, or throw the "aborted" ApiError as soon as the caller aborts. */
function pause(ms: number, route: string, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = (): void => {
      window.clearTimeout(timer);
      reject(new ApiError("The request was cancelled.", "aborted", 0, route));
    };
    const timer = window.setTimeout(() => {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }, ms);
    if (signal?.aborted) aborted();
    else signal?.addEventListener("abort", aborted, { once: true });
  });
}
