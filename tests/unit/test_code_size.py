"""Short functions that do one thing: no Python function in ``tb_plugin/`` over 80 lines, no TypeScript function in
``frontend/src/`` over 80 either (declarations, methods, arrows and function expressions alike; nested ones count on
their own and inside their parent), and no TypeScript class over 400 lines (a page's class is split into
controllers, as the Trace view's and the shell's are).

A long function mixes fetching, state and rendering, or several steps of an analysis, and is where bugs hide; the
limit makes a reviewer split it rather than grow it.
"""

from __future__ import annotations

import ast
import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PY_LIMIT = 80
TS_LIMIT = 80
TS_CLASS_LIMIT = 400



def python_offenders(root: Path, limit: int = PY_LIMIT) -> list[str]:
    """``path:line name (N lines)`` of every function of ``root/**/*.py`` longer than ``limit`` lines, counted from
    its first decorator to its last line."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > limit:
                    out.append(f"{path.relative_to(root.parent)}:{first} {node.name} ({lines} lines)")
    return out


def typescript_offenders(limit: int = TS_LIMIT, folder: Path | None = None, kind: str = "function",
                         class_limit: int = TS_CLASS_LIMIT) -> list[str]:
    """The same for ``frontend/src/**/*.ts`` (or ``folder``), parsed by the TypeScript compiler
    (``frontend/scripts/function-sizes.mjs``), so braces inside strings, regular expressions and templates never
    miscount; ``kind`` "class" gives the classes over ``class_limit`` lines instead."""
    return [f"{o['file']}:{o['line']} {o['name']} ({o['lines']} lines)"
            for o in _measured(limit, folder, class_limit) if o["kind"] == kind]


@functools.cache
def _measured(limit: int, folder: Path | None, class_limit: int) -> tuple[dict[str, Any], ...]:
    """The script's answer (functions and classes over their limits), once per set of arguments: a run of the
    compiler takes 1-2 s on the 2-core machine, and the tests ask for both kinds of the same files."""
    node = shutil.which("node")
    assert node, "node is needed to measure the TypeScript functions (make install-dev installs the frontend)"
    assert (REPO / "frontend" / "node_modules" / "typescript").exists(), "run `npm ci` in frontend/ first"
    args = [node, "scripts/function-sizes.mjs", str(limit), str(folder) if folder else "", str(class_limit)]
    done = subprocess.run(args, cwd=REPO / "frontend", capture_output=True, text=True, timeout=120, check=True)
    return tuple(json.loads(done.stdout))


def test_no_python_function_over_80_lines() -> None:
    """No exceptions for Python: a long function is split before it is merged."""
    offenders = python_offenders(REPO / "tb_plugin")
    assert not offenders, "split these into short functions that do one thing:\n" + "\n".join(offenders)


def test_no_typescript_function_over_80_lines() -> None:
    """No exceptions for TypeScript either: every view's render() is split into a data module and card builders."""
    offenders = typescript_offenders()
    assert not offenders, "split these into short functions that do one thing:\n" + "\n".join(offenders)


def test_no_typescript_class_over_400_lines() -> None:
    """A class that holds a page's every concern (toolbar, fetching, input, painting) is split into controllers."""
    offenders = typescript_offenders(kind="class")
    assert not offenders, "split these into controllers that each own one concern:\n" + "\n".join(offenders)


def test_the_measures_find_a_long_function(tmp_path: Path) -> None:
    """The scans are not vacuous: an 81-line Python function and a 151-line arrow inside a class are found, one
    line shorter is not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "long.py").write_text(f"@staticmethod\ndef long():\n{body}    return 0\n\ndef short():\n    return 1\n")
    found = python_offenders(tmp_path)
    assert [o.split(" ", 1)[1] for o in found] == ["long (82 lines)"]
    assert python_offenders(tmp_path, limit=82) == []


def test_the_typescript_measure_reads_the_compiler_not_braces(tmp_path: Path) -> None:
    """An 81-line arrow (a method of an object in a class) is found with its name, an 80-line function is not,
    and a ``}`` in a string, a template or a regular expression does not end a function early."""
    def body(n: int) -> str:
        return "".join(f"    const s{i} = `}}${{{i}}}` + '}}' + String(/[}}]/);\n" for i in range(n))

    (tmp_path / "long.ts").write_text(
        "export class Page {\n  handlers = {\n    onClick: (): void => {\n" + body(79) + "    },\n  };\n}\n"
        "export function short(): void {\n" + body(78) + "}\n", encoding="utf-8")
    found = [o.split(" ", 1)[1] for o in typescript_offenders(folder=tmp_path)]
    assert found == ["onClick (81 lines)"]
    assert typescript_offenders(limit=81, folder=tmp_path) == []


def test_the_typescript_measure_finds_a_long_class(tmp_path: Path) -> None:
    """A 401-line class of short members is found (by name, its functions are not), a 400-line one is not; a class
    expression counts too."""
    def members(n: int) -> str:
        return "".join(f"  f{i} = '}}{i}';\n" for i in range(n))

    (tmp_path / "page.ts").write_text(
        "export class Big {\n" + members(399) + "}\n"
        "export class Fits {\n" + members(398) + "}\n"
        "export const Anon = class {\n" + members(400) + "};\n", encoding="utf-8")
    found = [o.split(" ", 1)[1] for o in typescript_offenders(folder=tmp_path, kind="class")]
    assert found == ["Big (401 lines)", "<anonymous class> (402 lines)"]
    assert typescript_offenders(folder=tmp_path) == []
    assert typescript_offenders(folder=tmp_path, kind="class", class_limit=402) == []
