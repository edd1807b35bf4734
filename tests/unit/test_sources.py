"""Source files of call stacks: the user's code vs library files, and absolute paths where the trace tells them."""

from __future__ import annotations

from pathlib import Path

from tb_plugin.analysis.sources import classify, frame_path, library_roots, resolve, source_files
from tb_plugin.loader import load_trace
from tests.conftest import SAMPLES

SITE = "/home/u/env/lib/python3.11/site-packages"


def test_frame_path_takes_the_file_of_source_frames_only() -> None:
    assert frame_path("torch/nn/modules/linear.py(130): forward") == "torch/nn/modules/linear.py"
    assert frame_path("/a b/train (v2).py(107): train_step") == "/a b/train (v2).py"
    assert frame_path("nn.Module: Linear_0") is None
    assert frame_path("<built-in method mm of type object at 0x7f>") is None


def test_relative_paths_are_library_files_by_their_first_component() -> None:
    roots: dict[str, str] = {}
    assert classify("torch/nn/modules/conv.py", roots) == "library"
    assert classify("typing.py", roots) == "library"  # standard library module
    assert classify("multiprocessing/spawn.py", roots) == "library"
    assert classify("lightning/pytorch/trainer/trainer.py", roots) == "library"
    assert classify("<frozen os>", roots) == "library"
    assert classify("train.py", roots) == "user"
    assert classify("mypkg/model.py", roots) == "user"
    # a package the trace shows under site-packages is a library, also when the list above does not know it
    assert classify("mypkg/model.py", {"mypkg": SITE}) == "library"


def test_absolute_paths() -> None:
    assert classify(f"{SITE}/torch/nn/modules/module.py", {}) == "library"
    assert classify("/usr/lib/python3.12/typing.py", {}) == "library"
    assert classify("/usr/lib/python3/dist-packages/numpy/core/x.py", {}) == "library"
    assert classify("/home/u/project/train.py", {}) == "user"
    assert classify("/tmp/torchinductor_root/aw/cawro.py", {}) == "generated"
    assert classify("<string>", {}) == "generated"


def test_relative_library_files_resolve_where_the_trace_shows_their_folder() -> None:
    roots = library_roots([f"{SITE}/torch/autograd/profiler.py", "/usr/lib/python3.11/typing.py", "train.py"])
    assert roots == {"torch": SITE, "": "/usr/lib/python3.11"}
    assert resolve("torch/nn/modules/conv.py", "library", roots) == f"{SITE}/torch/nn/modules/conv.py"
    assert resolve("enum.py", "library", roots) == "/usr/lib/python3.11/enum.py"
    assert resolve("numpy/core/x.py", "library", roots) is None  # numpy's folder is not in the trace
    assert resolve("train.py", "user", roots) is None
    assert resolve("/home/u/train.py", "user", roots) == "/home/u/train.py"


def test_pytorch_2x_trace_has_one_user_file_among_library_files() -> None:
    path = next((SAMPLES / "transformer_bf16").glob("*.pt.trace.json.gz"))
    files = {f["path"]: f for f in source_files(load_trace(str(path)))["files"]}
    users = sorted(p for p, f in files.items() if f["kind"] == "user")
    assert users == ["transformer_bf16.py"]
    assert files["torch/nn/modules/module.py"]["kind"] == "library"
    assert files["torch/nn/modules/module.py"]["absolute"] is None  # 2.x writes no absolute path to learn from
    assert files["typing.py"]["kind"] == "library"


def test_pytorch_1x_trace_gives_absolute_library_paths(real_traces: Path) -> None:
    path = real_traces / "kineto_v100" / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz"
    out = source_files(load_trace(str(path)))
    files = {f["path"]: f for f in out["files"]}
    site = "/home/yangu/anaconda3/envs/kineto/lib/python3.7/site-packages"
    assert out["library_roots"] == {"torch": site, "torchvision": site}
    assert files["resnet50_profiler_api.py"]["kind"] == "user"
    conv = files[f"{site}/torch/nn/modules/conv.py"]
    assert conv["kind"] == "library" and conv["absolute"] == f"{site}/torch/nn/modules/conv.py"
    assert [p for p, f in files.items() if f["kind"] == "user"] == ["resnet50_profiler_api.py"]
