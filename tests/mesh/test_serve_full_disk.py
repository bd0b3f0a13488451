"""`serve` on a disk that fills up keeps serving and says so once: the session that met the
full disk fails alone, the peer table it cannot record is one warning (not one per change)
and leaves no temporary file behind — a node left for weeks on a full disk would otherwise
fill its log and `.lifeline/mesh/` with them.

The node runs in a private mount namespace (`unshare -m`, root) on a 1 MB tmpfs; without it
the test skips on a laptop and fails under CI.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.mesh_procs import cli, first_line, serve_insecure, shared_node
from tests.support.mount_ns import namespaces_work
from tests.support.needs import missing

UNRECORDED = "cannot record the peer table"


def test_a_full_disk_fails_the_session_and_the_peer_table_says_so_once(tmp_path: Path) -> None:
    if not namespaces_work():
        missing("needs unshare -m and mount (run as root) to give the node a small disk")
    source, project = tmp_path / "source", tmp_path / "project"
    body = tmp_path / "body.txt"
    body.write_text("x" * 60_000)
    shared_node(source)
    for n in range(3):
        cli("lifeline", source, "log", "--kind", "note", "--summary", f"big {n}", "--body-file",
            str(body))  # fmt: skip
    project.mkdir()
    mesh, listing = project / ".lifeline" / "mesh", tmp_path / "listing"
    ll = [sys.executable, "-m", "lifeline", "--root", str(project)]
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(project)]
    with serve_insecure(source) as (_proc, address):
        serve = [*lm, "serve", "--insecure", "--listen", "127.0.0.1:0", "--no-discovery"]
        script = [
            f"mount -t tmpfs -o size=1m tmpfs {project}",
            " ".join(shlex.quote(a) for a in [*ll, "init"]) + " >/dev/null",
            " ".join(shlex.quote(a) for a in [*lm, "share", "ledger"]) + " >/dev/null",
            f"dd if=/dev/zero of={project}/spare bs=1k count=96 2>/dev/null",
            f"dd if=/dev/zero of={project}/filler bs=1k count=100000 2>/dev/null || true",
            f"rm {project}/spare",
            " ".join(shlex.quote(a) for a in [*serve, "--peer", address]) + " & node=$!",
            'trap "kill -TERM $node" TERM',
            "wait $node; wait $node; code=$?",
            f"ls -A {mesh} >{listing}",
            "exit $code",
        ]
        proc = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", "\n".join(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = first_line(proc, 60, "serve")
            assert first.startswith("listening on "), first
            assert proc.stderr is not None
            said = []
            for line in proc.stderr:  # until the table could not be written
                said.append(line)
                if UNRECORDED in line:
                    break
            other = tmp_path / "other"
            shared_node(other)
            node = first.split()[-1]
            synced = cli("lifeline_mesh", other, "sync", "--insecure", node, check=False)
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=60)
    log = "".join(said) + err
    assert "the disk is full; free space and run it again" in log, log
    assert log.count(UNRECORDED) == 1, log
    assert "Traceback" not in log, log
    assert proc.returncode == 0 and "stopped after" in out, (proc.returncode, out, log)
    left = listing.read_text().split()
    assert "peers.json" in left and not [n for n in left if n.startswith(".")], left
    assert synced.returncode == 0, synced.stderr  # it served another node meanwhile
