"""Live both ways over one connection: a node started with `serve --peer A` only (a CI
runner behind NAT: A has no address for it) hears of A's changes over its Watch call and
syncs at once, long before the periodic sync (60 s); it dials again after A restarts; and
both nodes still stop cleanly and promptly with the call open."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.mesh_procs import (
    free_port,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
    wait_watching,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # bounds on wall-clock times: run alone

FLAGS = ("--no-discovery", "--insecure")  # plain loopback; TLS is the same call
# Far below the periodic sync (60 s): an entry seen this soon travelled live.
LIVE_S = 10.0


def _stop(proc: subprocess.Popen[str]) -> float:
    """SIGTERM, require a clean exit; returns how long it took."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    return time.monotonic() - started


def _timed_arrival(writer: Path, reader_line: Path, summary: str) -> float:
    started = time.monotonic()
    entry_id = log_note(writer, summary)
    return wait_for_entry(reader_line, entry_id, deadline_s=LIVE_S) - started


def test_a_node_that_only_dialed_in_is_live_both_ways_and_redials(tmp_path: Path) -> None:
    office, runner = tmp_path / "office", tmp_path / "runner"
    line_office, line_runner = shared_node(office), shared_node(runner)
    port = free_port()
    listen = ("--listen", f"127.0.0.1:{port}")
    with serve(office, *listen, *FLAGS) as office_proc:
        dial = ("--listen", "127.0.0.1:0", "--peer", f"127.0.0.1:{port}")
        with serve(runner, *dial, *FLAGS) as runner_proc:
            wait_watching(runner)
            # the office node knows no address of the runner: only the watch can tell it
            assert _timed_arrival(office, line_runner, "from the office") < LIVE_S
            assert _timed_arrival(runner, line_office, "from the runner") < LIVE_S

            stop_s = _stop(office_proc)  # the open watch call must not hold it up
            assert stop_s < 4.0  # under the server's 5 s grace: the call ended at once
            written_offline = log_note(runner, "while the office was down")
            with serve(office, *listen, *FLAGS) as office_again:
                # redialled: the fresh call makes the runner sync at once, both ways
                wait_for_entry(line_office, written_offline, deadline_s=LIVE_S)
                wait_watching(runner)
                assert _timed_arrival(office, line_runner, "after the restart") < LIVE_S
                _stop(runner_proc)
                _stop(office_again)
