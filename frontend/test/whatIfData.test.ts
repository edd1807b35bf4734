/** whatIfData.ts: the what-if panel's toggles, its query and its bars, without a DOM. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { changesParam, initialSelection, savingShare, segments, toggles } from "../src/views/overview/whatIfData";

const FINDINGS = [
  { id: "sync_bound", title: "Sync-bound", what_if: { label: "keep values on the GPU", saving_us: 8000 } },
  { id: "outlier_steps", title: "Outlier steps", what_if: null },
  { id: "low_tensor_cores", title: "Low tensor-core use", what_if: { label: "TF32 matmuls", saving_us: -1 } },
];

describe("toggles", () => {
  it("lists the findings with a replayable fix, in order, savings never below zero", () => {
    assert.deepEqual(toggles(FINDINGS), [
      { id: "sync_bound", title: "Sync-bound", label: "keep values on the GPU", aloneUs: 8000 },
      { id: "low_tensor_cores", title: "Low tensor-core use", label: "TF32 matmuls", aloneUs: 0 },
    ]);
  });
  it("opens on the verdict's finding when it can be replayed, else on none", () => {
    const order = toggles(FINDINGS);
    assert.deepEqual([...initialSelection(order, "sync_bound")], ["sync_bound"]);
    assert.deepEqual([...initialSelection(order, "outlier_steps")], []);
    assert.deepEqual([...initialSelection(order, null)], []);
  });
});

describe("changesParam", () => {
  it("joins the selected ids in the panel's order, whatever the order they were picked in", () => {
    const order = toggles(FINDINGS);
    assert.equal(changesParam(order, new Set(["low_tensor_cores", "sync_bound"])), "sync_bound,low_tensor_cores");
    assert.equal(changesParam(order, new Set()), "");
    assert.equal(changesParam(order, new Set(["unknown"])), "");
  });
});

describe("segments", () => {
  it("scales each category to the wider bar, in the breakdown's order, empty ones left out", () => {
    const s = segments({ Kernel: 300, Memcpy: 0, Runtime: 100, Other: 100, Extra: 100 }, 1000);
    assert.deepEqual(s.map((x) => [x.category, x.share]), [["Kernel", 0.3], ["Runtime", 0.1], ["Other", 0.1], ["Extra", 0.1]]);
    assert.equal(s[0]?.color, "#4e79a7");
    assert.deepEqual(segments({ Kernel: 10 }, 0), []);
    assert.deepEqual(segments({ Kernel: Number.NaN }, 10), []);
  });
  it("savingShare is the saving over the baseline", () => {
    assert.equal(savingShare({ baseline_step_us: 200, saving_us: 50 }), 0.25);
    assert.equal(savingShare({ baseline_step_us: 0, saving_us: 50 }), 0);
  });
});
