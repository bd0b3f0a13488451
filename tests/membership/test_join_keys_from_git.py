"""A node key that came with a repository is never joined to a mesh (docs/security.md,
"What to commit").

Git carries whatever its author committed, `.lifeline/mesh/node.key` included (0644 on
checkout, 0600 under `umask 077`). `lifeline-mesh join` took such a key as this node's
identity and enrolled it: the repository's author, who holds the same key, could then sign
as this node. Here a clone commits another node's key, mode 0600; the real `join` against
a real CA holder's join port is refused before anything is sent, and the invite is not
spent: after the key is moved away, the same token joins with a new identity.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.mesh_procs import cli, git, shared_node, start_ca_serve

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _join(root: Path, token: str, join: str) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, "join", token, "--peer", join, check=False)


def test_a_committed_node_key_is_not_joined(tmp_path: Path) -> None:
    ca, author, clone = tmp_path / "ca", tmp_path / "author", tmp_path / "clone"
    for root in (ca, author):
        shared_node(root)
    cli("lifeline_mesh", ca, "init", "--new-mesh", "team")
    cli("lifeline_mesh", author, "init")
    leaked = cli("lifeline_mesh", author, "id").stdout.strip()
    key = clone / ".lifeline" / "mesh" / "node.key"
    key.parent.mkdir(parents=True)
    shutil.copy(author / ".lifeline" / "mesh" / "node.key", key)
    key.chmod(0o600)
    git(clone, "init", "-q")
    git(clone, "add", "-f", ".lifeline/mesh/node.key")
    git(clone, "commit", "-q", "-m", "a project")
    token = json.loads(cli("lifeline_mesh", ca, "invite", "--json").stdout)["token"]
    with (tmp_path / "serve.log").open("w") as log:
        proc, _sync, join = start_ca_serve(ca, log.fileno())
    try:
        refused = _join(clone, token, join)
        assert refused.returncode == 2, (refused.returncode, refused.stdout, refused.stderr)
        assert "git tracks .lifeline/mesh/node.key" in refused.stderr, refused.stderr
        assert not (clone / ".lifeline" / "mesh" / "tls.pem").exists()  # was: joined
        git(clone, "rm", "-q", "-r", "--cached", ".lifeline/mesh/")
        shutil.move(clone / ".lifeline" / "mesh", tmp_path / "moved-away")
        joined = _join(clone, token, join)  # the same token: it was not spent
        assert joined.returncode == 0, joined.stderr
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert cli("lifeline_mesh", clone, "id").stdout.strip() != leaked
