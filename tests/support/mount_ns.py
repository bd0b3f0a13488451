"""Run the real CLIs in a private mount namespace (`unshare -m`, root): a `.lifeline/` or a
line file bind-mounted read-only, a project on a tiny tmpfs, without touching the host's
mounts."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

__all__ = ["in_namespace", "in_read_only", "namespaces_work"]


def namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind -o ro / /mnt 2>/dev/null || true; true"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def in_namespace(
    setup: list[str], outputs: Path, *commands: list[str]
) -> list[tuple[int, str, str]]:
    """Run ``setup`` (mounts) then each command in a private mount namespace; returns
    (code, stdout, stderr) of each, written under ``outputs`` (outside the mounts)."""
    script = list(setup)
    for n, argv in enumerate(commands):
        line = " ".join(shlex.quote(a) for a in argv)
        script.append(f"{line} >{outputs}/out{n} 2>{outputs}/err{n}; echo $? >{outputs}/rc{n}")
    subprocess.run(["unshare", "-m", "sh", "-c", "\n".join(script)], check=True, timeout=300)
    return [
        (
            int((outputs / f"rc{n}").read_text()),
            (outputs / f"out{n}").read_text(),
            (outputs / f"err{n}").read_text(),
        )
        for n in range(len(commands))
    ]


def in_read_only(root: Path, *commands: list[str]) -> list[tuple[int, str, str]]:
    """Run each command with ``root/.lifeline`` mounted read-only."""
    folder = shlex.quote(str(root / ".lifeline"))
    return in_namespace([f"mount --bind -o ro {folder} {folder}"], root, *commands)
