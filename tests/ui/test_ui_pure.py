"""The viewer's pure parts: link safety and markdown, URLs for the site and its static copy,
the DAG drawing, a transcript's rows."""

from __future__ import annotations

import json

import pytest

from lifeline.sessions.model import ToolCall, ToolResult
from lifeline_mesh.ui.dag import DagNode, render_dag
from lifeline_mesh.ui.links import Links, static_file
from lifeline_mesh.ui.markdown import MAX_RENDERED_CHARS, is_safe_link, render_markdown
from lifeline_mesh.ui.sessions_view import INPUT_CHARS, transcript_rows
from lifeline_mesh.ui.topology import render_topology


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://example.org/x", True),
        ("http://example.org", True),
        ("mailto:a@b.c", True),
        ("/lines/ledger/", True),
        ("#part", True),
        ("other.html", True),
        ("javascript:alert(1)", False),
        ("JaVaScRiPt:alert(1)", False),
        ("java\tscript:alert(1)", False),
        (" javascript:alert(1)", False),
        ("\x01javascript:alert(1)", False),
        ("data:text/html,<b>", False),
        ("vbscript:x", False),
        ("file:///etc/passwd", False),
        ("//evil.example/x", False),
    ],
)
def test_link_safety(url: str, safe: bool) -> None:
    assert is_safe_link(url) is safe


def test_markdown_keeps_formatting_and_drops_html_images_and_bad_links() -> None:
    html = render_markdown(
        "**bold** <script>alert(1)</script> ![i](https://t.example/p.png) "
        "[ok](https://example.org) [bad](javascript:alert(1))"
    )
    assert "<strong>bold</strong>" in html
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "<img" not in html
    assert '<a href="https://example.org" rel="nofollow noopener noreferrer">ok</a>' in html
    assert "[bad](javascript:alert(1))" in html and 'href="javascript' not in html


def test_a_body_of_too_much_markup_is_shown_as_escaped_plain_text() -> None:
    # 60,000 brackets: ~120,000 steps of the parser, every bracket a possible link
    html = render_markdown("<script>alert(1)</script> **x**\n" + "[" * 60_000)
    assert "Shown as plain text" in html and '<pre class="plain">' in html
    assert "&lt;script&gt;" in html and "<script>" not in html and "<strong>" not in html
    # 1,000 tasks with a link and code each stay markdown
    honest = render_markdown("- [ ] see [docs](https://example.org) and `x[1]`\n" * 1_000)
    assert "Shown as plain text" not in honest and honest.count("<a href") == 1_000


def test_markdown_cuts_huge_text_with_a_marker() -> None:
    html = render_markdown("x" * (MAX_RENDERED_CHARS + 10))
    assert "10 more characters not shown" in html


def test_links_served_and_static() -> None:
    served = Links("/lines/ledger/entries/abc", static=False)
    assert served.entry("ledger", "def") == "/lines/ledger/entries/def"
    assert served.history("ledger", {"kind": "fix", "before": "e1"}) == (
        "/lines/ledger/history?kind=fix&before=e1"
    )
    copy = Links("/lines/ledger/entries/abc", static=True)
    assert copy.entry("ledger", "def") == "def.html"
    assert copy.truth("ledger") == "../index.html"
    assert copy.mesh() == "../../../mesh.html"
    assert copy.asset("style.css") == "../../../assets/style.css"
    assert copy.history("ledger", {"before": "e1"}) == "../history/before-e1.html"
    assert copy.history("ledger", {"kind": "fix"}) is None  # no file for a filter
    assert copy.search("ledger") is None
    assert static_file("/") == "index.html"
    assert static_file("/lines/ledger/history") == "lines/ledger/history/index.html"


def _node(i: str, parents: tuple[str, ...], height: int, kind: str = "note") -> DagNode:
    return DagNode(
        i * 64,
        kind,
        f"2026-01-01T00:00:0{height}Z",
        f"<b>{i}</b>",
        tuple(p * 64 for p in parents),
        height,
    )


def test_dag_draws_fork_merge_and_correction_deterministically() -> None:
    nodes = [
        _node("a", (), 0),
        _node("b", ("a",), 1),
        _node("c", ("a",), 1),
        _node("d", ("b", "c"), 2),
        _node("e", ("d",), 3, kind="correction"),
        _node("f", ("z",), 4),  # parent outside the window
    ]
    svg = render_dag(nodes, "a" * 64, lambda i: f"/g/{i[:1]}")
    assert svg == render_dag(list(reversed(nodes)), "a" * 64, lambda i: f"/g/{i[:1]}")
    assert svg.count("fork-ring") == 1 and svg.count("<polygon") == 1
    assert 'class="edge correction"' in svg and "stub" in svg
    assert "&lt;b&gt;a&lt;/b&gt;" in svg and "<b>" not in svg
    assert 'class="node kind-note focus"' in svg


def test_topology_escapes_peer_text() -> None:
    svg = render_topology("me", [{"address": "<x>", "node_id": None, "failures": 2}])
    assert "&lt;x&gt;" in svg and 'class="peer failing"' in svg


def test_a_huge_tool_call_shows_the_start_of_its_whole_input_and_result() -> None:
    # An input holding a whole file (and a long list) is cut before it is indented, not
    # after: the folded input must still start exactly as the whole input's JSON does.
    content = "line <b>\n" * 400_000
    call = ToolCall(
        call_id="c1",
        name="Write",
        input={"file_path": "/src/app.py", "content": content, "tags": list(range(9_000))},
    )
    result = ToolResult(call_id="c1", output="\n\n   \n" + "first line of it\n" + "x" * 3_000_000)
    (row,) = transcript_rows([call], {"c1": result})
    whole = json.dumps(call.input, indent=2)
    assert row["input"] == whole[:INPUT_CHARS] + "…"
    assert row["arg"] == "/src/app.py"
    assert row["outcome"] == "first line of it"
    assert row["output"] == result.output  # the result itself is shown whole
    small = ToolCall(call_id="c2", name="Read", input={"path": "a\nb", "n": [1, 2]})
    (row,) = transcript_rows([small], {})
    assert row["input"] == json.dumps(small.input, indent=2) and row["arg"] == "a"
    assert not row["answered"]
