"""The suite is self-contained: everything a test reads lives in the repository (a fresh clone has nothing beside
it). The audit-hook guard in tests/outside_guard.py enforces it at run time; these tests show the guard bites and
that no test, Makefile rule or CI step names a folder beside the checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests import outside_guard
from tests.conftest import REAL_TRACES, REPO, real_trace_files


def test_the_guard_refuses_reads_beside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    beside = tmp_path / "shared"
    (beside / "traces").mkdir(parents=True)
    (beside / "traces" / "a.pt.trace.json").write_text("{}")
    monkeypatch.setattr(outside_guard, "_forbidden", (str(beside),))
    with pytest.raises(outside_guard.OutsideRead, match="beside the checkout"):
        open(beside / "traces" / "a.pt.trace.json").close()
    with pytest.raises(outside_guard.OutsideRead):
        list((beside / "traces").glob("*.json"))
    with pytest.raises(outside_guard.OutsideRead):
        (tmp_path / "link").symlink_to(beside / "traces")
    (tmp_path / "inside.txt").write_text("fine")  # elsewhere is fine
    assert (tmp_path / "inside.txt").read_text() == "fine"


def test_the_guard_is_installed() -> None:
    import sys

    assert getattr(sys, "_ptp_outside_guard", False)


ALLOWED = ("tests/outside_guard.py", "tests/unit/test_self_contained.py")  # the guard and this test


def test_no_test_or_build_file_names_a_folder_beside_the_checkout() -> None:
    tracked = subprocess.run(["git", "ls-files", "tests", "Makefile", ".ci", "benchmarks", "scripts"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    beside = "shared"  # the folder of traces a checkout may have beside it (spelled apart, so this file is not a hit)
    pattern = re.compile(rf"\.\./{beside}|{beside}/traces|REPO\.parent|TB_PLUGIN_SHARED")
    offenders = [name for name in tracked
                 if name.endswith((".py", ".sh", "Makefile", "run", ".mjs", ".ts")) and name not in ALLOWED
                 and pattern.search((REPO / name).read_text(errors="replace"))]
    assert offenders == []


def test_the_real_traces_are_in_the_repository_with_their_origin() -> None:
    files = real_trace_files()
    assert len(files) == 73  # 10 V100/H200 traces, 60 calibration pairs' files, 3 GEMM benchmark runs
    readme = (REAL_TRACES / "README.md").read_text()
    for f in files:
        assert f.relative_to(REAL_TRACES).parent.as_posix() in readme, f
    assert "BSD" in readme
