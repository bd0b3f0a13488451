"""A real serving CA holder for the CI tests, and jobs run as real `lifeline-mesh` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.mesh_procs import cli, start_ca_serve

__all__ = ["BIN_PATH", "LIFELINE", "MESH", "Hub", "hub", "job", "stop"]

MESH = (sys.executable, "-m", "lifeline_mesh")
LIFELINE = (sys.executable, "-m", "lifeline")
BIN_PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@dataclass
class Hub:
    root: Path
    sync: str
    join: str
    decision: str  # id of an entry the hub holds before any job
    proc: subprocess.Popen[str]

    def credential(self, name: str, *extra: str) -> str:
        out = cli(
            "lifeline_mesh",
            self.root,
            "invite",
            "--ci",
            name,
            "--address",
            self.join,
            "--sync-address",
            self.sync,
            "--json",
            *extra,
        )
        return str(json.loads(out.stdout)["token"])

    @property
    def line_file(self) -> Path:
        return self.root / ".lifeline" / "ledger.db"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    """A CA holder with one shared line holding one decision, serving sync and joins."""
    root = tmp_path / "hub"
    root.mkdir()
    cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    cli("lifeline", root, "init")
    decision = cli(
        "lifeline", root, "log", "--kind", "decision", "--summary", "Payments use Postgres"
    ).stdout.strip()
    cli("lifeline_mesh", root, "share", "ledger")
    proc, sync, joins = start_ca_serve(root)
    try:
        yield Hub(root, sync, joins, decision, proc)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.communicate(timeout=30)


def job(workdir: Path, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LIFELINE_MESH_TOKEN": token, "PATH": BIN_PATH}
    return subprocess.run(
        [*MESH, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )
