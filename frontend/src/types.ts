/**
 * Types of the backend's JSON contract (tb_plugin/). All routes are relative to the plugin's
 * route root (`./runs`, `./views`, `./summary`). Any field may be missing or null in practice:
 * render code treats everything defensively.
 */

export type SpanState = "queued" | "loading" | "ready" | "failed";

export interface SpanInfo {
  /** "1", "2", ... or "default": the position by stamp, which shifts when an older file is added */
  span: string;
  /** the stable key links carry: the file name's stamp (the position where there is none) */
  key: string;
  /** the file's modification time, seconds since the epoch */
  mtime: number;
  state: SpanState;
  /** 0..1 */
  progress: number;
  /** one-line reason naming the file when state is "failed" */
  error: string | null;
  file: string;
  size_bytes: number;
}

export interface WorkerInfo {
  name: string;
  spans: SpanInfo[];
}

export interface RunInfo {
  name: string;
  workers: WorkerInfo[];
}

export interface RunsResponse {
  runs: RunInfo[];
  logdir: string;
  scanning: boolean;
  /** logdir-level problems (unreadable root, bad --logdir_spec...), one sentence each */
  errors?: string[];
}

/** View names the backend may list; the registry maps some of them to a page. */
export const VIEW_NAMES = [
  "Overview",
  "Operator",
  "Kernel",
  "GPU",
  "Trace",
  "Memory",
  "Module",
  "Distributed",
  "Diff",
] as const;
export type ViewName = (typeof VIEW_NAMES)[number];

export interface ViewsResponse {
  views: string[];
}

export interface DeviceInfo {
  id: number | string | null;
  name: string | null;
  memory_bytes: number | null;
  compute_capability: string | null;
  num_sms: number | null;
}

export interface DistributedInfo {
  backend: string | null;
  rank: number | null;
  world_size: number | null;
}

export interface TraceMetadata {
  schema_version: string | number | null;
  pytorch_version: string | null;
  cuda_runtime_version: string | number | null;
  cuda_driver_version: string | number | null;
  framework: string | null;
  with_stack: boolean | null;
  record_shapes: boolean | null;
  profile_memory: boolean | null;
  distributed: DistributedInfo | null;
}

export interface SummaryResponse {
  file: string | null;
  size_bytes: number | null;
  duration_us: number | null;
  event_counts: Record<string, number> | null;
  devices: DeviceInfo[] | null;
  metadata: Partial<TraceMetadata> | null;
}

export interface ErrorResponse {
  error: string;
}
