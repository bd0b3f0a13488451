"""Helpers to run real `lifeline-mesh serve` nodes as subprocesses (tests and benchmarks)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "SYNC_JSON",
    "ServeRefused",
    "ca_serving",
    "cli",
    "first_line",
    "free_port",
    "free_ports",
    "has_entry",
    "join_mesh",
    "log_note",
    "serve",
    "serve_insecure",
    "shared_node",
    "signed_node",
    "start_ca_serve",
    "terminate",
    "wait_for_entry",
]


SYNC_JSON = ("sync", "--insecure", "--json")  # `lifeline-mesh sync` without membership


def cli(
    module: str, root: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} {args} failed ({proc.returncode}): {proc.stderr}")
    return proc


def shared_node(root: Path) -> Path:
    """`lifeline init` and `lifeline-mesh share ledger` in ``root``; returns the line file."""
    root.mkdir(parents=True, exist_ok=True)
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "share", "ledger")
    return root / ".lifeline" / "ledger.db"


def signed_node(root: Path, *summaries: str) -> None:
    """A node with an identity (every local write is signed) sharing ``ledger``, holding one
    decision per summary."""
    root.mkdir(parents=True, exist_ok=True)
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "init")
    cli("lifeline_mesh", root, "share", "ledger")
    for s in summaries:
        cli("lifeline", root, "log", "--kind", "decision", "--summary", s, "--author", "t")


def log_note(root: Path, summary: str) -> str:
    """`lifeline log` a note; returns its id."""
    out = cli("lifeline", root, "log", "--kind", "note", "--summary", summary, "--json").stdout
    return str(json.loads(out)["id"])


class ServeRefused(AssertionError):
    """`serve` exited instead of listening; ``stderr`` says why."""

    def __init__(self, first_line: str, stderr: str) -> None:
        super().__init__(f"serve did not start: {first_line!r} {stderr}")
        self.stderr = stderr


def free_port() -> int:
    """A port free right now (the kernel picks it); the node binds it a moment later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free right now (all held open together while the kernel picks)."""
    sockets = [socket.socket() for _ in range(n)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [int(sock.getsockname()[1]) for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def terminate(proc: subprocess.Popen[str]) -> None:
    """SIGTERM and reap; SIGKILL if it has not exited within 30 s."""
    proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def first_line(proc: subprocess.Popen[str], seconds: float, what: str) -> str:
    """The first line ``proc`` prints ("" if it exits first), within ``seconds``; past that
    it is killed and the test fails saying so, instead of waiting for pytest's timeout."""
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], seconds)
    if not readable:
        proc.kill()
        raise AssertionError(f"{what} printed nothing within {seconds} s")
    return proc.stdout.readline()


def wait_for_stderr(proc: subprocess.Popen[str], needle: str, seconds: float) -> str:
    """What ``proc`` wrote to stderr until ``needle`` appears in it (read from the pipe
    itself, unbuffered, so ``communicate`` gives the rest); fails after ``seconds``."""
    assert proc.stderr is not None
    fd, seen, end = proc.stderr.fileno(), b"", time.monotonic() + seconds
    while needle.encode() not in seen:
        left = end - time.monotonic()
        assert left > 0, f"{needle!r} not logged within {seconds} s: {seen.decode()[-2000:]}"
        readable, _, _ = select.select([fd], [], [], left)
        chunk = os.read(fd, 65536) if readable else b""
        assert chunk or not readable, f"exited before logging {needle!r}: {seen.decode()}"
        seen += chunk
    return seen.decode()


