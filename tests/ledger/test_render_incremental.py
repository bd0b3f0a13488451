"""`lifeline render` extends the file in place when it is the previous render, else
rewrites it; either way the bytes equal a full render (docs/projection.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lifeline.entry import Entry
from lifeline.projection.markdown import _visible, parse
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline
from tests.support.entries import make_entry


def _chain(count: int, start: str = "", prefix: str = "e") -> list[Entry]:
    out: list[Entry] = []
    parent = (start,) if start else ()
    for n in range(count):
        entry = make_entry(f"{prefix} {n}", parent, ts=f"2026-01-01T00:00:{n:02d}Z", body="b")
        out.append(entry)
        parent = (entry.id,)
    return out


async def _append(root: Path, entries: list[Entry]) -> None:
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await store.append_many(entries)


def _render(root: Path, *extra: str) -> tuple[Path, str]:
    """Render; returns the file and what `-v` says the render did."""
    done = lifeline(root, "-v", "render", *extra)
    assert done.returncode == 0, done.stderr
    said = [ln for ln in done.stderr.splitlines() if "entries written" in ln]
    return Path(done.stdout.strip()), said[0]


def _full_bytes(root: Path) -> bytes:
    done = lifeline(root, "render", "--stdout")
    assert done.returncode == 0, done.stderr
    return done.stdout.encode("utf-8")


async def test_an_append_extends_the_file_in_place(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    first = _chain(3)
    await _append(tmp_path, first)
    path, said = _render(tmp_path)
    assert said.startswith("full: 3 entries")
    before, inode = path.read_bytes(), path.stat().st_ino
    assert _render(tmp_path)[1].startswith("unchanged: 0 entries")
    more = _chain(2, first[-1].id, "more")
    await _append(tmp_path, more)
    path, said = _render(tmp_path)
    assert said.startswith("appended: 2 entries")
    after = path.read_bytes()
    assert path.stat().st_ino == inode  # written in place, not renamed over
    assert after.startswith(before) and after == _full_bytes(tmp_path)
    assert [e.id for e in parse(after.decode())] == [e.id for e in first + more]
    state = json.loads((tmp_path / ".lifeline" / "ledger.projection.json").read_text())
    assert state["size"] == len(after) and state["count"] == 5


async def test_an_edited_file_is_rendered_again(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    first = _chain(3)
    await _append(tmp_path, first)
    path, _ = _render(tmp_path)
    text = path.read_bytes()
    path.write_bytes(text.replace(b"e 1", b"E 1"))  # same size, other bytes
    await _append(tmp_path, _chain(1, first[-1].id, "more"))
    path, said = _render(tmp_path)
    assert said.startswith("full: 4 entries") and "not the last render's" in said
    assert path.read_bytes() == _full_bytes(tmp_path)
    path.unlink()  # a missing file is written whole as well
    assert _render(tmp_path)[1].startswith("full: 4 entries")
    assert path.read_bytes() == _full_bytes(tmp_path)


async def test_a_changed_entry_or_one_sorting_earlier_renders_whole(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    first = _chain(4)
    await _append(tmp_path, first)
    _render(tmp_path)
    # A sibling of the second entry: height 2, so it sorts before the last block.
    sibling = make_entry("sibling", (first[0].id,), ts="2026-01-01T00:00:30Z")
    await _append(tmp_path, [sibling])
    path, said = _render(tmp_path)
    assert said.startswith("full: 5 entries") and "sorts before the end" in said
    assert path.read_bytes() == _full_bytes(tmp_path)
    # The same content seen earlier elsewhere: the store keeps the earlier ts in place.
    older = Entry.from_dict(first[2].to_dict() | {"ts": "2025-12-31T00:00:00Z"})
    await _append(tmp_path, [older])
    path, said = _render(tmp_path)
    assert said.startswith("full: 5 entries") and "rendered entries changed" in said
    assert path.read_bytes() == _full_bytes(tmp_path)
    assert "2025-12-31T00:00:00" in path.read_text()


async def test_full_flag_and_other_format_rewrite(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    first = _chain(2)
    await _append(tmp_path, first)
    _render(tmp_path)
    assert _render(tmp_path, "--full")[1].startswith("full: 2 entries")
    assert lifeline(tmp_path, "render", "--format", "lifeline-context").returncode == 0
    await _append(tmp_path, _chain(1, first[-1].id, "more"))
    path, said = _render(tmp_path)  # the file is now the other format's: written whole
    assert said.startswith("full: 3 entries")
    assert path.read_bytes() == _full_bytes(tmp_path)


def test_isprintable_is_the_visible_test_for_every_character() -> None:
    # The projection's fast checks rely on it (lifeline/projection/markdown.py, _plain_safe).
    odd = [c for c in map(chr, range(sys.maxunicode + 1)) if c.isprintable() != _visible(c)]
    assert odd == []


async def test_a_record_that_cannot_be_written_leaves_the_render_standing(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    first = _chain(2)
    await _append(tmp_path, first)
    (tmp_path / ".lifeline" / "ledger.projection.json").mkdir()  # unwritable as a file
    path, said = _render(tmp_path)
    assert said.startswith("full: 2 entries") and path.read_bytes() == _full_bytes(tmp_path)
    await _append(tmp_path, _chain(1, first[-1].id, "more"))
    assert _render(tmp_path)[1].startswith("full: 3 entries")
    assert path.read_bytes() == _full_bytes(tmp_path)


async def test_a_damaged_record_means_a_whole_render(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    first = _chain(2)
    await _append(tmp_path, first)
    _render(tmp_path)
    record = tmp_path / ".lifeline" / "ledger.projection.json"
    data = json.loads(record.read_text())
    for damage in ({"total": "not hex"}, {"last": [1, 2]}, {"size": "12"}):
        record.write_text(json.dumps(data | damage))
        path, said = _render(tmp_path)
        assert said.startswith("full: 2 entries"), damage
        assert path.read_bytes() == _full_bytes(tmp_path)
    record.write_text("{")
    assert _render(tmp_path)[1].startswith("full: 2 entries")
