"""What a clone carries in `.lifeline/mesh/` is never served with, and a hub binding it
carries is never used (decision 0141).

A repository can commit a member's whole `.lifeline/mesh/`: its node key, TLS key and
certificate, and the mesh's `ca.pem` (checked out 0600 under `umask 077`, so the key passes
the mode check). `serve` in the clone warned and went on as that member: the repository's
author, holding the same keys, could act as this node, and the peers its `ca.pem` trusts
could pull every line the user writes. A committed `hub.json` sent every `lifeline`
command's entries to the database it names. Both are refused in one line naming the file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.clirun import one_line_error
from tests.support.mesh_procs import cli, git, join_mesh, shared_node

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _committed(root: Path, *paths: str) -> None:
    git(root, "init", "-q")
    git(root, "add", "-f", *paths)
    git(root, "commit", "-q", "-m", "a project")


def test_serve_refuses_a_mesh_folder_git_tracks(tmp_path: Path) -> None:
    ca, author, clone = tmp_path / "ca", tmp_path / "author", tmp_path / "clone"
    for root in (ca, author):
        shared_node(root)
    join_mesh(ca, [author])
    shutil.copytree(author / ".lifeline" / "mesh", clone / ".lifeline" / "mesh")
    shared_node(clone)
    _committed(clone, ".lifeline/mesh")
    done = cli(
        "lifeline_mesh", clone, "serve", "--listen", "127.0.0.1:0", "--no-discovery", check=False
    )
    one_line_error(done, "git tracks .lifeline/mesh/", "git rm -r --cached .lifeline/mesh/")
    assert "listening on" not in done.stdout
    git(clone, "rm", "-q", "-r", "--cached", ".lifeline/mesh/")
    status = json.loads(cli("lifeline_mesh", clone, "status", "--json").stdout)
    assert status["tracked_by_git"] == []


def test_a_hub_binding_git_tracks_is_not_used(tmp_path: Path) -> None:
    root = tmp_path / "clone"
    root.mkdir()
    binding = root / ".lifeline" / "mesh" / "hub.json"
    binding.parent.mkdir(parents=True)
    binding.write_text('{"store": "postgresql://collector@127.0.0.1:9/theirs"}\n')
    binding.chmod(0o600)
    _committed(root, ".lifeline/mesh/hub.json")
    for args in (("log", "--kind", "note", "--summary", "private"), ("context",)):
        one_line_error(
            cli("lifeline", root, *args, check=False),
            "git tracks .lifeline/mesh/hub.json",
            "lifeline-mesh hub init --store URL",
        )
