"""Text a member wrote never drives the terminal it is printed on: `show` and `context`
print its control characters escaped, while `--json` and LIFELINE.md keep it as written
(decision 0128)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.clirun import lifeline

# what a terminal acts on: C0 but LF and TAB, DEL, C1 (CSI U+009B included)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SUMMARY = "Red \x1b[31mALERT\x1b[0m \x1b]0;pwned\x07"
BODY = "why:\n\tindented \x1b[2J\x1b]52;c;aGk=\x07\r\nnext \x9b1m line\rover"


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, str]:
    assert lifeline(tmp_path, "init").returncode == 0
    done = lifeline(tmp_path, "log", "--kind", "note", "--summary", SUMMARY, "--body", BODY)
    assert done.returncode == 0, done.stderr
    return tmp_path, done.stdout.strip()


def test_show_prints_control_characters_escaped(logged: tuple[Path, str]) -> None:
    root, entry_id = logged
    shown = lifeline(root, "show", entry_id)
    assert shown.returncode == 0, shown.stderr
    assert CONTROL.findall(shown.stdout) == []
    assert "summary:  Red \\x1b[31mALERT\\x1b[0m \\x1b]0;pwned\\x07\n" in shown.stdout
    # the body keeps its lines and tabs; a CR LF ends a line, a lone CR is shown
    assert "why:\n\tindented \\x1b[2J\\x1b]52;c;aGk=\\x07\nnext \\x9b1m line\\rover" in shown.stdout


def test_context_prints_control_characters_escaped(logged: tuple[Path, str]) -> None:
    root, entry_id = logged
    context = lifeline(root, "context")
    assert context.returncode == 0, context.stderr
    assert CONTROL.findall(context.stdout) == []
    assert f"`{entry_id[:12]}`" in context.stdout and "Red \\x1b[31mALERT" in context.stdout
    for fmt in ("anthropic", "openai"):  # the same text, in a provider's request shape
        shaped = lifeline(root, "context", "--format", fmt)
        assert shaped.returncode == 0, shaped.stderr
        assert "\x1b" not in json.dumps(json.loads(shaped.stdout), ensure_ascii=False)


def test_json_and_lifeline_md_keep_the_text_as_written(logged: tuple[Path, str]) -> None:
    root, entry_id = logged
    shown = lifeline(root, "show", entry_id, "--json")
    entry = json.loads(shown.stdout)
    assert (entry["summary"], entry["body"]) == (SUMMARY, BODY)
    history = json.loads(lifeline(root, "history", "--json").stdout)
    assert history[0]["summary"] == SUMMARY
    assert lifeline(root, "render").returncode == 0
    # the lossless file holds every character: read back elsewhere, the entry is the same
    other = root / "other"
    other.mkdir()
    assert lifeline(other, "init").returncode == 0
    read_back = lifeline(other, "ingest", str(root / "LIFELINE.md"))
    assert read_back.returncode == 0, read_back.stderr
    again = json.loads(lifeline(other, "show", entry_id, "--json").stdout)
    assert (again["summary"], again["body"], again["intact"]) == (SUMMARY, BODY, True)


def test_recall_resume_and_graph_print_control_characters_escaped(
    logged: tuple[Path, str],
) -> None:
    root, entry_id = logged
    done = lifeline(root, "checkpoint", "--thread", "t\x1b[2J", "--next", "do \x1b]0;x\x07 it")
    assert done.returncode == 0, done.stderr
    outputs = {
        "recall": lifeline(root, "recall", "indented"),
        "resume": lifeline(root, "resume"),
        "graph": lifeline(root, "graph", entry_id),
    }
    for name, out in outputs.items():
        assert out.returncode == 0, (name, out.stderr)
        assert CONTROL.findall(out.stdout) == [], (name, out.stdout)
    assert "Red \\x1b[31mALERT" in outputs["recall"].stdout
    assert "Red \\x1b[31mALERT" in outputs["graph"].stdout
    assert "next: do \\x1b]0;x\\x07 it" in outputs["resume"].stdout
