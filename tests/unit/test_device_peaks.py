"""The device peak table (analysis/device_peaks): each GPU the issue names matched from its deviceProperties name,
SM count and memory; dense figures (sparsity halved); the user's override; the guide's table and the OpenAPI
parameter's pattern kept in step with the code."""

from __future__ import annotations

import re

import pytest
import yaml

from tb_plugin.analysis.device_peaks import CLASSES, DEVICES, NO_OVERRIDE, match, parse_override, resolve
from tests.conftest import REPO

GIB = 2**30


@pytest.mark.parametrize("name,sms,mem_gib,key", [
    ("Tesla V100-SXM2-16GB", 80, 16, "V100-SXM2"),
    ("Tesla V100-SXM2-32GB", 80, 32, "V100-SXM2"),
    ("Tesla V100-DGXS-32GB", 80, 32, "V100-SXM2"),  # the DGX Station's SXM2 boards (the kineto_v100 traces)
    ("Tesla V100-PCIE-32GB", 80, 32, "V100-PCIe"),
    ("Tesla V100S-PCIE-32GB", 80, 32, "V100S-PCIe"),
    ("NVIDIA A100-SXM4-40GB", 108, 40, "A100-40GB-SXM"),
    ("NVIDIA A100-SXM4-80GB", 108, 80, "A100-80GB-SXM"),
    ("NVIDIA A100-PCIE-40GB", 108, 40, "A100-40GB-PCIe"),
    ("NVIDIA A100 80GB PCIe", 108, 80, "A100-80GB-PCIe"),
    ("NVIDIA H100 80GB HBM3", 132, 80, "H100-SXM"),
    ("NVIDIA H100 PCIe", 114, 80, "H100-PCIe"),
    ("NVIDIA H100", 114, 80, "H100-PCIe"),  # the name alone does not say: 114 SMs is the PCIe card
    ("NVIDIA H100 NVL", 132, 94, "H100-NVL"),
    ("NVIDIA H200", 132, 140, "H200-SXM"),
    ("NVIDIA H200 NVL", 132, 140, "H200-NVL"),
    ("NVIDIA B200", 148, 179, "B200"),
    ("NVIDIA L4", 58, 22, "L4"),
    ("NVIDIA L40S", 142, 44, "L40S"),
    ("AMD Instinct MI250X", 110, 64, "MI250X-GCD"),  # PyTorch sees one GCD: half the package
    ("AMD Instinct MI300X", 304, 192, "MI300X"),
    ("NVIDIA GeForce RTX 4090", 128, 24, None),
    ("NVIDIA L40", 142, 44, None),
    (None, None, None, None),
])
def test_devices_are_matched_from_their_properties(name: str | None, sms: int | None, mem_gib: int | None,
                                                    key: str | None) -> None:
    found = match(name, sms, mem_gib * GIB if mem_gib else None)
    assert (found.key if found else None) == key


def test_figures_are_dense_and_from_the_datasheets() -> None:
    by = {d.key: d for d in DEVICES}
    # H100 SXM: 1,979 TFLOPS BF16 and 989 TF32 with sparsity (halved), 67 FP32, 3.35 TB/s
    assert by["H100-SXM"].peak("bf16") == 989.5e12 and by["H100-SXM"].peak("tf32") == 494.5e12
    assert by["H100-SXM"].peak("fp32") == 67e12 and by["H100-SXM"].bandwidth == 3350e9
    assert by["A100-80GB-SXM"].peak("bf16") == 312e12 and by["A100-80GB-SXM"].bandwidth == 2039e9
    assert by["A100-40GB-PCIe"].bandwidth == 1555e9 and by["A100-80GB-PCIe"].bandwidth == 1935e9
    assert by["V100-SXM2"].peak("fp16") == 125e12 and by["V100-SXM2"].peak("bf16") is None
    assert by["MI300X"].peak("bf16") == 1307.4e12 and by["L40S"].peak("bf16") == 362.05e12
    for d in DEVICES:
        assert d.source and d.bandwidth > 0 and d.peak("fp32")
        tensor = [d.peak(c) for c in ("tf32", "bf16", "fp16", "fp8") if d.peak(c)]
        assert all(t >= d.peak("fp32") for t in tensor), d.key  # tensor cores beat CUDA cores


def test_the_override_replaces_figures_and_says_what_is_wrong() -> None:
    h100 = match("NVIDIA H100 80GB HBM3", 132, 80 * GIB)
    capped = resolve(h100, parse_override("bf16=700, bw=3000"))
    assert capped is not None and capped.peak("bf16") == 700e12 and capped.peak("fp32") == 67e12
    assert capped.bandwidth == 3000e9 and "bf16=700" in capped.source
    picked = resolve(None, parse_override("device=h200-sxm"))
    assert picked is not None and picked.key == "H200-SXM"
    custom = resolve(None, parse_override("fp32=20"))
    assert custom is not None and custom.peak("fp32") == 20e12 and custom.peak("bf16") is None
    assert resolve(h100, NO_OVERRIDE) is h100 and resolve(None, NO_OVERRIDE) is None
    for bad, why in (("bf16", "not key=value"), ("bf16=fast", "not a number"), ("fp32=-3", "positive"),
                     ("tflops=3", "unknown key"), ("device=TPUv5", "unknown device")):
        with pytest.raises(ValueError, match=why):
            parse_override(bad)


def test_the_guide_and_the_openapi_pattern_follow_the_table() -> None:
    guide = (REPO / "docs" / "guide" / "roofline.md").read_text()
    for d in DEVICES:
        row = next((line for line in guide.splitlines() if line.startswith(f"| `{d.key}` |")), None)
        assert row is not None, d.key
        cells = [c.strip() for c in row.strip("|").split("|")]
        shown = ["—" if d.peak(c) is None else f"{d.peak(c) / 1e12:g}" for c in CLASSES]
        assert cells[2:2 + len(CLASSES)] == shown and cells[2 + len(CLASSES)] == f"{d.bandwidth / 1e9:g}", d.key
    spec = yaml.safe_load((REPO / "docs" / "api" / "openapi.yaml").read_text())
    pattern = spec["components"]["parameters"]["peaks"]["schema"]["pattern"]
    for d in DEVICES:
        assert re.fullmatch(pattern, f"device={d.key},bf16=700.5,bw=3000"), d.key
