"""The suite's rule for what a machine may lack (tests/support/needs.py): a laptop skips
with how to get it, CI fails, as the setup contract says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

_TEST = """
from tests.support.needs import missing

def test_needs_a_server():
    missing("no frobnicator here: apt-get install frobnicator")
"""


@pytest.mark.parametrize(("ci", "outcome"), [("", "1 skipped"), ("true", "1 failed")])
def test_a_missing_server_skips_on_a_laptop_and_fails_under_ci(
    tmp_path: Path, ci: str, outcome: str
) -> None:
    (tmp_path / "test_it.py").write_text(_TEST)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    env["PYTHONPATH"] = str(REPO)
    argv = ["-q", "-rsf", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path / "test_it.py")]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert outcome in out.stdout, out.stdout + out.stderr
    assert "apt-get install frobnicator" in out.stdout
