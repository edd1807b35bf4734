/**
 * The JSON of ./overview and the GPU insights (see docs/api/openapi.yaml; ./operators and ./kernels are typed
 * from it in views/operatorData.ts and views/kernelData.ts). Times are µs,
 * ratios fractions 0..1, null = missing. Render code still treats every field defensively.
 */

import type { Schema } from "../../types";

export type Breakdown = Record<string, number>;

/** Model FLOPs utilisation (the Overview's `mfu`), as the contract types it. */
export type Mfu = Schema<"Mfu">;

export interface Step {
  name: string;
  start_us: number;
  duration_us: number;
  breakdown_us: Breakdown;
}

export interface GpuSummary {
  /** null: kernels whose device was missing or not a number */
  id: number | null;
  name: string | null;
  memory_bytes?: number | null;
  compute_capability?: string | null;
  /** kernels only, communication kernels included: the headline */
  utilization: number | null;
  /** kernels other than communication (NCCL) kernels; absent from older servers */
  compute_utilization?: number | null;
  /** all GPU work: kernels, memcpy, memset (what HTA calls utilization); absent from older servers */
  gpu_busy?: number | null;
  sm_efficiency: number | null;
  achieved_occupancy: number | null;
  tensor_core_ratio: number | null;
  kernel_time_us?: number;
}

export interface EnvDevice {
  id?: number | null;
  name?: string | null;
  memory_bytes?: number | null;
  compute_capability?: string | null;
  num_sms?: number | null;
}

export interface Environment {
  device_type: "GPU" | "CPU";
  workers: number;
  devices: EnvDevice[];
  pytorch_version?: string | null;
  cuda_runtime_version?: number | string | null;
  cuda_driver_version?: number | string | null;
  cupti_version?: number | string | null;
  /** a CPU-only run: GPUs the machine had that the profiler did not record */
  unprofiled_gpus?: number;
  framework?: string | null;
}

/** A link from a finding to the place in another view that shows its evidence. */
export interface Evidence {
  view: "Trace" | "Operator" | "Kernel" | "Distributed" | "Memory" | "Overview" | "Diff" | "GPU";
  params: {
    start_us?: number;
    end_us?: number;
    q?: string;
    rank?: number;
    device?: string;
    worker?: string;
    /** Diff: two steps of this trace (baseline, experiment). */
    step?: string;
    exp_step?: string;
    /** GPU: the card to open at (idle, launch, roofline). */
    card?: string;
  };
  label: string;
}

/** Where in the step a finding's evidence lives: the user's frame, the call it makes there, module, regions. */
export interface Where {
  text: string;
  frame: string | null;
  calls: string | null;
  api: string | null;
  module: string | null;
  region: string | null;
  annotation: string | null;
  share: number;
}

/** A finding of the diagnosis (kept under the old name: the API field is still `recommendations`). */
export interface Recommendation {
  id: string;
  text: string;
  link: string;
  kind?: string;
  title?: string;
  headline?: string;
  advice?: string;
  saving_us?: number;
  share?: number;
  cause?: boolean;
  suggests?: string[];
  evidence?: Evidence[];
  where?: Where | null;
  confidence?: "high" | "medium" | "low";
  /** the fix replayed alone (null: the saving is a rule of thumb, or none is claimed) */
  what_if?: { id: string; saving_us: number; predicted_step_us: number; baseline_step_us: number; model: string; label: string } | null;
  estimated?: "replay" | "rule of thumb" | "measured" | "none";
}

export interface Verdict {
  kind: string;
  id: string | null;
  text: string;
  saving_us: number;
  where?: Where | null;
  root_cause?: string;
}

export interface RunContext {
  label: string;
  in_use: string[];
  cpu_only: boolean;
  job?: { rank: number; world_size: number; straggler_rank: number | null };
}

export interface OverviewResponse {
  steps: Step[];
  average: { duration_us: number; breakdown_us: Breakdown; share: Breakdown };
  categories: string[];
  gpus: GpuSummary[];
  environment: Environment;
  recommendations: Recommendation[];
  context?: RunContext;
  verdict?: Verdict;
  notes: string[];
  /** absent from older servers */
  mfu?: Mfu;
}

/** The step window GPU insights are measured in (absolute µs). */
export interface Window {
  start_us: number;
  end_us: number;
}

