"""`make demo` (python -m lifeline_mesh.demo) runs to the end and shows what it claims."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_runs_and_the_three_nodes_agree() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh.demo"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    digests = re.findall(r"^\s+(laptop-a|laptop-b|ci-runner)\s+context sha256 (\w+)$", out, re.M)
    assert [name for name, _ in digests] == ["laptop-a", "laptop-b", "ci-runner"]
    assert len({digest for _, digest in digests}) == 1
    assert out.count("OK: 1 line(s) verified, no problems") == 3
    assert "Load test: PIX path holds 800 rps" in out  # the CI runner's entry reached laptop A
    stranger = out[out.index("== A node of another mesh is refused") :]
    assert "refused" in stranger and "do not trust each other" in stranger
    assert re.search(r"^demo finished in [\d.]+s$", out, re.M)
