"""Ctrl-C (one SIGINT) sent to a CLI subprocess that waits on its open stdin pipe."""

from __future__ import annotations

import array
import fcntl
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

__all__ = ["assert_one_sigint_stops", "spawn", "wait_until_read"]

READY_S = 30.0  # start-up of a cold interpreter on a loaded machine
STOP_S = 5.0  # one Ctrl-C must end the command well within this


def spawn(module: str, root: Path, *args: str) -> subprocess.Popen[bytes]:
    """``python -m MODULE --root ROOT ARGS...`` with stdin, stdout and stderr piped."""
    return subprocess.Popen(
        [sys.executable, "-m", module, "--root", str(root), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_until_read(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write ``data`` (no line end, no end of input) and return once the child has read it:
    it is then blocked in its read of stdin, waiting for the rest."""
    assert proc.stdin is not None
    proc.stdin.write(data)
    proc.stdin.flush()
    unread = array.array("i", [0])
    deadline = time.monotonic() + READY_S
    while True:
        fcntl.ioctl(proc.stdin.fileno(), termios.FIONREAD, unread)  # bytes still in the pipe
        if unread[0] == 0:
            return
        assert proc.poll() is None, f"exited {proc.returncode} before reading its stdin"
        assert time.monotonic() < deadline, f"stdin not read within {READY_S} s"
        time.sleep(0.01)


def assert_one_sigint_stops(proc: subprocess.Popen[bytes], prog: str) -> None:
    """Send one SIGINT with stdin still open: the command ends promptly with exit 130 and the
    usual "interrupted" line, without a traceback."""
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"one SIGINT did not stop {prog} within {STOP_S} s") from None
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    assert code == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1:] == [f"{prog}: interrupted"], err
