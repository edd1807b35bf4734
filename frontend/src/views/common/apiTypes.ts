/**
 * The JSON of ./overview, ./operators and ./kernels (see docs/api/openapi.yaml). Times are µs,
 * ratios fractions 0..1, null = missing. Render code still treats every field defensively.
 */

export type Breakdown = Record<string, number>;

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
  /** kernels only */
  utilization: number | null;
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
  framework?: string | null;
}

/** A link from a finding to the place in another view that shows its evidence. */
export interface Evidence {
  view: "Trace" | "Operator" | "Kernel" | "Distributed" | "Memory" | "Overview";
  params: { start_us?: number; end_us?: number; q?: string; rank?: number; device?: string; worker?: string };
  label: string;
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
}

export interface Verdict {
  kind: string;
  id: string | null;
  text: string;
  saving_us: number;
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
}

export type OperatorGrouping = "name" | "name_shape" | "name_stack";

export interface OperatorRow {
  name: string;
  calls: number;
  host_self_us: number;
  host_total_us: number;
  device_self_us: number;
  device_total_us: number;
  device_total_wall_us: number;
  tc_eligible: boolean;
  tc_self_ratio: number;
  tc_total_ratio: number;
  input_shape?: string;
  call_stack?: string;
}

export interface OperatorsResponse {
  group_by: OperatorGrouping;
  device_time: "sum";
  rows: OperatorRow[];
  totals?: { device_sum_us?: number; device_busy_us?: number };
  has_call_stacks?: boolean;
  has_input_shapes?: boolean;
}

export type KernelGrouping = "name" | "name_op";

export interface KernelRow {
  name: string;
  calls: number;
  total_us: number;
  mean_us: number;
  min_us: number;
  max_us: number;
  tensor_cores: boolean;
  blocks_per_sm: number | null;
  achieved_occupancy: number | null;
  streams: number[];
  operator?: string;
  op_tc_eligible?: boolean;
  grid?: string | null;
  block?: string | null;
  registers_per_thread?: number | null;
  shared_memory?: number | null;
}

export interface KernelsResponse {
  group_by: KernelGrouping;
  tensor_core_ratio: number | null;
  rows: KernelRow[];
}
