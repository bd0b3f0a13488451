"""Checkpoint text: the body format lifeline-context 0.6.1 wrote, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline_mesh.mcp.checkpoint import SECTIONS, CheckpointText


def _parse(body: str) -> tuple[str, dict[str, list[str]]]:
    lines = body.splitlines()
    thread = lines[0].removeprefix("thread: ")
    sections: dict[str, list[str]] = {}
    current = ""
    for line in lines[1:]:
        if line.startswith("  - "):
            sections[current].append(line[4:])
        else:
            current = line.rstrip(":")
            sections[current] = []
    return thread, sections


def test_fixture_checkpoints_rebuild_to_the_same_ids(
    lc_expected: dict[str, list[dict[str, Any]]],
) -> None:
    found = [e for e in lc_expected["ledger"] if e["kind"] == "checkpoint"]
    assert len(found) >= 2
    for item in found:
        thread, sections = _parse(item["body"])
        assert set(sections) <= set(SECTIONS)
        text = CheckpointText.build(thread, **sections)
        assert text.body() == item["body"]
        rebuilt = Entry.create(
            ts=item["ts"],
            kind="checkpoint",
            summary=item["summary"],
            body=text.body(),
            author=item["author"],
            parents=item["parents"],
        )
        assert rebuilt.id == item["id"]


def test_summary_leads_with_next_and_sections_keep_their_order() -> None:
    text = CheckpointText.build(
        "main", tried=["A"], next=["ship it", "then B"], goal=["G"], blocked=["quota"]
    )
    assert text.summary() == "checkpoint main: next — ship it"
    assert text.body() == (
        "thread: main\ngoal:\n  - G\nnext:\n  - ship it\n  - then B\n"
        "blocked:\n  - quota\ntried:\n  - A"
    )
    only = CheckpointText.build("t", "Queue choice", blocked=["waiting"])
    assert only.summary() == "checkpoint Queue choice: blocked — waiting"


def test_items_are_one_line_each() -> None:
    text = CheckpointText.build("main", done=["two\nlines  here"])
    assert text.body() == "thread: main\ndone:\n  - two lines here"


@pytest.mark.parametrize(
    ("thread", "sections", "says"),
    [
        ("main", {}, "at least one item"),
        ("", {"done": ["x"]}, "one non-empty line"),
        ("a\nb", {"done": ["x"]}, "one non-empty line"),
        ("main", {"done": ["  "]}, "an empty item in 'done'"),
    ],
)
def test_bad_checkpoints_say_what_to_fix(
    thread: str, sections: dict[str, list[str]], says: str
) -> None:
    with pytest.raises(InvalidEntry, match=says):
        CheckpointText.build(thread, **sections)
