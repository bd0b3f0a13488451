"""One `serve` per root: a second one exits in one line naming the first, harming nothing."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.support.mesh_procs import cli, serve


def test_a_second_serve_names_the_first_and_leaves_its_state(tmp_path: Path) -> None:
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    state = tmp_path / ".lifeline" / "mesh" / "state.json"
    with serve(tmp_path, "--no-discovery") as first:
        before = state.read_text()
        second = cli("lifeline_mesh", tmp_path, "serve", "--no-discovery", check=False)
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1, second.stderr
        assert f"(pid {first.pid}) already serves" in second.stderr
        assert second.stdout == ""
        assert state.read_text() == before  # the first node's state file is untouched
        assert json.loads(before)["pid"] == first.pid
        assert first.poll() is None
        status = json.loads(cli("lifeline_mesh", tmp_path, "status", "--json").stdout)
        assert status["serving"] and status["pid"] == first.pid


def test_a_killed_serve_does_not_block_the_next(tmp_path: Path) -> None:
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    with serve(tmp_path, "--no-discovery") as first:
        first.send_signal(signal.SIGKILL)
        first.wait()
    with serve(tmp_path, "--no-discovery") as second:
        assert second.poll() is None
