"""The real lifeline-context 0.6.1, installed by the suite in a scratch venv of its own.

Interoperability is tested against the predecessor's own code, never a copy of it: a session
fixture makes a venv (``python -m venv`` + ``pip install lifeline-context==0.6.1`` from the
package index) and hands out its ``lifeline`` command. It is never installed next to ours:
the two packages ship the same ``lifeline`` module. When the install fails (no index
reachable) the tests skip with the reason, except under ``CI``, where they must run.
``LIFELINE_CONTEXT_VENV=DIR`` reuses a venv that already has it, and makes it there when it
does not; the suite points it at the user's cache (``tests/conftest.py``), so the pinned
release is installed once per machine and Python, not in every run (decision 0129). A lock
beside it keeps two runs from installing into it at once.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.needs import missing

__all__ = ["LC_VERSION", "lc_cache_venv", "lc_command", "lc_env", "run_lc"]

LC_VERSION = "0.6.1"


def _unavailable(reason: str) -> None:
    message = f"lifeline-context {LC_VERSION} is not installable here ({reason})"
    missing(message, under_ci_says=f"{message}; CI must run the interoperability tests")


def lc_cache_venv(cache: Path) -> Path:
    """Where the venv lives in the user's ``cache``: one per release and Python version
    (a venv's interpreter is the one that made it)."""
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return cache / "lifeline-mesh" / f"lifeline-context-{LC_VERSION}-{python}"


@contextmanager
def _locked(venv: Path) -> Iterator[None]:
    """Held while one run checks or makes ``venv``; another run waits for it."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def lc_command(base: Path) -> Path:
    """The ``lifeline`` command of a venv holding lifeline-context (made under ``base``)."""
    given = os.environ.get("LIFELINE_CONTEXT_VENV")
    venv = Path(given) if given else base / "lc-venv"
    with _locked(venv):
        # pip writes a package's commands after its files and its dependencies: a command
        # there is a whole install, and an install cut short is made again.
        if not (venv / "bin" / "lifeline").exists():
            _install(venv)
    return venv / "bin" / "lifeline"


def _install(venv: Path) -> None:
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120
        )
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                f"lifeline-context=={LC_VERSION}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or "").strip().splitlines()[-1:] or [str(exc)]
        _unavailable(tail[0])
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(str(exc))


def run_lc(command: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run lifeline-context's CLI in ``cwd`` (its ledger is ``cwd/.lifeline/ledger.db``)."""
    return subprocess.run(
        [str(command), *args], cwd=cwd, env=lc_env(), capture_output=True, text=True, timeout=120
    )


def lc_env() -> dict[str, str]:
    """The environment lifeline-context runs in: without our ``LIFELINE*`` variables, nor a
    ``PYTHONPATH`` (one naming a tree of ours would make its ``import lifeline`` ours)."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("LIFELINE") and k != "PYTHONPATH"
    }
