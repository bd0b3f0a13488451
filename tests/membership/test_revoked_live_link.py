"""A revocation cuts the links members hold open to the revoked node (decision 0138).

Three real `serve` nodes over mutual TLS, each with the other two as static peers, so
every link carries a Watch call both ways and rows travel over them (decision 0046). The
CA revokes C. B used to learn it only at the next session it started itself — every few
minutes on a steady link — and went on sending its writes to C meanwhile (seen still 75 s
later). Now B asks its peers for the lists on every open link every ``LISTS_EVERY_S``: it
learns it from A, cuts its link to C, refuses C's calls, and its next write reaches A and
never C.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from lifeline_mesh.node.link_guard import LISTS_EVERY_S
from tests.support.mesh_procs import (
    cli,
    free_port,
    has_entry,
    join_mesh,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
    wait_for_stderr,
)

pytestmark = pytest.mark.slow


def _revoked(root: Path, node_id: str) -> bool:
    listed = json.loads(cli("lifeline_mesh", root, "members", "--all", "--json").stdout)
    rows = listed["members"] if isinstance(listed, dict) else listed
    return any(r["node_id"] == node_id and r["status"] == "revoked" for r in rows)


def test_a_member_cuts_its_live_link_to_a_node_revoked_elsewhere(tmp_path: Path) -> None:
    a, b, c = roots = [tmp_path / n for n in "abc"]
    files = {root: shared_node(root) for root in roots}
    join_mesh(a, [b, c])
    c_id = cli("lifeline_mesh", c, "id").stdout.strip()
    address = {root: f"127.0.0.1:{free_port()}" for root in roots}
    with ExitStack() as stack:
        procs = {
            root: stack.enter_context(
                serve(
                    root,
                    "--listen",
                    address[root],
                    "--no-discovery",
                    *[x for o in roots if o != root for x in ("--peer", address[o])],
                )
            )
            for root in roots
        }
        first = log_note(b, "while C is a member")
        wait_for_entry(files[c], first)  # the links are up: rows reach C

        cli("lifeline_mesh", a, "revoke", c_id, "--reason", "laptop stolen")
        revoked_at = time.monotonic()
        while not _revoked(b, c_id):
            assert time.monotonic() - revoked_at < 3 * LISTS_EVERY_S, "B never heard of it"
            time.sleep(0.5)
        learned_s = time.monotonic() - revoked_at
        cut = f"cut the link to {address[c]}"  # B's guard of its link to C looks again
        seen = wait_for_stderr(procs[b], cut, LISTS_EVERY_S + 5)

        after = log_note(b, "after the revocation")
        wait_for_entry(files[a], after)  # the other links are untouched
        time.sleep(3)
        assert not has_entry(files[c], after)

        procs[b].terminate()
        said = seen + procs[b].communicate(timeout=30)[1]
    assert learned_s < 2 * LISTS_EVERY_S, learned_s
    assert f"cut the link to {address[c]}: {address[c]} is served by node {c_id}" in said, said
