"""The Memory view's "Memory by category" card in the real TensorBoard: torch's categories for a run with
``export_memory_timeline`` output beside it, inferred (and labelled so) ones without, checked against the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.conftest import SAMPLES, TensorBoard, link_or_copy, table_rows
from tests.browser.test_memory_module import api, fmt_bytes, fmt_ms, open_view
from tests.unit.test_memory_categories import synthetic_training_step

pytestmark = pytest.mark.browser

EXPORTED = ("transformer_bf16_exports", "vm_1726")
INFERRED = ("transformer_bf16", "vm_699")
BROKEN = ("mix", "w")
CARD = "[data-testid=card-memory-categories]"
LABELS = {"parameter": "Parameter", "optimizer_state": "Optimizer state", "input": "Input", "temporary": "Temporary",
          "activation": "Activation", "gradient": "Gradient", "autograd_detail": "Autograd detail", "unknown": "Unknown"}


@pytest.fixture(scope="module")
def tb_memcat(tmp_path_factory: pytest.TempPathFactory, tb_factory: Callable[..., TensorBoard]) -> TensorBoard:
    """The recorded run with torch's exports in ``exports/`` beside it (as samples/ lays them out), a run of
    another recording without exports, and a run whose export beside the trace is broken."""
    root = tmp_path_factory.mktemp("logdir_memcat")
    for run in ("transformer_bf16_exports", "transformer_bf16"):
        for f in sorted((SAMPLES / run).glob("*.pt.trace.json.gz")):
            link_or_copy(f, root / run / f.name)
    for f in sorted((SAMPLES / "exports" / "transformer_bf16_exports").iterdir()):
        link_or_copy(f, root / "exports" / "transformer_bf16_exports" / f.name)
    synthetic_training_step(root / "mix" / "w.1.pt.trace.json")
    (root / "mix" / "memory_timeline.json").write_text("[[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]")
    tb = tb_factory(root)
    tb.wait_settled(timeout=180)
    return tb


def card_settled(frame: Any, device: str) -> dict[str, str]:
    frame.wait_for_function(
        f"() => {{ const c = document.querySelector('{CARD}'); return c && c.dataset.loading === 'false' "
        f"&& c.dataset.device === '{device}'; }}")
    state: dict[str, str] = frame.eval_on_selector(CARD, "el => ({...el.dataset})")
    return state


def chart(frame: Any) -> dict[str, Any]:
    frame.wait_for_selector(f"{CARD} [data-testid=memcat-chart] .main-svg")
    out: dict[str, Any] = frame.evaluate("""() => {
        const gd = document.querySelector('[data-testid=memcat-chart]');
        return {names: gd.data.map(t => t.name), stack: gd.data.map(t => t.stackgroup), n: gd.data.map(t => t.x.length),
                y: gd.layout.yaxis.title.text, peak_x: gd.layout.shapes[0].x0};
    }""")
    return out


def peak_rows(frame: Any) -> list[list[str]]:
    rows: list[list[str]] = frame.eval_on_selector_all(
        "[data-testid=memcat-peak-row]", "trs => trs.map(tr => [...tr.children].map(td => td.innerText.trim()))")
    return rows


def test_torch_export_categories_are_shown_with_their_source(page: Any, tb_memcat: TensorBoard) -> None:
    body = api(tb_memcat, "memory_categories", EXPORTED)
    assert body["source"] == "export" and body["device"] == "GPU0"
    origin, peak = body["start_us"], body["peak"]
    frame = open_view(page, tb_memcat, EXPORTED, "Memory")
    state = card_settled(frame, "GPU0")
    assert state["source"] == "export"
    assert frame.inner_text("[data-testid=memcat-source]") == "torch export"
    origin_text = frame.inner_text("[data-testid=memcat-origin]")
    assert "exports/transformer_bf16_exports/memory_timeline.json.gz" in origin_text
    assert "memory_timeline.raw.json.gz" in origin_text and "vm_1726.1795685563239202016.pt.trace.json.gz" in origin_text
    # the stacked chart: one area per category torch gave bytes to, in torch's order, every exported row
    shown = chart(frame)
    with_bytes = [LABELS[c] for i, c in enumerate(body["categories"]) if any(r[i] for r in body["series"]["bytes"])]
    assert shown["names"] == with_bytes and set(shown["stack"]) == {"memory"}
    assert shown["n"] == [1852] * len(with_bytes) and shown["y"] == "Memory (MiB)"
    assert shown["peak_x"] == pytest.approx((peak["time_us"] - origin) / 1000)
    # the peak: the memory curve's (the allocator's 706,943,488 B), the same line as the curve card above; torch's
    # categories hold 638,784,632 B of it, each beside the inference's bytes, the rest in no category
    curve = api(tb_memcat, "memory/curve", EXPORTED)["devices"]["GPU0"]
    assert (peak["total_bytes"], peak["time_us"]) == (curve["peak_allocated_bytes"], curve["peak_time_us"]) == (
        706_943_488, curve["peak_time_us"])
    assert frame.inner_text("[data-testid=memory-peak]").startswith(f"Peak {fmt_bytes(706_943_488)}")
    share = 334_239_232 / 706_943_488
    assert frame.inner_text("[data-testid=memcat-peak]") == (
        f"Peak {fmt_bytes(706_943_488)} at {fmt_ms(peak['time_us'] - origin)} · mostly Activation ({share:.1%})")
    rows = peak_rows(frame)
    assert rows[0] == ["Activation", fmt_bytes(334_239_232), f"{share:.1%}", fmt_bytes(334_239_232), "0.0%"]
    by_name = {r[0]: r for r in rows}
    assert by_name["Optimizer state"][1:3] == [fmt_bytes(134_479_952), f"{134_479_952 / 706_943_488:.1%}"]
    assert by_name["Optimizer state"][3:] == [fmt_bytes(138_675_200), "+3.1%"]
    assert by_name["Parameter"][4] == "+3.1%" and by_name["Temporary"][1] == "0 B"
    assert rows[-1][:3] == ["In no category", fmt_bytes(68_158_856), f"{68_158_856 / 706_943_488:.1%}"]
    assert [r[0] for r in rows[:-1]] == [LABELS[k] for k, _ in sorted(
        ((k, v) for k, v in peak["by_category"].items() if v or body["inferred_at_peak"][k]),
        key=lambda kv: (-kv[1], LABELS[kv[0]]))]
    note = frame.inner_text("[data-testid=memcat-peak-note]")
    assert note.startswith(f"At the memory curve's peak (above). Torch's categories add up to {fmt_bytes(638_784_632)}")
    assert f"their own largest total is {fmt_bytes(638_784_632)}" in note
    # the largest allocations live at the peak, torch's category from the raw export; the stack opens
    top = table_rows(frame, "memcat-allocations")
    assert len(top) == len(peak["top_allocations"]) == 10
    assert (top[0]["bytes"], top[0]["category"], top[0]["operator"]) == ("64.0 MiB", "Unknown", "aten::sum")
    assert top[0]["alloc"] == fmt_ms(peak["top_allocations"][0]["alloc_us"] - origin)
    frame.click("[data-testid=memcat-allocations] tbody tr[data-testid=row] [data-testid=row-expand]")
    frame.wait_for_selector("[data-testid=memcat-allocations] [data-testid=frames]")
    # the user's frames lead; library frames (torch's autograd here) open with "+N more frames"
    frame.click("[data-testid=memcat-allocations] [data-testid=frames-more]")
    frames = frame.eval_on_selector_all("[data-testid=memcat-allocations] [data-testid=frame]", "els => els.map(e => e.innerText)")
    assert any("torch/autograd/graph.py:860" in f for f in frames)


def test_inferred_categories_are_labelled_and_follow_the_device(page: Any, tb_memcat: TensorBoard) -> None:
    body = api(tb_memcat, "memory_categories", INFERRED)
    assert body["source"] == "inferred" and body["export"] is None and body["device"] == "GPU0"
    frame = open_view(page, tb_memcat, INFERRED, "Memory")
    state = card_settled(frame, "GPU0")
    assert state["source"] == "inferred"
    assert frame.inner_text("[data-testid=memcat-source]") == "inferred"
    assert frame.inner_text("[data-testid=memcat-origin]").startswith("Inferred from vm_699.")
    shown = chart(frame)
    assert shown["names"] == [LABELS[c] for i, c in enumerate(body["categories"])
                              if any(r[i] for r in body["series"]["bytes"])]
    rows = peak_rows(frame)
    assert all(len(r) == 3 for r in rows)  # no comparison columns without an export
    peak = body["peak"]
    assert {r[0]: r[1] for r in rows} == {LABELS[k]: fmt_bytes(v) for k, v in peak["by_category"].items() if v}
    assert peak["dominant"] == "activation"
    # the device picker of the Memory view drives the card too
    cpu = api(tb_memcat, "memory_categories", INFERRED, device="CPU")
    frame.select_option("[data-testid=memory-device]", "CPU")
    card_settled(frame, "CPU")
    assert frame.inner_text("[data-testid=memcat-peak]").startswith(f"Peak {fmt_bytes(cpu['peak']['total_bytes'])} at")
    top = table_rows(frame, "memcat-allocations")
    assert [r["bytes"] for r in top] == [fmt_bytes(a["bytes"]) for a in cpu["peak"]["top_allocations"]]


def test_a_broken_export_is_named_and_the_inference_still_shows(page: Any, tb_memcat: TensorBoard) -> None:
    frame = open_view(page, tb_memcat, BROKEN, "Memory")
    card_settled(frame, "GPU0")
    note = frame.inner_text("[data-testid=memcat-export-errors]")
    assert "memory_timeline.json: 2 times but 1 size rows; the export is cut or edited" in note
    assert frame.inner_text("[data-testid=memcat-source]") == "inferred"
    assert frame.inner_text("[data-testid=memcat-peak]").startswith(f"Peak {fmt_bytes(11_464)} at 0.52 ms")
    top = table_rows(frame, "memcat-allocations")
    assert [(r["bytes"], r["category"], r["operator"]) for r in top] == [
        ("1000 B", "Activation", "aten::linear"), ("400 B", "Gradient", "aten::mm"),
        ("300 B", "Gradient", "(before profiling)"), ("64 B", "Input", "aten::to")]
    assert top[2]["alloc"] == "before profiling"
