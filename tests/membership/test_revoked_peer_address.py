"""A revoked node still serving at an address a member dials receives nothing.

TLS accepts any certificate of the mesh CA, so the dialer finds out who serves at the
address (its certificate's node id), refuses a revoked node, and pins that node id in the
channels it opens, so the answer cannot change between the check and the session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mesh_procs import (
    cli,
    free_port,
    has_entry,
    join_mesh,
    log_note,
    serve,
    shared_node,
)

pytestmark = pytest.mark.slow


def test_a_revoked_node_at_a_static_address_receives_nothing(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    line_files = {root: shared_node(root) for root in (a, b, c)}
    join_mesh(a, [b, c])
    c_id = cli("lifeline_mesh", c, "id").stdout.strip()
    before = log_note(b, "before the revocation")
    a_address, c_address = (f"127.0.0.1:{free_port()}" for _ in "ac")

    with serve(a, "--listen", a_address), serve(c, "--listen", c_address):
        # While C is a member, B syncs with it at its address.
        cli("lifeline_mesh", b, "sync", c_address)
        assert has_entry(line_files[c], before)

        # The CA revokes C and B learns it from the CA, while C keeps serving.
        cli("lifeline_mesh", a, "revoke", c_id, "--reason", "laptop stolen")
        cli("lifeline_mesh", b, "members", "--pull", a_address)
        after = log_note(b, "after the revocation")
        refused = cli("lifeline_mesh", b, "sync", c_address, check=False)
        assert refused.returncode == 2, refused
        assert f"served by node {c_id}, revoked at" in refused.stderr, refused.stderr
        assert "drop the address" in refused.stderr
        # The members B still dials are not affected.
        cli("lifeline_mesh", b, "sync", a_address)
        assert has_entry(line_files[a], after)
    assert has_entry(line_files[b], after)
    assert not has_entry(line_files[c], after)
