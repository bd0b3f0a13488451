"""`invite` names the join port (and, for a CI credential, the sync port) of the node serving
its root when none is given, so that `join TOKEN` works without `--peer`; it says so on
stderr, and says when the token names no join port at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lifeline_mesh.cli.cmd_membership import _defaulted
from tests.support.mesh_procs import cli, start_ca_serve, terminate


def _invite(root: Path, *extra: str) -> tuple[dict[str, object], str]:
    done = cli("lifeline_mesh", root, "invite", "--json", *extra)
    return json.loads(done.stdout), done.stderr


def test_an_invite_names_the_join_port_of_the_node_serving_its_root(tmp_path: Path) -> None:
    ca, newcomer = tmp_path / "ca", tmp_path / "newcomer"
    ca.mkdir()
    newcomer.mkdir()
    cli("lifeline_mesh", ca, "init", "--new-mesh", "team")
    alone, said = _invite(ca)
    assert alone["addresses"] == [] and "names no join port" in said
    proc, sync, joins = start_ca_serve(ca)
    try:
        assert json.loads(cli("lifeline_mesh", ca, "status", "--json").stdout)["join"] == joins
        made, said = _invite(ca)
        assert made["addresses"] == [joins] and made["sync_addresses"] == []
        assert f"names the join port of the node serving here, {joins}" in said
        assert "from this machine only" in said  # it listens on loopback
        joined = cli("lifeline_mesh", newcomer, "join", str(made["token"]))  # no --peer
        assert f"via {joins}" in joined.stdout
        given, said = _invite(ca, "--address", "192.0.2.7:7421")
        assert given["addresses"] == ["192.0.2.7:7421"] and "note" not in said
        ci, said = _invite(ca, "--ci", "runners")
        assert ci["addresses"] == [joins] and ci["sync_addresses"] == [sync]
    finally:
        terminate(proc)
    after, said = _invite(ca)  # the node stopped: nothing to name
    assert after["addresses"] == [] and "names no join port" in said


def test_a_wildcard_listen_address_is_not_put_in_a_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _defaulted([], "0.0.0.0:7421", "--address", "join") == []
    assert _defaulted([], "[::]:7421", "--address", "join") == []
    assert "which no one can dial; pass --address" in capsys.readouterr().err
    assert _defaulted([], "192.0.2.7:7421", "--address", "join") == ["192.0.2.7:7421"]
    assert _defaulted(["h:1"], "192.0.2.7:7421", "--address", "join") == ["h:1"]
