/**
 * The Module page's pure part: its answer types (the module tree generated from docs/api/openapi.yaml; Lightning's
 * hooks and modules and the timeline's occurrences are untyped there, so they are declared here), the answer made
 * safe to walk, and what the timeline card shows of the calls. DOM-free, so frontend/test/moduleData.test.ts
 * checks the numbers.
 */
import { formatInt, num } from "../../format";
import type { Schema } from "../../types";

export type ModuleNode = Schema<"ModuleNode">;

export interface LightningModule {
  name: string;
  occurrences: number;
  host_total_us: number;
  children: LightningModule[];
}

export interface LightningHook {
  name: string;
  calls: number;
  host_total_us: number;
}

export interface ModulesResponse {
  framework: string | null;
  modules: ModuleNode[];
  lightning_modules: LightningModule[];
  hooks: LightningHook[];
}

export interface ModuleOccurrence {
  name: string;
  start_us: number;
  dur_us: number;
  depth: number;
}

export const LIGHTNING = "pytorch-lightning";
/** the most module calls the timeline draws (the first ones in time) */
export const TIMELINE_MAX = 6000;

/** `v` when it is an array, else empty: a part the server left out costs that part, never the page. */
export function arr<T>(v: unknown): T[] {
  return Array.isArray(v) ? (v as T[]) : [];
}

/** The answer of ./modules with every list an array and the framework a string or null. */
export function normalizeModules(raw: Partial<ModulesResponse> | null | undefined): ModulesResponse {
  return {
    framework: typeof raw?.framework === "string" ? raw.framework : null,
    modules: arr<ModuleNode>(raw?.modules),
    lightning_modules: arr<LightningModule>(raw?.lightning_modules),
    hooks: arr<LightningHook>(raw?.hooks),
  };
}

/** "Linear_3" → "Linear": one colour per module class. */
export function moduleClass(name: string): string {
  return name.replace(/_\d+$/, "");
}

/** A finite number or 0. */
export function orZero(v: unknown): number {
  return num(v) ?? 0;
}

/** The clock of a module's mean: "device" where it ran GPU work (the analysis divides device total), else "host". */
export function meanClock(n: Pick<ModuleNode, "device_total_us">): "device" | "host" {
  return orZero(n.device_total_us) > 0 ? "device" : "host";
}

/** The line under the page's title. */
export function moduleSubtitle(count: number, lightning: boolean): string {
  if (count) return `${formatInt(count)} modules in the nn.Module hierarchy · times summed over every call${lightning ? " · PyTorch Lightning" : ""}`;
  return lightning ? "PyTorch Lightning run" : "";
}

/** What the timeline card draws: the first calls in time (at most `max`), its height and its note. */
export interface TimelinePlan {
  rows: ModuleOccurrence[];
  heightPx: number;
  note: string;
}

export function timelinePlan(occurrences: readonly ModuleOccurrence[], max = TIMELINE_MAX): TimelinePlan {
  const rows = [...occurrences].sort((a, b) => a.start_us - b.start_us).slice(0, max);
  const maxDepth = rows.reduce((m, o) => Math.max(m, o.depth), 0);
  const note =
    occurrences.length > rows.length
      ? `The first ${formatInt(rows.length)} of ${formatInt(occurrences.length)} calls, by nesting depth. Drag to zoom, double-click to zoom out.`
      : `${formatInt(rows.length)} calls by nesting depth. Drag to zoom, double-click to zoom out.`;
  return { rows, heightPx: Math.max(160, 60 + (maxDepth + 1) * 34), note };
}

/** A hook's mean time per call (µs), null for a hook never called. */
export function hookMean(r: LightningHook): number | null {
  return orZero(r.calls) > 0 ? orZero(r.host_total_us) / r.calls : null;
}
