"""The projection is lossless: render -> parse gives the same entries; re-render, same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifeline.entry import Entry
from lifeline.errors import IdMismatch, InvalidEntry
from lifeline.migration.markdown import looks_like_lc_markdown, parse_lc_markdown
from lifeline.projection.markdown import is_projection, parse, render
from tests.support.entries import make_entry

# Text with the characters that break naive formats: our own markers, fences, headings,
# RTL and zero-width marks, CR, tabs, U+2028, emoji, CJK, quotes and backslashes.
TRICKY = [
    "### entry ",
    "<!-- end of entry ",
    "- body:",
    "```",
    "````text",
    "(none)",
    '"',
    "\\",
    "[",
    "\r",
    "\r\n",
    "\t",
    "\n",
    "\u200f",
    "\u200b",
    "\u2028",
    "\ufeff",
    "🎉",
    "日本語",
    "   ",
    "<!-- lifeline-projection v1 -->",
]
text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(max_size=5)), max_size=8).map("".join),
)
hexid = st.text("0123456789abcdef", min_size=64, max_size=64)
timestamps = st.datetimes(
    min_value=__import__("datetime").datetime(1970, 1, 2),
    timezones=st.just(__import__("datetime").UTC),
).map(lambda d: d.isoformat())


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    return Entry.create(
        ts=draw(timestamps),
        kind=draw(st.one_of(st.sampled_from(["decision", "note"]), text)),
        author=draw(text),
        agent=draw(text),
        provider=draw(text),
        model=draw(text),
        summary=draw(text),
        body=draw(text),
        parents=draw(st.lists(hexid, max_size=3)),
        dedup_key=draw(st.one_of(st.none(), text)),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entries(), max_size=5))
def test_render_parse_is_lossless_and_a_fixed_point(items: list[Entry]) -> None:
    rendered = render(items, "ledger")
    back = parse(rendered)
    assert back == items  # same ids, ts, parents, dedup_key and every field
    assert render(back, "ledger") == rendered


def test_hand_edited_entry_is_refused_by_name() -> None:
    a = make_entry("first")
    b = make_entry("second", (a.id,))
    rendered = render([a, b], "ledger")
    edited = rendered.replace("- summary: second", "- summary: secOnd")
    with pytest.raises(IdMismatch, match=b.id):
        parse(edited)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("- kind: note", "- kind note", "expected the field '- kind:'"),
        ("```text", "``text", "fence"),
        ("<!-- end of entry", "<!-- end entry", "expected"),
        ("- author: t", '- author: "t', "not a valid JSON string"),
        ("- ts: 2026-01-01T00:00:00.000000Z", "- ts: yesterday", "not ISO-8601"),
    ],
)
def test_malformed_projection_names_the_line(old: str, new: str, message: str) -> None:
    rendered = render([make_entry("one", body="why")], "x")
    assert old in rendered
    with pytest.raises(InvalidEntry, match=message) as info:
        parse(rendered.replace(old, new, 1))
    assert "projection line" in str(info.value)


def test_truncated_file_and_foreign_text_are_errors() -> None:
    rendered = render([make_entry("one", body="why")], "x")
    with pytest.raises(InvalidEntry, match="ends inside an entry"):
        parse(rendered[: rendered.index("```text") + 10])
    with pytest.raises(InvalidEntry, match="not a lifeline projection"):
        parse("# some notes\n")
    assert not is_projection("# notes") and is_projection(rendered)


def test_fence_grows_past_backtick_runs_and_unsafe_body_is_quoted() -> None:
    fenced = make_entry("code", body="````py\nx\n````")
    quoted = make_entry("cr", body="a\rb")
    rendered = render([fenced, quoted], "ledger")
    assert "`````text" in rendered
    assert '- body: "a\\rb"' in rendered
    assert parse(rendered) == [fenced, quoted]


def test_lifeline_context_markdown_is_read_where_ids_match(
    lc_fixture: Path, lc_expected: dict[str, list[dict[str, object]]]
) -> None:
    text = (lc_fixture / "LIFELINE.md").read_text(encoding="utf-8")
    assert looks_like_lc_markdown(text)
    accepted, rejected = parse_lc_markdown(text)
    assert rejected == []
    assert [e.id for e in accepted] == [d["id"] for d in lc_expected["ledger"]]
    assert [list(e.parents) for e in accepted] == [
        sorted(d["parents"])
        for d in lc_expected["ledger"]  # type: ignore[call-overload]
    ]
    tampered = text.replace("**summary**: Cache: Redis", "**summary**: Cache: Valkey")
    accepted, rejected = parse_lc_markdown(tampered)
    assert len(accepted) == len(lc_expected["ledger"]) - 1
    assert [r.number for r in rejected] == ["0003"]
    assert "does not match" in rejected[0].reason
