/** The Overview findings' "Where:" line: the user's frame as a source link, then the call, module and regions. */
import { container, testids } from "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Where } from "../src/views/common/apiTypes";
import { moduleLabel, whereLine, whereParts } from "../src/views/overview/findingWhere";

const where: Where = {
  text: "train.py:40 (train_step) → torch.cuda.memory.empty_cache, in nn.Module Linear, inside 'forward'",
  frame: "train.py(40): train_step",
  calls: "torch/cuda/memory.py(222): empty_cache",
  api: "torch.cuda.memory.empty_cache",
  module: "nn.Module: Linear_3",
  region: "forward",
  annotation: "DistributedDataParallel.forward",
  share: 0.78,
};

describe("finding location", () => {
  it("words the parts after the frame as the server does", () => {
    assert.equal(moduleLabel("nn.Module: Linear_3"), "nn.Module Linear");
    assert.deepEqual(whereParts(where), ["→ torch.cuda.memory.empty_cache", "in nn.Module Linear",
      "inside 'forward' and 'DistributedDataParallel.forward'"]);
    // an annotation that is the API itself is not repeated
    assert.deepEqual(whereParts({ ...where, module: null, region: null, annotation: "torch.cuda.memory.empty_cache" }),
      ["→ torch.cuda.memory.empty_cache"]);
  });

  it("renders the frame as a source button and the rest as text", () => {
    const el = container();
    const line = whereLine(where);
    assert.ok(line);
    el.append(line);
    assert.deepEqual(testids(el), ["finding-where", "frame"]);
    const frame = el.querySelector("[data-testid=frame]");
    assert.ok(frame);
    assert.equal(frame.getAttribute("data-path"), "train.py");
    assert.equal(frame.getAttribute("data-line"), "40");
    assert.match(el.textContent, /→ torch\.cuda\.memory\.empty_cache, in nn\.Module Linear/);
    assert.match(el.textContent, /\(78 % of it\)/);
  });

  it("has no line without a location, and renders trace strings as text", () => {
    assert.equal(whereLine(null), null);
    assert.equal(whereLine({ ...where, text: "" }), null);
    const el = container();
    const line = whereLine({ ...where, frame: null, api: null, module: null, annotation: null, region: "<img src=x onerror=alert(1)>" });
    assert.ok(line);
    el.append(line);
    assert.equal(el.querySelector("img"), null);
    assert.match(el.textContent, /inside '<img src=x onerror=alert\(1\)>'/);
  });
});
