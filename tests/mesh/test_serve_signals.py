"""A hang-up stops `serve` as SIGTERM does (decision 0133): exit 0 with its closing report
and its state file removed — not killed on the spot by Python's default for SIGHUP. Under
`nohup` (SIGHUP ignored when it starts) it keeps serving."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support.mesh_procs import SYNC_JSON, cli, first_line, shared_node


def _serve(root: Path, *, ignore_hangup: bool = False) -> tuple[subprocess.Popen[str], str]:
    # SIGHUP ignored by a shell, as nohup does, not by a preexec_fn: that runs Python in a
    # child forked from a test process whose gRPC threads may hold its locks
    nohup = ["sh", "-c", 'trap "" HUP && exec "$@"', "sh"] if ignore_hangup else []
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", "--insecure"]
    proc = subprocess.Popen(
        [*nohup, *argv, "--listen", "127.0.0.1:0", "--no-discovery"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = first_line(proc, 60, "serve")
    assert first.startswith("listening on "), first
    return proc, first.split()[-1]


def test_a_hang_up_stops_serve_gracefully(tmp_path: Path) -> None:
    shared_node(tmp_path)
    state = tmp_path / ".lifeline" / "mesh" / "state.json"
    proc, _address = _serve(tmp_path)
    assert state.exists()
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (proc.returncode, err)
    assert out.startswith("stopped after 0 sessions in"), out
    assert "Traceback" not in err, err
    assert not state.exists()  # what `status` reads says nothing serves here


def test_under_nohup_a_hang_up_is_ignored(tmp_path: Path) -> None:
    shared_node(tmp_path)
    peer = tmp_path / "peer"
    shared_node(peer)
    proc, address = _serve(tmp_path, ignore_hangup=True)
    try:
        proc.send_signal(signal.SIGHUP)
        synced = cli("lifeline_mesh", peer, *SYNC_JSON, address, check=False)
        assert synced.returncode == 0, synced.stderr  # still serving after the hang-up
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped after 1 session in" in out, out
