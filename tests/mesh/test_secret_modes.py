"""One rule for every secret file: written 0600, refused when other users can read it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.support.mesh_procs import ServeRefused, cli, serve

SECRETS = ("node.key", "tls.key", "ca.key", "invites.json")


@pytest.fixture(scope="module")
def ca_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ca")
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    cli("lifeline_mesh", root, "invite")
    cli("lifeline_mesh", root, "share", "ledger")
    return root


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("name", [*SECRETS, "config.json"])
def test_secret_and_config_files_are_written_0600(ca_root: Path, name: str) -> None:
    assert mode(ca_root / ".lifeline" / "mesh" / name) == 0o600


def _loosened(root: Path, name: str) -> Path:
    path = root / ".lifeline" / "mesh" / name
    path.chmod(0o644)
    return path


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("node.key", ("id",)),
        ("ca.key", ("invite",)),
        ("invites.json", ("invite",)),
    ],
)
def test_a_readable_secret_is_refused_in_one_line(
    ca_root: Path, name: str, command: tuple[str, ...]
) -> None:
    path = _loosened(ca_root, name)
    try:
        out = cli("lifeline_mesh", ca_root, *command, check=False)
    finally:
        path.chmod(0o600)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"chmod 600 {path}" in out.stderr and "0644" in out.stderr


def test_serve_refuses_a_readable_tls_key(ca_root: Path) -> None:
    path = _loosened(ca_root, "tls.key")
    try:
        with pytest.raises(ServeRefused) as refused, serve(ca_root, "--no-discovery"):
            pass
    finally:
        path.chmod(0o600)
    assert f"chmod 600 {path}" in refused.value.stderr
    assert refused.value.stderr.count("\n") == 1, refused.value.stderr
