"""TensorBoard, the API, the CLI and capture's requester side never import torch: only a training job does, and
only when it calls ``tb_plugin.capture.enable`` (the job side imports torch inside the functions that need it)."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import REPO

PACKAGE = REPO / "tb_plugin"
# the training script's side: where torch may be imported, and only inside functions
JOB_SIDE = {"capture/agent.py", "capture/session.py", "capture/memory.py"}


def torch_imports(source: str) -> list[tuple[int, bool]]:
    """(line, inside a function) of every import of torch in a module."""
    tree = ast.parse(source)
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names = [a.name for a in child.names] if isinstance(child, ast.Import) else \
                [child.module or ""] if isinstance(child, ast.ImportFrom) and not child.level else []
            if any(n == "torch" or n.startswith("torch.") for n in names):
                found.append((child.lineno, inside))
            visit(child, inside)

    visit(tree, False)
    return found


def test_only_the_job_side_imports_torch_and_only_inside_functions() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        for line, inside in torch_imports(path.read_text()):
            if rel not in JOB_SIDE or not inside:
                offenders.append(f"{rel}:{line}")
    assert offenders == []
    assert torch_imports("import torch\ndef f():\n    from torch.profiler import profile\n") == [(1, False), (3, True)]


def test_loading_the_plugin_the_cli_and_capture_imports_no_torch() -> None:
    code = ("import sys\n"
            "import tb_plugin.plugin, tb_plugin.api.routes, tb_plugin.cli, tb_plugin.cli.capture\n"
            "import tb_plugin.capture, tb_plugin.capture.agent, tb_plugin.capture.requests, tb_plugin.capture.__main__\n"
            "from tb_plugin.cli import parser\n"
            "parser()\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_capture_command_loads_none_of_the_analysis_stack() -> None:
    """``pytorch-tb-profiler capture`` runs beside training jobs, often where only torch is: a few small files, no
    pandas, pyarrow or numpy (the other commands import them when they run)."""
    code = ("import sys\n"
            "from tb_plugin.cli import parser\n"
            "parser().parse_args(['capture', 'x'])\n"
            "import tb_plugin.cli.capture, tb_plugin.capture.requests, tb_plugin.capture.agent\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'pyarrow', 'plotly', 'tensorboard') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
