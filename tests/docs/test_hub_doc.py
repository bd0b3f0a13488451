"""docs/hub.md's shell blocks, run as written against a real PostgreSQL server.

Each ```sh block (one indented in a list item too) runs with `sh -eu` in its own fresh
directory, the installed `lifeline` and `lifeline-mesh` first on PATH, like the README's
(tests/support/readme_blocks.py). The doc names the hub's database by the environment
variable `LIFELINE_HUB_STORE`, which the test sets to a fresh database of the session's
server (tests/support/pg_server.py: a throwaway cluster; under CI a missing server fails).
The doc speaks of real hosts, so the test makes these substitutions, and no others:

- `/srv/` becomes a folder under the test's temporary directory;
- `lifeline-mesh --root R serve --listen 0.0.0.0:7420 --join-listen 0.0.0.0:7421` (which a
  person leaves in the foreground) runs in the background on 127.0.0.1, free ports, and the
  script goes on once it printed its join port;
- the block that copies "a laptop that is up to date" into the hub runs in a project that
  has a shared `ledger` line holding one entry;
- the block that moves "the node that leads the mesh" in from `~/project` runs with HOME in
  the temporary directory, where `~/project` is such a node (`lifeline-mesh init --new-mesh`)
  with a `ledger` line holding one entry.

The blocks that cannot run here are listed in SKIPPED_BLOCKS (a block holding one of these
commands is not run), each with the reason and the test that covers it instead.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.pg_server import fresh_database
from tests.support.readme_blocks import commands, run_block, sh_blocks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real processes, a loaded box

HUB_DOC = REPO / "docs" / "hub.md"
BLOCKS = sh_blocks(HUB_DOC.read_text(encoding="utf-8"))

SKIPPED_BLOCKS = {
    "systemctl daemon-reload && systemctl enable --now lifeline-hub@1": (
        "needs root and a booted systemd; tests/hub/test_hub_deploy.py parses these steps and "
        "the unit with the real argument parser and runs `systemd-analyze verify`"
    ),
    "docker/build.sh --postgres": (
        "needs a Docker engine; tests/deploy/test_docker_engine.py runs these commands on one"
    ),
    "createdb lifeline_hub_restored": (
        "tests/hub/test_hub_backup.py runs this pg_dump and pg_restore on the test server"
    ),
}

SERVE = re.compile(
    r"^lifeline-mesh --root (\S+) serve --listen 0\.0\.0\.0:7420 --join-listen 0\.0\.0\.0:7421$"
)
# What "a laptop that is up to date" has before the migrate block: a shared line with an entry.
LAPTOP = """\
lifeline init
lifeline log --kind decision --summary "Database: PostgreSQL" --body "The audit trail needs ACID."
lifeline-mesh share ledger
"""
# What ~/project holds before the block that moves it into the hub: the mesh's CA holder.
CA_HOLDER = """\
mkdir -p ~/project
lifeline --root ~/project init
lifeline --root ~/project log --kind decision --summary "Database: PostgreSQL"
lifeline-mesh --root ~/project init --new-mesh team
"""


def _serve_in_background(root: str) -> str:
    log = f"{root}.serve.log"
    return f"""\
lifeline-mesh --root {root} serve --listen 127.0.0.1:0 --join-listen 127.0.0.1:0 \\
    > {log} 2>&1 &
until grep -q '^join port on ' {log}; do
    kill -0 $! || {{ cat {log}; exit 1; }}
    sleep 0.1
done
cat {log}"""


def script(block: str, sandbox: Path) -> str:
    """``block`` with the substitutions of the module's docstring."""
    lines = []
    for line in block.replace("/srv/", f"{sandbox}/srv/").splitlines():
        served = SERVE.match(line.strip())
        lines.append(_serve_in_background(served.group(1)) if served else line)
    prelude = LAPTOP if "lifeline-mesh migrate-store . " in block else ""
    if "--from ~/project" in block:
        prelude = CA_HOLDER
    return prelude + "\n".join(lines) + "\n"


def _skipped(block: str) -> str | None:
    held = commands(f"```sh\n{block}```\n")
    return next((why for command, why in SKIPPED_BLOCKS.items() if command in held), None)


def test_skipped_commands_are_still_in_the_doc() -> None:
    # A stale skip list would skip nothing and hide a block that no longer runs.
    assert set(SKIPPED_BLOCKS) <= commands(HUB_DOC.read_text(encoding="utf-8"))


def test_the_doc_names_the_database_by_one_variable() -> None:
    # Every block that is run reaches the database through LIFELINE_HUB_STORE, never a
    # hard-coded host the test would have to rewrite.
    run = [b for b in BLOCKS if _skipped(b) is None]
    assert len(run) >= 2
    for block in run:
        assert "postgresql://" not in script(block, Path("/x")).replace(
            "export LIFELINE_HUB_STORE=postgresql://", ""
        ), block


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_hub_doc_block_runs_as_written(index: int, pg_server: str, tmp_path: Path) -> None:
    block = BLOCKS[index]
    why = _skipped(block)
    if why is not None:
        pytest.skip(f"block {index}: {why}")
    project = tmp_path / "project"
    project.mkdir()
    url = asyncio.run(fresh_database(pg_server))
    env = {"LIFELINE_HUB_STORE": url, "HOME": str(tmp_path / "home")}
    result = run_block(script(block, tmp_path), project, env=env, timeout=600)
    assert result.returncode == 0, (
        f"docs/hub.md block {index} failed (exit {result.returncode})\n{block}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    roots = sorted(set(re.findall(r"--root (/srv/\S+)", block)))
    if "--from ~/project" in block:
        # The hub node is the laptop's node, and its line is in the database.
        assert _node_id(tmp_path / "srv" / "hub1") == _node_id(tmp_path / "home" / "project")
    elif roots:
        # Both processes served, and they are one node: the same id from either root.
        assert result.stdout.count("join port on ") == len(roots), result.stdout
        ids = {_node_id(tmp_path / root.lstrip("/")) for root in roots}
        assert len(ids) == 1, ids


def _node_id(root: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "id"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_doc_uses_the_ports_of_the_unit_and_the_image() -> None:
    # docs/hub.md, the systemd unit's example settings and the hub image speak of one pair
    # of ports: sync on 7420, joins on 7421.
    settings = (REPO / "deploy" / "systemd" / "lifeline-hub.env.example").read_text()
    sync = re.search(r"^LIFELINE_HUB_LISTEN=\S+:(\d+)$", settings, re.M)
    join = re.search(r"^LIFELINE_HUB_JOIN_LISTEN=\S+:(\d+)$", settings, re.M)
    assert sync and join
    compose = (REPO / "docker" / "compose.hub.yml").read_text()
    assert f':{sync[1]}"' in compose and f':{join[1]}"' in compose  # hub-N's container ports
    text = HUB_DOC.read_text(encoding="utf-8")
    served = re.findall(r"serve --listen \S+:(\d+) --join-listen \S+:(\d+)", text)
    assert served and set(served) == {(sync[1], join[1])}, served
    named = set(re.findall(r"hub\.internal:(\d+)", text))
    assert named == {sync[1], join[1]}, named