@contextmanager
def serve(root: Path, *args: str, wrap: Sequence[str] = ()) -> Iterator[subprocess.Popen[str]]:
    """Run `serve` until the block ends, then SIGTERM it and require a clean exit."""
    proc = subprocess.Popen(
        [*wrap, sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = first_line(proc, 60, "serve")  # printed once the server is bound
        if not first.startswith("listening on "):
            proc.kill()
            raise ServeRefused(first, proc.communicate()[1])
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def serve_with_join_port(root: Path) -> Iterator[tuple[str, str]]:
    """Run `serve` (the CA holder's: it prints its join port too) until the block ends;
    yields its sync and join addresses."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = first_line(proc, 60, "serve")
        assert first.startswith("listening on "), (first, proc.stderr and proc.stderr.read())
        second = proc.stdout.readline()
        assert second.startswith("join port on "), second
        yield first.split()[-1], second.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def serve_insecure(root: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run `serve --insecure` (no membership) until the block ends, then kill it; yields the
    process and the address it listens on."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "serve", "--insecure", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = first_line(proc, 60, "serve --insecure")  # printed once the server is bound
        assert first.startswith("listening on "), (first, proc.stderr.read() if proc.stderr else "")
        yield proc, first.split()[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def has_entry(line_file: Path, entry_id: str) -> bool:
    if not line_file.exists():
        return False
    conn = sqlite3.connect(f"file:{quote(str(line_file))}?mode=ro", uri=True, timeout=5)
    try:
        return (
            conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None
        )
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def wait_for_entry(line_file: Path, entry_id: str, *, deadline_s: float = 30.0) -> float:
    """Poll until ``entry_id`` is stored in ``line_file``; returns the monotonic time seen."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if has_entry(line_file, entry_id):
            return time.monotonic()
        time.sleep(0.005)
    raise AssertionError(f"{entry_id[:12]} did not reach {line_file} within {deadline_s}s")


def author_signed(line_file: Path, entry_id: str) -> bool:
    """Whether ``line_file`` holds an author signature of ``entry_id``."""
    with sqlite3.connect(f"file:{quote(str(line_file))}?mode=ro", uri=True, timeout=30) as conn:
        sql = "SELECT 1 FROM attestations WHERE role = 'author' AND subject = ?"
        found = conn.execute(sql, (entry_id,)).fetchone() is not None
    conn.close()
    return found


async def until(done: Callable[[], bool], deadline_s: float = 30.0) -> None:
    """Poll ``done`` on the event loop until it holds; fails after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while not done():
        assert time.monotonic() < end, "not within the deadline"
        await asyncio.sleep(0.02)


def git(root: Path, *args: str) -> str:
    """`git -C root ARGS` with a committer set; its standard output (fails loudly)."""
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def wait_watching(root: Path, *, deadline_s: float = 60.0) -> None:
    """Until the node's peer table says its Watch call to every peer is open."""
    from lifeline_mesh.home.node_home import NodeHome
    from lifeline_mesh.peering.table import load_peers_file

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        data = load_peers_file(NodeHome(root))
        if data and data["peers"] and all(row.get("watching") for row in data["peers"]):
            return
        time.sleep(0.02)
    raise AssertionError(f"no open watch after {deadline_s}s: {load_peers_file(NodeHome(root))}")


def join_mesh(
    ca_root: Path,
    others: Sequence[Path],
    *,
    host: str = "127.0.0.1",
    wrap_ca: Sequence[str] = (),
    wraps: Sequence[Sequence[str]] = (),
    roles: Sequence[str] = (),
) -> str:
    """Create a mesh on ``ca_root`` and join every root of ``others`` to it with the real
    commands (init --new-mesh, membership-serve, invite, join); ``roles``: the role of each
    (default member). Returns the mesh id."""
    created = cli("lifeline_mesh", ca_root, "init", "--new-mesh", "team", "--json")
    mesh_id = str(json.loads(created.stdout)["mesh_id"])
    proc = subprocess.Popen(
        [
            *wrap_ca,
            sys.executable,
            "-m",
            "lifeline_mesh",
            "--root",
            str(ca_root),
            "membership-serve",
            "--listen",
            f"{host}:0",
            "--mtls-listen",
            f"{host}:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ports = json.loads(first_line(proc, 60, "membership-serve"))  # printed once it listens
        for n, root in enumerate(others):
            role = roles[n] if n < len(roles) else "member"
            invited = cli("lifeline_mesh", ca_root, "invite", "--role", role, "--json")
            token = json.loads(invited.stdout)["token"]
            wrap = list(wraps[n]) if n < len(wraps) else []
            joined = subprocess.run(
                [
                    *wrap,
                    sys.executable,
                    "-m",
                    "lifeline_mesh",
                    "--root",
                    str(root),
                    "join",
                    token,
                    "--peer",
                    f"{host}:{ports['join_port']}",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if joined.returncode != 0:
                raise AssertionError(f"join failed: {joined.stderr}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    return mesh_id


def start_ca_serve(
    root: Path,
    stderr: int = subprocess.PIPE,
    extra: Sequence[str] = (),
    wrap: Sequence[str] = (),
) -> tuple[subprocess.Popen[str], str, str]:
    """Start `serve` on a CA holder with a join port, both on loopback; returns the process
    and the sync and join addresses it printed. The caller stops it (a long run passes
    ``stderr=subprocess.DEVNULL``: nobody reads the pipe; or a file's descriptor).
    ``extra``: more `serve` options (what they print comes after those two lines); ``wrap``:
    a command that runs it (``prlimit …``)."""
    proc = subprocess.Popen(
        [
            *wrap,
            sys.executable,
            "-m",
            "lifeline_mesh",
            "--root",
            str(root),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--join-listen",
            "127.0.0.1:0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    assert proc.stdout is not None
    sync = first_line(proc, 60, "serve").removeprefix("listening on ").strip()
    joins = proc.stdout.readline().removeprefix("join port on ").strip()  # right after it
    if not (sync and joins):
        proc.kill()
        raise ServeRefused(sync, proc.communicate()[1] or "")
    return proc, sync, joins


@contextmanager
def ca_serving(root: Path, log: Path) -> Iterator[str]:
    """`serve` on the CA holder ``root`` (no discovery), its stderr in the file ``log``;
    yields its sync address and stops it on the way out."""
    with log.open("w") as out:
        proc, address, _joins = start_ca_serve(root, out.fileno(), extra=("--no-discovery",))
    try:
        yield address
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
