"""The viewer's bounded search over HTTP (real uvicorn on 127.0.0.1 port 0): a word most
entries hold gets a first page ranked among the newest matches and a count capped at a
bound; a rarer word's old matches still come first; a small match set is ranked whole, in
the order of ``lifeline recall``; pages of hits. The bounds are lowered so that a line of a
few hundred entries crosses them (the same code paths as 100k entries with the real ones)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.ui import search
from tests.support.mesh_procs import cli
from tests.support.ui_server import fetch, running_viewer

LINE = 300  # entries; every one holds "ledger", one in three "middle", three old ones "zephyr"


async def _write(root: Path) -> list[str]:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True, exist_ok=True)
    entries: list[Entry] = []
    for n in range(LINE):
        words = ["ledger entry", f"number {n}"]
        if n % 3 == 0:
            words.append("middle")
        if n in (5, 6, 7):
            words.append("zephyr")
        entries.append(
            Entry.create(
                ts=f"2026-03-01T00:{n // 60:02d}:{n % 60:02d}Z",
                kind="note",
                summary=" ".join(words),
                body="ledger " * (1 + n % 4),
                author="alice",
                parents=(entries[-1].id,) if entries else (),
            )
        )
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries)
    return [e.id for e in entries]


@pytest.fixture(scope="module")
def line(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], str]:
    root = tmp_path_factory.mktemp("search") / "project"
    root.mkdir()
    ids = asyncio.run(_write(root))
    with running_viewer(root) as url:
        yield root, ids, url  # type: ignore[misc]


@pytest.fixture(autouse=True)
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "COUNT_CAP", 200)
    monkeypatch.setattr(search, "RANK_ALL", 120)
    monkeypatch.setattr(search, "NEWEST", 30)


def _page(url: str, query: str) -> tuple[str, list[str]]:
    status, html, _headers = fetch(f"{url}/lines/ledger/search?{query}")
    assert status == 200, html[:500]
    matches = re.search(r'<p class="meta" id="matches">(.*?)</p>', html, re.S)
    assert matches is not None
    return matches[1], re.findall(r'href="/lines/ledger/entries/([0-9a-f]{64})"', html)


def test_a_word_most_entries_hold_is_ranked_among_the_newest(
    line: tuple[Path, list[str], str],
) -> None:
    _root, ids, url = line
    text, hits = _page(url, "q=ledger")
    assert text.startswith("More than 200 entries match")
    assert "among the newest 30" in text
    assert len(hits) == search.PAGE
    assert set(hits) <= set(ids[-30:])  # never a whole-line ranking
    _text, more = _page(url, "q=ledger&page=1")
    assert more and set(more) <= set(ids[-30:]) and not set(more) & set(hits)
    _status, html, _ = fetch(f"{url}/lines/ledger/search?q=ledger&page=1")
    assert 'rel="prev"' in html and 'rel="next"' not in html  # 30 ranked: two pages


def test_a_rare_word_beside_a_common_one_finds_its_old_entries_first(
    line: tuple[Path, list[str], str],
) -> None:
    _root, ids, url = line
    text, hits = _page(url, "q=ledger+zephyr+qqqzzz")
    assert text.endswith("every entry holding “zephyr”. Rarer words narrow the search.")
    assert set(hits[:3]) == {ids[5], ids[6], ids[7]}  # far older than the newest 30


def test_a_small_match_set_is_ranked_whole_as_recall_ranks_it(
    line: tuple[Path, list[str], str],
) -> None:
    root, ids, url = line
    text, hits = _page(url, "q=middle")
    assert text.startswith("100 entries match, the best first")
    recalled = json.loads(cli("lifeline", root, "recall", "middle", "-k", "20", "--json").stdout)
    assert hits == [h["id"] for h in recalled]
    assert set(hits) <= {ids[n] for n in range(0, LINE, 3)}


def test_pages_of_hits_and_a_bad_page(line: tuple[Path, list[str], str]) -> None:
    _root, _ids, url = line
    first = _page(url, "q=middle")[1]
    second = _page(url, "q=middle&page=1")[1]
    assert len(second) == search.PAGE and not set(first) & set(second)
    status, html, _ = fetch(f"{url}/lines/ledger/search?q=middle&page=x")
    assert status == 400 and "not a page of hits" in html
    for hostile in ("%C2%B2", "9" * 5000):  # a digit int() refuses; more than it takes
        status, html, _ = fetch(f"{url}/lines/ledger/search?q=middle&page={hostile}")
        assert status == 400 and "not a page of hits" in html, html[:200]