export interface IdleStream {
  device: number | null;
  stream: number;
  busy_us: number;
  idle_us: number;
  host_wait_us: number;
  kernel_wait_us: number;
  other_us: number;
  events: number;
  steps: { step: string; busy_us: number; host_wait_us: number; kernel_wait_us: number; other_us: number }[];
  longest_gaps: { start_us: number; end_us: number; category: "host_wait" | "kernel_wait" | "other" }[];
}

export interface IdleResponse {
  window: Window;
  kernel_wait_threshold_us: number;
  streams: IdleStream[];
}

export interface LaunchRow {
  id: number;
  name: string;
  device: number | null;
  stream: number;
  start_us: number;
  launch_id: number;
  launch_name: string;
  launch_start_us: number;
  cpu_duration_us: number;
  gpu_duration_us: number;
  launch_delay_us: number;
  short: boolean;
  outlier: boolean;
}

export interface LaunchByName {
  name: string;
  count: number;
  cpu_duration_mean_us: number;
  gpu_duration_mean_us: number;
  launch_delay_mean_us: number;
  launch_delay_max_us: number;
  short_kernels: number;
}

export interface LaunchStatsResponse {
  window: Window;
  summary: {
    kernels: number;
    launched: number;
    unlaunched: number;
    unlaunched_us: number;
    launch_delay_p50_us: number | null;
    launch_delay_p95_us: number | null;
    launch_delay_max_us: number | null;
    cpu_duration_mean_us: number | null;
    gpu_duration_mean_us: number | null;
    short_kernels: number;
    short_kernels_us: number;
    outliers: number;
  };
  by_name: LaunchByName[];
  rows: LaunchRow[];
  total_rows: number;
}

export interface QueueStream {
  device: number | null;
  stream: number;
  summary: { max: number; mean: number; time_at_max_us: number; time_blocked_us: number };
  series: { t_us: number[]; max: number[] };
}

export interface QueueLengthResponse {
  window: Window;
  bucket_us: number;
  full_queue: number;
  streams: QueueStream[];
}

export interface BandwidthRow {
  device: number | null;
  direction: string;
  count: number;
  without_bytes: number;
  bytes: number;
  busy_us: number;
  mean_gbps: number | null;
  peak_gbps: number;
  series: { t_us: number[]; gbps: number[] };
}

export interface BandwidthResponse {
  window: Window;
  bucket_us: number;
  rows: BandwidthRow[];
}

export interface KernelSequence {
  device: number | null;
  stream: number;
  kernels: string[];
  count: number;
  total_us: number;
  span_us: number;
  gap_us: number;
  occurrences: { id: number; start_us: number; end_us: number }[];
}

export interface KernelSequencesResponse {
  window: Window;
  length: number;
  sequences: KernelSequence[];
}

export interface CriticalSegment {
  start_us: number;
  end_us: number;
  category: string;
  id: number | null;
  name: string | null;
}

export interface CriticalPathResponse {
  /** the trace's steps; empty for a trace without ProfilerStep#N */
  steps: string[];
  /** the step walked; null for an annotation or a time range */
  step: string | null;
  scope: { kind: "step" | "annotation" | "range" | "none"; label: string };
  /** annotations a path can be walked over, longest in total first */
  annotations: { name: string; count: number; total_us: number }[];
  note: string | null;
  start_us: number;
  end_us: number;
  duration_us: number;
  shares: { category: string; us: number; share: number }[];
  segments: CriticalSegment[];
}

export interface AnnotationRow {
  path: string[];
  name: string;
  depth: number;
  count: number;
  host_us: number;
  device_us: number;
  gpu_range_us: number | null;
}

export interface AnnotationsResponse {
  rows: AnnotationRow[];
  has_gpu_ranges: boolean;
}

/** GET ./cupti_counters: CUPTI range-profiler counters per kernel and per operator (empty without counters). */
export interface CuptiCounterRow {
  id: number;
  name: string;
  start_us: number;
  dur_us: number;
  kernel_id: number | null;
  operator: string | null;
  top_operator: string | null;
  /** one value per `metrics` entry; null where the range lacks it */
  values: (number | null)[];
  sass_flops: number | null;
}

export interface CuptiCounterOperator {
  operator: string | null;
  kernels: number;
  values: (number | null)[];
  sass_flops: number | null;
}

export interface CuptiCountersResponse {
  metrics: string[];
  rows: CuptiCounterRow[];
  total_rows: number;
  matched: number;
  join: "kernel name order" | "launch order" | "none";
  operators: CuptiCounterOperator[];
  has_sass_flops: boolean;
}
