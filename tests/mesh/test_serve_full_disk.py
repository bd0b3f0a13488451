"""`serve` on a disk that fills up keeps serving and says so once: the session that met the
full disk fails alone and hands the space its uncommitted transaction took back at once
(a local write works again while the node runs), the peer table it cannot record is one
warning (not one per change) and leaves no temporary file behind — a node left for weeks
on a full disk would otherwise fill its log and `.lifeline/mesh/` with them. A `serve`
started on a full disk exits in one line.

The node runs in a private mount namespace (`unshare -m`, root) on a 1 MB tmpfs; without it
the test skips on a laptop and fails under CI.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from tests.support.mesh_procs import cli, first_line, serve_insecure, shared_node
from tests.support.mount_ns import in_namespace, namespaces_work
from tests.support.needs import missing

UNRECORDED = "cannot record the peer table"
FULL = "the disk is full; free space and run it again"


def _sh(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def _small_disk(project: Path, spare_kib: int) -> list[str]:
    """Mount a 1 MB tmpfs on ``project``, make a shared line there, leave ``spare_kib``."""
    ll = [sys.executable, "-m", "lifeline", "--root", str(project)]
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(project)]
    return [
        f"mount -t tmpfs -o size=1m tmpfs {project}",
        _sh([*ll, "init"]) + " >/dev/null",
        _sh([*lm, "share", "ledger"]) + " >/dev/null",
        f"dd if=/dev/zero of={project}/spare bs=1k count={spare_kib} 2>/dev/null",
        f"dd if=/dev/zero of={project}/filler bs=1k count=100000 2>/dev/null || true",
        f"rm {project}/spare",
    ]


def _wait_for(path: Path, text: str, seconds: float) -> None:
    end = time.monotonic() + seconds
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < end, f"{text!r} not in {path} within {seconds} s"
        time.sleep(0.05)


def _needs_namespaces() -> None:
    if not namespaces_work():
        missing("needs unshare -m and mount (run as root) to give the node a small disk")


def _serve_on_a_small_disk(
    tmp_path: Path, spare_kib: int, address: str, then: list[str]
) -> tuple[subprocess.Popen[str], Path, str]:
    """`serve --peer ADDRESS` on a 1 MB tmpfs with ``spare_kib`` left, its stderr in a
    file, ``then`` run beside it; on SIGTERM the script stops it and lists its mesh folder.
    Returns the process, the output folder and the address it listens on."""
    project, out = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(project)]
    serve = [*lm, "serve", "--insecure", "--listen", "127.0.0.1:0", "--no-discovery"]
    script = [
        *_small_disk(project, spare_kib),
        _sh([*serve, "--peer", address]) + f" 2>{out}/err & node=$!",
        'trap "kill -TERM $node" TERM',
        *then,
        "wait $node; wait $node; code=$?",
        f"ls -A {project / '.lifeline' / 'mesh'} >{out}/listing",
        "exit $code",
    ]
    proc = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", "\n".join(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = first_line(proc, 60, "serve")
    assert first.startswith("listening on "), first
    return proc, out, first.split()[-1]


def _big_source(tmp_path: Path) -> Path:
    source, body = tmp_path / "source", tmp_path / "body.txt"
    body.write_text("x" * 60_000)
    shared_node(source)
    for n in range(3):
        cli("lifeline", source, "log", "--kind", "note", "--summary", f"big {n}", "--body-file",
            str(body))  # fmt: skip
    return source


def test_a_session_that_fills_the_disk_hands_its_space_back(tmp_path: Path) -> None:
    _needs_namespaces()
    source = _big_source(tmp_path)
    project, out = tmp_path / "project", tmp_path / "out"
    ll = [sys.executable, "-m", "lifeline", "--root", str(project)]
    with serve_insecure(source) as (_proc, address):
        proc, out, node = _serve_on_a_small_disk(
            tmp_path,
            96,
            address,
            [
                f"until grep -q {shlex.quote(FULL)} {out}/err; do sleep 0.05; done",
                # its uncommitted transaction's WAL is handed back: another file fits, and a
                # local write
                f"head -c 16384 /dev/zero >{project}/another; echo $? >{out}/another",
                _sh([*ll, "log", "--kind", "note", "--summary", "small"]) + " >/dev/null 2>&1",
                f"echo $? >{out}/logged",
            ],
        )
        try:
            _wait_for(out / "logged", "\n", 60)
            other = tmp_path / "other"
            shared_node(other)
            synced = cli("lifeline_mesh", other, "sync", "--insecure", node, check=False)
        finally:
            proc.terminate()
            stdout, _ = proc.communicate(timeout=60)
    log = (out / "err").read_text()
    assert (out / "another").read_text().strip() == "0", log
    assert (out / "logged").read_text().strip() == "0", log
    assert "Traceback" not in log, log
    assert synced.returncode == 0, synced.stderr  # it served another node meanwhile
    assert proc.returncode == 0 and "stopped after" in stdout, (proc.returncode, stdout, log)


def test_a_peer_table_it_cannot_record_is_said_once_and_leaves_no_file(tmp_path: Path) -> None:
    _needs_namespaces()
    source = _big_source(tmp_path)
    with serve_insecure(source) as (_proc, address):
        proc, out, node = _serve_on_a_small_disk(tmp_path, 8, address, [])
        try:
            _wait_for(out / "err", UNRECORDED, 60)
            _wait_for(out / "err", "disk I/O error): is the disk full?", 60)
            for n in range(2):  # each session in changes the table: another write
                other = tmp_path / f"other{n}"
                shared_node(other)
                cli("lifeline_mesh", other, "sync", "--insecure", node, check=False)
        finally:
            proc.terminate()
            stdout, _ = proc.communicate(timeout=60)
    log = (out / "err").read_text()
    assert log.count(UNRECORDED) == 1 and "Traceback" not in log, log
    assert proc.returncode == 0 and "stopped after 2 sessions in" in stdout, (stdout, log)
    left = (out / "listing").read_text().split()
    assert not [n for n in left if n.startswith(".")], left  # no temp file of a failed write


def test_serve_started_on_a_full_disk_says_so_in_one_line(tmp_path: Path) -> None:
    _needs_namespaces()
    project, out = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(project)]
    serve = [*lm, "serve", "--insecure", "--listen", "127.0.0.1:0", "--no-discovery"]
    served_before = [  # its lock file and peer table are there already, as after a restart
        _sh(serve) + f" >{out}/first 2>/dev/null & node=$!",
        f"until grep -q listening {out}/first; do sleep 0.05; done",
        "kill -TERM $node; wait $node",
    ]
    setup = _small_disk(project, 0)
    ((code, _, err),) = in_namespace([*setup[:3], *served_before, *setup[3:]], out, serve)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)
    assert FULL in err, err
