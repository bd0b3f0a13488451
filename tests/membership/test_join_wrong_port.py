"""An invite made with a node's sync port as --address (the mutual-TLS port, not the join
port): `join` says which port it dialled and what to ask for, not that trust failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.mesh_procs import cli, start_ca_serve, terminate


def _join(root: Path, token: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "join", token, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_invite_for_the_sync_port_says_to_ask_for_the_join_port(tmp_path: Path) -> None:
    ca, newcomer = tmp_path / "ca", tmp_path / "newcomer"
    ca.mkdir()
    newcomer.mkdir()
    cli("lifeline_mesh", ca, "init", "--new-mesh", "team")
    proc, sync, joins = start_ca_serve(ca)
    try:
        invite = cli("lifeline_mesh", ca, "invite", "--json", "--address", sync)
        token = str(json.loads(invite.stdout)["token"])
        wrong = _join(newcomer, token)
        assert wrong.returncode == 2, wrong.stderr
        assert len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
        assert f"{sync} is a node's sync port, not its join port" in wrong.stderr
        assert "--address <join port>" in wrong.stderr
        assert "trust" not in wrong.stderr
        assert not (newcomer / ".lifeline" / "mesh" / "ca.pem").exists()
        right = _join(newcomer, token, "--peer", joins)  # the same token, the right port
        assert right.returncode == 0, right.stderr
        assert f"via {joins}" in right.stdout
    finally:
        terminate(proc)
