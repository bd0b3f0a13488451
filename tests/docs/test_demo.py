"""`make demo` (python -m lifeline_mesh.demo) runs to the end and shows what it claims."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_runs_and_the_three_nodes_agree() -> None:
    # Its own process group: when it overruns, the serve nodes it started go with it instead
    # of living on, announcing on 127.0.0.1:5353 into the tests that run after this one.
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, out + err
    digests = re.findall(r"^\s+(laptop-a|laptop-b|ci-runner)\s+context sha256 (\w+)$", out, re.M)
    assert [name for name, _ in digests] == ["laptop-a", "laptop-b", "ci-runner"]
    assert len({digest for _, digest in digests}) == 1
    assert out.count("OK: 1 line verified, no problems") == 3
    assert "Load test: PIX path holds 800 rps" in out  # the CI runner's entry reached laptop A
    stranger = out[out.index("== A node of another mesh is refused") :]
    assert "refused" in stranger and "do not trust each other" in stranger
    assert re.search(r"^demo finished in [\d.]+s$", out, re.M)
