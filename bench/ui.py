"""The viewer's server time per page on a line of n entries (DESIGN §10: < 200 ms at 100k).

    .venv/bin/python bench/ui.py --n 100000 [--repeat 15]

Builds a line with bench/truth_ledger.py's mix (decisions, corrections, checkpoints over 50
threads, pins), every entry signed by the node (as `lifeline log` signs it), in a mesh of
one. Then times each page through the real application (routing, middleware, templates,
SQLite) called in process, so the figure is server time alone: the median and the worst of
--repeat requests, each to a different entry or cursor where the page takes one. Worst-case
filters are included: a kind and an author that match nothing (a scan of the whole index
order), a thread, dates, and a cursor deep in the line. The first request of the truth page
and of search are reported apart (cold: they fold the line and write the truth snapshot,
and index the line for recall; a served viewer does both in the background at start-up).
The generated text has a vocabulary of 22 words, so a search for common words matches
most of the line: the worst case for ranking. Prints figures;
not a test.

    .venv/bin/python bench/ui.py --sessions ROOT [--repeat 15]

times the Sessions pages instead, on the ``sessions`` line of the project at ROOT (e.g. the
node `bench/sessions.py --keep DIR` ingests into, DIR/node): the list (plain, filtered, a
deep page), transcripts of random sessions, and the unfinished list and bundles, whose
first request (cold: they read whole sessions) is reported apart.

    .venv/bin/python bench/ui.py --n 100000 --keep DIR --http [--before SRC]
    .venv/bin/python bench/ui.py --sessions ROOT --http [--before SRC]

times the same pages through the real server instead: ``lifeline-mesh --root ROOT ui
--listen 127.0.0.1:0`` as a subprocess, each page fetched over HTTP on loopback (one
kept-alive connection). The server time is the server's own figure, its ``Server-Timing``
header (from the request's arrival to the response's start; pages are rendered whole before
they start); the median round trip, from sending the request to reading the whole body, is
printed beside it. ``--keep DIR`` builds the line in DIR once and reuses it. ``--before SRC``
runs a second server from another source tree (a checkout of an earlier commit: ``git archive
COMMIT lifeline lifeline_mesh | tar -x -C SRC``; it needs the ``Server-Timing`` header, so copy
this tree's ``lifeline_mesh/ui/app.py`` into an older one) on the same project, and asks both
servers the same requests in alternating order, so the two columns share the machine's load.
Before timing, each server's background work (warm-up, witnessed times, audit, unfinished
sessions) is waited for; each server's resident memory (now and peak) is printed as it
stops. ``--warm`` reads the project's SQLite files once just before timing: the figures of a
machine whose page cache holds the line (a VM that pages out file pages left idle for a
minute, as this one's memory reclaim does, otherwise times reads from disk).

``--keep DIR`` also takes a line another tool made, e.g. the 1M line of
``bench/truth_ledger.py 1000000 OUT`` (``OUT/ours`` holds ``.lifeline/ledger.db``; its
entries are not signed). The ledger cases include the home page's redirect, the packaged
assets, the timeline at a deep cursor (query and path forms, with a kind), a search for
three common words never asked before (a first ranking; rankings are kept per line) and
deeper pages of a common word's hits.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ui_http
from truth_ledger import WORDS, generate

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import ensure_identity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.ui.app import create_app
from lifeline_mesh.ui.export import asgi_get
from lifeline_mesh.ui.viewer import Viewer


async def build(root: Path, n: int) -> list[str]:
    identity, _ = ensure_identity(NodeHome(root))
    create_mesh(NodeHome(root), "bench")
    entries = generate(n)
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True, exist_ok=True)
    async with await SqliteStore.open(path) as store:
        for k in range(0, n, 5000):
            await store.append_many(entries[k : k + 5000])
            await sign_entries(store, identity, entries[k : k + 5000])
    return [e.id for e in entries]


async def timed(app: object, path: str, query: str = "") -> float:
    start = time.perf_counter()
    status, _body = await asgi_get(app, path, query)
    took = time.perf_counter() - start
    if status not in (200, 307):  # 307: the home page sends to a line
        raise SystemExit(f"{path}?{query} answered {status}")
    return took


async def table(app: object, cases: list[tuple[str, object]], repeat: int) -> None:
    """Median and worst server time of each case, ``repeat`` requests each."""
    print(f"{'page':<36} {'median':>9} {'worst':>9}   (server time, {repeat} requests)")
    for name, make in cases:
        times = []
        for _ in range(repeat):
            path, query = make()  # type: ignore[operator]
            times.append(await timed(app, path, query))
        print(f"{name:<36} {statistics.median(times) * 1000:>7.1f}ms {max(times) * 1000:>7.1f}ms")


def _two(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}+{rng.choice(WORDS)}"


def _fresh(rng: random.Random) -> object:
    """Three distinct common words, a new set each time (a ranking never asked before)."""
    sets = [(a, b, c) for a in WORDS for b in WORDS for c in WORDS if a < b < c]
    rng.shuffle(sets)
    return iter("+".join(s) for s in sets)


def ledger_cases(line: str, ids: list[str], rng: random.Random) -> list[tuple[str, object]]:
    pick = lambda: rng.choice(ids)  # noqa: E731
    fresh = _fresh(rng)
    return [
        ("home (redirect)", lambda: ("/", "")),
        ("truth", lambda: (line + "/", "")),
        ("search, one common word", lambda: (line + "/search", f"q={rng.choice(WORDS)}")),
        ("search, two common words", lambda: (line + "/search", f"q={_two(rng)}")),
        ("search, a rare word", lambda: (line + "/search", f"q={rng.randrange(len(ids))}")),
        ("search, 3 common words, new", lambda: (line + "/search", f"q={next(fresh)}")),  # type: ignore[call-overload]
        (
            "search, common word, page 2-10",
            lambda: (line + "/search", f"q={rng.choice(WORDS)}&page={rng.randrange(1, 10)}"),
        ),
        ("entry", lambda: (f"{line}/entries/{pick()}", "")),
        ("history, newest page", lambda: (line + "/history", "")),
        ("history, page at a random cursor", lambda: (line + "/history", f"before={pick()}")),
        ("history, /before-ID path", lambda: (f"{line}/history/before-{pick()}", "")),
        (
            "history, decision, random cursor",
            lambda: (line + "/history", f"kind=decision&before={pick()}"),
        ),
        ("history, kind=decision", lambda: (line + "/history", "kind=decision")),
        ("history, thread", lambda: (line + "/history", f"thread=thread-{rng.randrange(50)}")),
        ("history, a kind no entry has", lambda: (line + "/history", "kind=milestone")),
        ("history, an author no entry has", lambda: (line + "/history", "author=nobody")),
        ("history, dates", lambda: (line + "/history", "since=2026-01-01&until=2026-01-01")),
        ("graph around an entry", lambda: (f"{line}/graph/{pick()}", "")),
        ("mesh", lambda: ("/mesh", "")),
        ("sessions (home)", lambda: ("/sessions", "")),
        ("asset style.css", lambda: ("/assets/style.css", "")),
        ("asset copy.js", lambda: ("/assets/copy.js", "")),
    ]


async def run(root: Path, ids: list[str], repeat: int) -> None:
    rng = random.Random(7)
    viewer = Viewer(NodeHome(root))
    app = create_app(viewer)
    line = "/lines/ledger"
    cold = await timed(app, line + "/")
    print(
        f"truth page, first request (folds {len(ids)} entries, saves the snapshot): "
        f"{cold * 1000:.0f} ms"
    )
    cold = await timed(app, line + "/search", "q=refund")
    print(f"search, first request (indexes {len(ids)} entries for recall): {cold * 1000:.0f} ms")
    start = time.perf_counter()
    await viewer.witness.run()  # what the first Entry page starts in the background
    print(f"witnessed times of the line, one pass: {time.perf_counter() - start:.1f} s")
    cases = ledger_cases(line, ids, rng)
    await table(app, cases, repeat)
    await viewer.close()


def session_cases(
    base: str, ids: list[str], by_size: list[str], rng: random.Random
) -> list[tuple[str, object]]:
    """``by_size``: session ids, most items first; the copies of the largest session (the
    corpus repeats each fixture) give the first view of a large session, never kept yet."""
    pages = max(1, len(ids) // 50)
    fresh = iter(by_size)
    largest = by_size[0]
    return [
        ("sessions list", lambda: (base + "/sessions", "")),
        ("list, status=crashed", lambda: (base + "/sessions", "status=crashed")),
        (
            "list, tool=codex, a deep page",
            lambda: (base + "/sessions", f"tool=codex&page={rng.randrange(pages) // 3}"),
        ),
        ("list, a deep page", lambda: (base + "/sessions", f"page={rng.randrange(pages)}")),
        ("transcript, first page", lambda: (f"{base}/sessions/{rng.choice(ids)}", "")),
        ("largest sessions, first view", lambda: (f"{base}/sessions/{next(fresh)}", "")),
        ("transcript of the largest session", lambda: (f"{base}/sessions/{largest}", "")),
        ("unfinished (kept)", lambda: (base + "/unfinished", "")),
        ("bundle (kept)", lambda: (f"{base}/sessions/{ids[0]}/bundle", "")),
    ]


async def session_ids(root: Path) -> tuple[list[str], list[str]]:
    """Every session id, and the ids of the largest sessions (most items first)."""
    from lifeline.sessions.catalogue import Catalogue

    viewer = Viewer(NodeHome(root))
    reader = await viewer.reader("sessions")
    catalogue = await Catalogue(reader.store).load()
    by_size = [s.id for s in sorted(catalogue.summaries(), key=lambda s: -s.item_count)]
    await viewer.close()
    return sorted(catalogue.sessions), by_size


async def run_sessions(root: Path, repeat: int) -> None:
    rng = random.Random(7)
    ids, by_size = await session_ids(root)
    viewer = Viewer(NodeHome(root))
    app = create_app(viewer)
    base = "/lines/sessions"
    reader = await viewer.reader("sessions")
    cold = await timed(app, "/sessions")
    print(f"{len(ids)} sessions; list, first request (reads the catalogue): {cold * 1000:.0f} ms")
    took = await timed(app, base + "/unfinished")
    start = time.perf_counter()
    await reader.sessions.unfinished(wait=True)
    print(
        f"unfinished, first request: {took * 1000:.0f} ms (the list is found in the background:"
        f" {time.perf_counter() - start:.1f} s more)"
    )
    took = await timed(app, f"{base}/sessions/{ids[0]}/bundle")
    print(f"bundle, first request (reads whole sessions): {took * 1000:.0f} ms")
    await table(app, session_cases(base, ids, by_size, rng), repeat)
    await viewer.close()


async def line_ids(root: Path) -> list[str]:
    async with await SqliteStore.open(Home(root).line_path("ledger"), create=False) as store:
        return await store.run_read(
            lambda conn: [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY seq")]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sessions", type=Path, help="time the Sessions pages of this project")
    parser.add_argument("--keep", type=Path, help="build the line here once, and reuse it")
    parser.add_argument("--http", action="store_true", help="time the real server over HTTP")
    parser.add_argument("--before", type=Path, help="with --http: also serve this source tree")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="with --http: read the line's SQLite files just before timing (a warm page cache)",
    )
    args = parser.parse_args()
    if args.before is not None and not args.http:
        parser.error("--before needs --http")
    if args.warm and not args.http:
        parser.error("--warm needs --http")
    if args.sessions is not None:
        if args.http:
            ids, by_size = asyncio.run(session_ids(args.sessions))
            cases = session_cases("/lines/sessions", ids, by_size, random.Random(7))
            ui_http.sessions(args.sessions, cases, args.repeat, args.before)  # type: ignore[arg-type]
        else:
            asyncio.run(run_sessions(args.sessions, args.repeat))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if Home(root).line_path("ledger").exists():
            ids = asyncio.run(line_ids(root))
            print(f"reusing the line of {len(ids)} entries in {root}")
        else:
            start = time.perf_counter()
            ids = asyncio.run(build(root, args.n))
            took = time.perf_counter() - start
            print(f"built and signed a line of {args.n} entries in {took:.1f} s")
        if args.http:
            cases = ledger_cases("/lines/ledger", ids, random.Random(7))
            ui_http.ledger(
                root,
                "/lines/ledger",
                ids[-1],
                cases,  # type: ignore[arg-type]
                args.repeat,
                args.before,
                warm=args.warm,
            )
        else:
            asyncio.run(run(root, ids, args.repeat))


if __name__ == "__main__":
    main()
