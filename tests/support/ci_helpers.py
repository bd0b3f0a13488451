"""A real serving CA holder for the CI tests (the ``hub`` fixture in tests/ci/conftest.py
starts one), jobs run as real `lifeline-mesh` processes, and the in-process pieces of a
runner's join: a settable clock and the request `join` sends."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.membership.ca import make_csr, new_tls_key
from lifeline_mesh.membership.invite import Token
from lifeline_mesh.membership.join import join_request
from lifeline_mesh.wire import membership_pb2 as pb
from tests.support.mesh_procs import cli

__all__ = ["BIN_PATH", "LIFELINE", "MESH", "NOW", "Clock", "Hub", "job", "runner_request", "stop"]

MESH = (sys.executable, "-m", "lifeline_mesh")
LIFELINE = (sys.executable, "-m", "lifeline")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
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


class Clock:
    """A clock the test sets (``clock.now = …``); starts at ``NOW``."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


def runner_request(token: Token, mesh_id: str) -> tuple[pb.JoinRequest, NodeIdentity]:
    """What `join` sends for a fresh runner: CSR, node-key signature, token proof."""
    identity = NodeIdentity.generate()
    csr = make_csr(new_tls_key(), identity.node_id)
    return join_request(token, identity, mesh_id, csr), identity
