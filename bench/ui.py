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

from truth_ledger import WORDS, generate

from lifeline.lines import line_path
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.identity import ensure_identity
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.ui.app import create_app
from lifeline_mesh.ui.export import asgi_get
from lifeline_mesh.ui.viewer import Viewer


async def build(root: Path, n: int) -> list[str]:
    identity, _ = ensure_identity(root)
    create_mesh(root, "bench")
    entries = generate(n)
    path = line_path(root, "ledger")
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
    if status != 200:
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


async def run(root: Path, ids: list[str], repeat: int) -> None:
    rng = random.Random(7)
    viewer = Viewer(root)
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
    pick = lambda: rng.choice(ids)  # noqa: E731
    cases: list[tuple[str, object]] = [
        ("truth", lambda: (line + "/", "")),
        ("search, common words", lambda: (line + "/search", f"q={_two(rng)}")),
        ("search, a rare word", lambda: (line + "/search", f"q={rng.randrange(len(ids))}")),
        ("entry", lambda: (f"{line}/entries/{pick()}", "")),
        ("history, newest page", lambda: (line + "/history", "")),
        ("history, page at a random cursor", lambda: (line + "/history", f"before={pick()}")),
        ("history, kind=decision", lambda: (line + "/history", "kind=decision")),
        ("history, thread", lambda: (line + "/history", f"thread=thread-{rng.randrange(50)}")),
        ("history, a kind no entry has", lambda: (line + "/history", "kind=milestone")),
        ("history, an author no entry has", lambda: (line + "/history", "author=nobody")),
        ("history, dates", lambda: (line + "/history", "since=2026-01-01&until=2026-01-01")),
        ("graph around an entry", lambda: (f"{line}/graph/{pick()}", "")),
        ("mesh", lambda: ("/mesh", "")),
    ]
    await table(app, cases, repeat)
    await viewer.close()


async def run_sessions(root: Path, repeat: int) -> None:
    from lifeline.sessions.catalogue import Catalogue

    rng = random.Random(7)
    viewer = Viewer(root)
    app = create_app(viewer)
    base = "/lines/sessions"
    reader = await viewer.reader("sessions")
    catalogue = await Catalogue(reader.store).load()
    ids = sorted(catalogue.sessions)
    largest = max(catalogue.summaries(), key=lambda s: s.item_count).id
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
    pages = max(1, len(ids) // 50)
    cases: list[tuple[str, object]] = [
        ("sessions list", lambda: (base + "/sessions", "")),
        ("list, status=crashed", lambda: (base + "/sessions", "status=crashed")),
        (
            "list, tool=codex, a deep page",
            lambda: (base + "/sessions", f"tool=codex&page={rng.randrange(pages) // 3}"),
        ),
        ("list, a deep page", lambda: (base + "/sessions", f"page={rng.randrange(pages)}")),
        ("transcript, first page", lambda: (f"{base}/sessions/{rng.choice(ids)}", "")),
        ("transcript of the largest session", lambda: (f"{base}/sessions/{largest}", "")),
        ("unfinished (kept)", lambda: (base + "/unfinished", "")),
        ("bundle (kept)", lambda: (f"{base}/sessions/{ids[0]}/bundle", "")),
    ]
    await table(app, cases, repeat)
    await viewer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sessions", type=Path, help="time the Sessions pages of this project")
    args = parser.parse_args()
    if args.sessions is not None:
        asyncio.run(run_sessions(args.sessions, args.repeat))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        ids = asyncio.run(build(root, args.n))
        print(f"built and signed a line of {args.n} entries in {time.perf_counter() - start:.1f} s")
        asyncio.run(run(root, ids, args.repeat))


if __name__ == "__main__":
    main()
