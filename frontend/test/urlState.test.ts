/** urlState.ts: the deep-link keys in TensorBoard's hash, read and rewritten without disturbing other parts. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  hashWithState,
  hashWithViewState,
  linkedViewState,
  parseHash,
  stateFromHash,
  viewKeysSet,
  viewStateFromHash,
} from "../src/urlState";

const P = "p.pytorch_profiler.";

describe("parseHash", () => {
  it("splits parts, decodes keys and values, keeps bare parts and the raw text", () => {
    assert.deepEqual(parseHash(""), []);
    assert.deepEqual(parseHash("#"), []);
    assert.deepEqual(parseHash("#pytorch_profiler&p.x.run=a%20b"), [
      { key: "pytorch_profiler", value: null, raw: "pytorch_profiler" },
      { key: "p.x.run", value: "a b", raw: "p.x.run=a%20b" },
    ]);
    // a broken escape is kept as written instead of throwing
    assert.deepEqual(parseHash("k=%E0%A4%A"), [{ key: "k", value: "%E0%A4%A", raw: "k=%E0%A4%A" }]);
    assert.deepEqual(parseHash("a=b=c"), [{ key: "a", value: "b=c", raw: "a=b=c" }]);
  });
});

describe("the shell's keys", () => {
  it("stateFromHash reads only our run/worker/span/view, never empty values or other plugins' keys", () => {
    const hash = `#pytorch_profiler&${P}run=resnet%2F50&${P}worker=vm_1&${P}span=&${P}view=Kernel&${P}start=5&p.other.run=x`;
    assert.deepEqual(stateFromHash(hash), { run: "resnet/50", worker: "vm_1", view: "Kernel" });
  });

  it("hashWithState replaces our keys and keeps every other part byte for byte, view keys included", () => {
    const hash = `#pytorch_profiler&${P}run=old&${P}q=aten%3A%3Amm&scalars_tag=x%20y`;
    const next = hashWithState(hash, { run: "new run", span: "2", worker: "" });
    assert.equal(next, `#pytorch_profiler&${P}q=aten%3A%3Amm&scalars_tag=x%20y&${encodeURIComponent(P + "run")}=new%20run&${encodeURIComponent(P + "span")}=2`);
    assert.deepEqual(stateFromHash(next), { run: "new run", span: "2" });
    assert.equal(hashWithState(`#${P}run=a`, {}), "");
  });

  it("round-trips names with every character that needs escaping", () => {
    const run = "a&b=c#d %/é";
    assert.deepEqual(stateFromHash(hashWithState("#pytorch_profiler", { run })), { run });
  });
});

describe("the views' keys", () => {
  it("viewStateFromHash reads start/end/q/exp_*/rank/device only", () => {
    const hash = `#${P}run=r&${P}start=10.5&${P}end=20&${P}q=nccl&${P}rank=3&${P}device=GPU0&${P}exp_run=b&${P}bogus=1`;
    assert.deepEqual(viewStateFromHash(hash), { start: "10.5", end: "20", q: "nccl", rank: "3", device: "GPU0", exp_run: "b" });
  });

  it("hashWithViewState sets and removes only the keys it is given", () => {
    const hash = `#pytorch_profiler&${P}run=r&${P}start=1&${P}end=2`;
    const next = hashWithViewState(hash, { start: undefined, q: "aten::mm" });
    assert.equal(next, `#pytorch_profiler&${P}run=r&${P}end=2&${encodeURIComponent(P + "q")}=aten%3A%3Amm`);
    assert.deepEqual(viewStateFromHash(next), { end: "2", q: "aten::mm" });
    assert.deepEqual(stateFromHash(next), { run: "r" });
    // a key outside the list is ignored, not written
    assert.equal(hashWithViewState("#x", { nope: "1" } as never), "#x");
  });
});

describe("history entries of links", () => {
  it("viewKeysSet: the view keys a link set for the page it opens, not those carried over or removed", () => {
    const before = `#pytorch_profiler&${P}view=Operator&${P}start=5&${P}q=old`;
    const after = `#pytorch_profiler&${P}view=Kernel&${P}start=5&${P}op=aten%3A%3Amm`;
    assert.deepEqual(viewKeysSet(before, after), { op: "aten::mm" });
    assert.deepEqual(viewKeysSet(after, after), {});
  });

  it("linkedViewState reads ours from an entry's state object and ignores anything else", () => {
    assert.deepEqual(linkedViewState({ pytorchProfilerLink: { op: "aten::mm", q: "", bogus: "x", start: 5 } }), { op: "aten::mm" });
    for (const state of [null, undefined, 3, "x", { navigationId: 2 }, { pytorchProfilerLink: null }]) assert.deepEqual(linkedViewState(state), {});
  });
});
