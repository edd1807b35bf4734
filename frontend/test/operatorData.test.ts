/** views/operatorData.ts: the Operator page's totals, columns, groupings and page size. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  groupingUnsupported,
  hasWallTime,
  type OperatorRow,
  operatorRowKey,
  type OperatorsResponse,
  operatorSummary,
  rowsThatFit,
} from "../src/views/operator/operatorData";

function row(name: string, deviceTotal: number, wall = deviceTotal): OperatorRow {
  return { name, calls: 1, host_self_us: 5, host_total_us: 9, device_self_us: deviceTotal, device_total_us: deviceTotal,
    device_total_wall_us: wall, tc_eligible: false, tc_self_ratio: 0, tc_total_ratio: 0, has_call_stack: false };
}

function answer(rows: OperatorRow[], totals: OperatorsResponse["totals"]): OperatorsResponse {
  return { group_by: "name", device_time: "sum", totals, rows };
}

describe("operatorSummary", () => {
  it("reports overlap only where the summed GPU work exceeds the busy time by more than 1%", () => {
    const overlapping = operatorSummary(answer([row("aten::mm", 1000)], { device_sum_us: 1000, device_busy_us: 980 }));
    assert.deepEqual([overlapping.sumUs, overlapping.busyUs, overlapping.device, overlapping.overlap], [1000, 980, true, true]);
    // 1000 vs 991: 0.9% apart, within the 1% tolerance
    assert.equal(operatorSummary(answer([row("aten::mm", 1000)], { device_sum_us: 1000, device_busy_us: 991 })).overlap, false);
  });

  it("a host-only trace has no device time; a row's device time counts even without totals", () => {
    const host = operatorSummary(answer([row("aten::add", 0)], {}));
    assert.deepEqual([host.sumUs, host.busyUs, host.device, host.overlap], [0, 0, false, false]);
    assert.equal(operatorSummary(answer([row("aten::add", 3)], {})).device, true);
  });
});

describe("operator columns and groupings", () => {
  it("hasWallTime: a device wall that differs from the device total beyond rounding", () => {
    assert.equal(hasWallTime([row("a", 100), row("b", 50, 50.00001)]), false);
    assert.equal(hasWallTime([row("a", 100), row("b", 50, 40)]), true);
  });

  it("groupingUnsupported: only what the trace says it lacks", () => {
    assert.equal(groupingUnsupported("name_shape", { has_input_shapes: false }), "This trace has no input shapes (record with record_shapes=True).");
    assert.equal(groupingUnsupported("name_stack", { has_call_stacks: false }), "This trace has no call stacks (record with with_stack=True).");
    assert.equal(groupingUnsupported("name_stack", {}), null);
    assert.equal(groupingUnsupported("name", { has_input_shapes: false, has_call_stacks: false }), null);
  });

  it("operatorRowKey and rowsThatFit", () => {
    assert.equal(operatorRowKey({ name: "aten::mm", input_shape: "[[2, 3]]" }), "aten::mm\u0000[[2, 3]]\u0000");
    assert.equal(rowsThatFit(1000), 30); // (1000 - 140) / 28 = 30.7
    assert.equal(rowsThatFit(300), 15);
    assert.equal(rowsThatFit(5000), 100);
  });
});
