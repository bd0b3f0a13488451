"""Ctrl-C during `lifeline-mesh ci run`: exit 130 as before, and one line says what to run
to deliver what the job wrote before it was stopped."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ci_helpers import BIN_PATH, MESH, Hub, job
from tests.support.mesh_procs import cli

WRITTEN_S = 60.0  # enroll, pull and the command's first write, on a loaded machine
SUMMARY = "written before Ctrl-C"


def _start(hub: Hub, cwd: Path, work: Path, written: Path) -> subprocess.Popen[str]:
    """`ci run` in a session of its own (so that the test can signal its process group, as a
    terminal's Ctrl-C does), whose command writes one entry, then waits.

    The shell execs the waiting process, which makes the file the test waits for: with a
    `touch` and a `sleep` after it, a Ctrl-C that came as `touch` ended reached only the
    shell, which (as dash and bash do when the command they wait for exits by itself) went
    on to the `sleep`, and the job ran its 120 s."""
    wait = (  # Ctrl-C ends it as it ends `sleep`: at once, without a traceback
        "import pathlib, signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "pathlib.Path(sys.argv[1]).touch(); time.sleep(120)"
    )
    script = (
        f"lifeline --root {shlex.quote(str(work))} log --kind note --summary {SUMMARY!r} "
        f"&& exec {shlex.quote(sys.executable)} -c {shlex.quote(wait)} "
        f"{shlex.quote(str(written))}"
    )
    root = [] if cwd == work else ["--root", str(work)]
    return subprocess.Popen(
        [*MESH, *root, "ci", "run", "--", "sh", "-c", script],
        cwd=cwd,
        env={**os.environ, "LIFELINE_MESH_TOKEN": hub.credential("gha"), "PATH": BIN_PATH},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(proc: subprocess.Popen[str], written: Path) -> None:
    deadline = time.monotonic() + WRITTEN_S
    while not written.exists():
        if proc.poll() is not None:
            raise AssertionError(f"ci run exited {proc.returncode}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"the job's command wrote nothing within {WRITTEN_S} s")
        time.sleep(0.05)


@pytest.mark.parametrize("where", ["in the workspace", "elsewhere with --root"])
def test_ctrl_c_says_how_to_deliver_what_the_job_wrote(
    hub: Hub, tmp_path: Path, where: str
) -> None:
    work = tmp_path / "job"
    work.mkdir()
    work = work.resolve()  # as the job names it
    cwd = work if where == "in the workspace" else tmp_path
    written = tmp_path / "written"
    proc = _start(hub, cwd, work, written)
    _wait_for(proc, written)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the job's command gets it too
    try:
        _out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.splitlines()[-1] == "lifeline-mesh: interrupted", err
    hints = [line for line in err.splitlines() if "ci finish" in line]
    assert len(hints) == 1, err  # once: by the process that ran the job, not before its exec
    assert str(work / ".lifeline") in hints[0]
    command = shlex.split(hints[0].split("`")[1])
    expected = ["lifeline-mesh", "ci", "finish"]
    if where != "in the workspace":
        expected[1:1] = ["--root", str(work)]
    assert command == expected, hints[0]
    assert SUMMARY not in cli("lifeline", hub.root, "history").stdout  # not delivered yet

    done = job(cwd, "", *command[1:])  # what the line says, where the user is
    assert done.returncode == 0 and "back to" in done.stderr, done.stderr
    assert SUMMARY in cli("lifeline", hub.root, "history").stdout
