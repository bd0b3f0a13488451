"""Benchmark: an agent's `context` call through the MCP SDK's own client, warm and after a
change, on stdio and on `mcp --http`, optionally side by side with an earlier source tree.

For each size, a generated line (bench/truth_ledger.py) in a project with a node identity
(`lifeline-mesh init`, as a node has; `--http` needs it for its tokens), its truth tables
brought up to date once (`lifeline context`). Each tree then serves a copy of it: the real
`lifeline-mesh mcp` process, reached by the SDK's stdio client, or `mcp --http 127.0.0.1:0
--insecure` with a bearer token issued by the real CLI, reached by its streamable-HTTP
client. Figures, milliseconds per call as the client sees it (median):

* warm: the same `context` again, nothing written meanwhile;
* after a change: a `lifeline log` by another process, then one `context` (the first call
  that must see the new entry), repeated ``--changes`` times.

``--before PATH`` runs the servers from that source tree too (e.g. a `git worktree add
--detach` of main), each case in the same run, and prints the ratio.

``--hub`` measures a hub process root too: a PostgreSQL server (Debian's `postgresql`, as
tests/support/pg_server.py starts one; or LIFELINE_TEST_PG=postgresql://…), the line moved
into a database by `lifeline-mesh migrate-store`, and for each tree and transport a copy of
that database (``CREATE DATABASE … TEMPLATE``) with a root made by `lifeline-mesh hub init`,
`context` read once on it (this tree folds its truth tables there), then the same figures
with the MCP server and the writes run on the hub root.

    .venv/bin/python bench/mcp_context.py --sizes 10000 100000 --before /tmp/before --hub
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent


def _cli(module: str, root: Path, *args: str, src: Path | None = None) -> str:
    """A command of the tree ``src`` (None: this one)."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=src or REPO,
        env=_env(src),
    )
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def _env(src: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["LIFELINE_AUTHOR"] = "bench"
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def make_project(n: int, work: Path) -> Path:
    """A project holding an ``n``-entry line, a node identity, its truth tables current."""
    target = work / f"gen-{n}"
    generator = REPO / "bench" / "truth_ledger.py"
    subprocess.run([sys.executable, str(generator), str(n), str(target)], check=True)
    root = target / "ours"
    shutil.rmtree(target / "lc", ignore_errors=True)
    _cli("lifeline_mesh", root, "init")
    _cli("lifeline", root, "context")  # the truth tables, folded once
    return root


@asynccontextmanager
async def stdio_client(root: Path, src: Path | None) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lifeline_mesh", "mcp", "--root", str(root), "--agent", "bench"],
        env=_env(src),
        cwd=str(src or REPO),
    )
    async with Client(params, cache=None) as client:
        yield client


@asynccontextmanager
async def http_client(root: Path, src: Path | None) -> AsyncIterator[Client]:
    token = _cli("lifeline_mesh", root, "mcp", "token", "issue", "bench").strip()
    serve = ["mcp", "--root", str(root), "--http", "127.0.0.1:0", "--insecure"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", *serve],
        cwd=src or REPO,
        env=_env(src),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first.startswith("serving MCP on "):
            raise SystemExit(f"mcp --http printed {first!r}")
        url = first.split()[3]
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=300) as http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            yield client
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _timed(call: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await call()
    return (time.perf_counter() - start) * 1000


async def measure(
    client: Client, root: Path, calls: int, changes: int, src: Path | None = None
) -> tuple[float, float]:
    """(warm ms, after-a-change ms), medians; the writes by the tree ``src``'s CLI."""

    async def context() -> None:
        result = await client.call_tool("context", {})
        if result.is_error:
            raise SystemExit(f"context failed: {result.content}")

    await context()
    warm = [await _timed(context) for _ in range(calls)]
    after = []
    for k in range(changes):
        await asyncio.to_thread(
            _cli, "lifeline", root, "log", "--kind", "note", "--summary", f"bench change {k}",
            src=src,
        )  # fmt: skip
        after.append(await _timed(context))
    return statistics.median(warm), statistics.median(after)


async def bench_size(
    n: int,
    work: Path,
    trees: list[tuple[str, Path | None]],
    calls: int,
    changes: int,
    server: str | None = None,
) -> None:
    made = make_project(n, work)
    template = await load_hub(made, server, n) if server is not None else None
    transports = {"stdio": stdio_client, "http": http_client}
    for where in ("laptop", "hub") if template is not None else ("laptop",):
        for transport, opener in transports.items():
            figures: dict[str, tuple[float, float]] = {}
            for label, src in trees:
                root = work / f"{n}-{where}-{transport}-{label.replace(' ', '-')}"
                if where == "laptop":
                    shutil.copytree(made, root)
                else:
                    assert server is not None and template is not None
                    await hub_root(root, server, template, src)
                async with opener(root, src) as client:
                    figures[label] = await measure(client, root, calls, changes, src)
                shutil.rmtree(root)
            _report(n, f"{where} {transport}", figures)
    shutil.rmtree(made.parent)


async def load_hub(made: Path, server: str, n: int) -> str:
    """A database holding the project's line (a template for each case's copy)."""
    import asyncpg

    name = f"bench_mcp_{n}_{os.getpid()}"
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    _cli("lifeline_mesh", made, "migrate-store", str(made), _database(server, name))
    return name


async def hub_root(root: Path, server: str, template: str, src: Path | None) -> None:
    """A hub process root on a copy of ``template``, its ``context`` read once."""
    import asyncpg

    copy = f"{template}_{root.name.replace('-', '_')}"
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f"CREATE DATABASE {copy} TEMPLATE {template}")
    finally:
        await conn.close()
    root.mkdir()
    _cli("lifeline_mesh", root, "hub", "init", "--store", _database(server, copy), src=src)
    _cli("lifeline", root, "context", src=src)


def _database(server: str, name: str) -> str:
    head, _, query = server.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def _report(n: int, where: str, figures: dict[str, tuple[float, float]]) -> None:
    for label, (warm, after) in figures.items():
        line = f"| {n:,} | {where} | {label} | {warm:.1f} ms | {after:.1f} ms |"
        if label != "this tree" and "this tree" in figures:
            ours = figures["this tree"]
            line += f" {warm / ours[0]:.1f}× / {after / ours[1]:.1f}× |"
        else:
            line += " |"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--calls", type=int, default=20, help="warm calls per figure (median)")
    parser.add_argument("--changes", type=int, default=5, help="writes, each then one call")
    parser.add_argument("--before", type=Path, help="an earlier source tree to compare with")
    parser.add_argument("--hub", action="store_true", help="a hub process root too")
    args = parser.parse_args()
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.before is not None:
        trees.append(("before", args.before.resolve()))
    work = Path(tempfile.mkdtemp(prefix="lifeline-bench-mcp-"))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| entries | root, transport | tree | warm | after a change | before ÷ this tree |")
    print("| ---: | --- | --- | ---: | ---: | ---: |")
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(_pg_server()) if args.hub else None
        try:
            for n in args.sizes:
                asyncio.run(bench_size(n, work, trees, args.calls, args.changes, server))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


@contextlib.contextmanager
def _pg_server() -> Iterator[str]:
    given = os.environ.get("LIFELINE_TEST_PG")
    if given:
        yield given
        return
    sys.path.insert(0, str(REPO))  # the repository's tests/
    from tests.support.pg_server import Cluster, server_binaries

    found = server_binaries()
    if found is None:
        raise SystemExit("--hub needs PostgreSQL: apt-get install postgresql, or LIFELINE_TEST_PG")
    cluster = Cluster(found)
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
