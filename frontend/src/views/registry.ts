/**
 * The view registry: the one place to add a page.
 *
 * The backend's `GET ./views?run=<run>` lists the views whose analysis exists and has data;
 * the shell shows a tab for each listed name that has an entry here, in VIEW_NAMES order, after
 * the built-in "Trace info" tab. Each entry lazily imports its module so every page (and
 * plotly.js) lands in its own chunk and index.js stays small.
 *
 * To add a view:
 *   1. create src/views/<name>/<name>.ts (its parts beside it) exporting `render(container, ctx)` (see ./types.ts);
 *   2. add `<Name>: () => import("./<name>/<name>")` below.
 */
import type { ViewName } from "../types";
import type { ViewModule } from "./types";

export type ViewLoader = () => Promise<ViewModule>;

export const VIEW_REGISTRY: Partial<Record<ViewName, ViewLoader>> = {
  Overview: () => import("./overview/overview"),
  Operator: () => import("./operator/operator"),
  Flame: () => import("./flame/flame"),
  Kernel: () => import("./kernel/kernel"),
  GPU: () => import("./gpu/gpu"),
  Trace: () => import("./trace/trace"),
  Memory: () => import("./memory/memory"),
  Module: () => import("./module/module"),
  Distributed: () => import("./distributed/distributed"),
  Diff: () => import("./diff/diff"),
};

/**
 * Views shown for every run whatever `./views` lists (pages that compare or gather traces rather
 * than show data of their own, e.g. Diff).
 */
export const ALWAYS_AVAILABLE: ReadonlySet<ViewName> = new Set<ViewName>(["Diff"]);

/** Optional tab labels when they differ from the view name. */
export const VIEW_LABELS: Partial<Record<ViewName, string>> = { Flame: "Flame graph" };

export function viewLoader(name: string): ViewLoader | undefined {
  return Object.prototype.hasOwnProperty.call(VIEW_REGISTRY, name)
    ? VIEW_REGISTRY[name as ViewName]
    : undefined;
}
