"""`lifeline sessions show` and `list` print a transcript's control characters escaped: a
session may be a member's, and its text must not drive the reader's terminal (decision
0128). `--json` keeps the text as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.sessions_support import FIXTURES, claude_line, run_cli, write_jsonl

# what a terminal acts on: C0 but LF and TAB, DEL, C1 (CSI U+009B included)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SID = "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f"


def _ingest(root: Path, path: Path) -> None:
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", "--all", str(path), "--json", home=root)
    assert done.returncode == 0 and json.loads(done.stdout)["failures"] == [], done.stderr


def test_a_local_command_with_ansi_is_shown_escaped(tmp_path: Path) -> None:
    """The fixture whose `/model` output holds bold on and off (ESC [1m, ESC [22m)."""
    fixture = FIXTURES.parent / "modified-transcripts" / "ide__marot__spotter__short.jsonl"
    assert "\\u001b[1m" in fixture.read_text(encoding="utf-8")
    root = tmp_path / "p"
    _ingest(root, fixture)
    session = json.loads(run_cli(root, "sessions", "list", "--json", home=root).stdout)[0]["id"]
    shown = run_cli(root, "sessions", "show", session, home=root)
    assert shown.returncode == 0, shown.stderr
    assert CONTROL.findall(shown.stdout) == []
    assert "Kept model as \\x1b[1mDefault (recommended)\\x1b[22m" in shown.stdout


def test_a_hostile_transcript_writes_nothing_to_the_terminal(tmp_path: Path) -> None:
    title = "\x1b]0;owned\x07fix the build"
    records = [
        claude_line("user", "u1", f"{title}\nsecond line\twith a tab"),
        claude_line(
            "assistant",
            "a1",
            [
                {"type": "text", "text": "done \x1b]52;c;aGk=\x07\nall \x9b2J clear"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Bash",
                    "input": {"command": "printf '\x1b[2J'"},
                },
            ],
        ),
        claude_line(
            "user",
            "u2",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "\x1bc\rreset"}],
        ),
    ]
    root = tmp_path / "p"
    _ingest(root, write_jsonl(tmp_path / "t" / f"{SID}.jsonl", records))
    listed = run_cli(root, "sessions", "list", home=root)
    shown = run_cli(root, "sessions", "show", SID, home=root)
    assert listed.returncode == 0 and shown.returncode == 0, shown.stderr
    for out in (listed.stdout, shown.stdout):
        assert CONTROL.findall(out) == [], out
    assert "\\x1b]0;owned\\x07fix the build" in listed.stdout
    text = shown.stdout
    assert "title     \\x1b]0;owned\\x07fix the build" in text  # the header: one line each
    assert "you: \\x1b]0;owned\\x07fix the build\nsecond line\twith a tab" in text
    assert "assistant: done \\x1b]52;c;aGk=\\x07\nall \\x9b2J clear" in text
    assert "▸ Bash(printf '\\x1b[2J') → \\x1bc\n" in text  # a result's first line, to CR
    as_json = run_cli(root, "sessions", "show", SID, "--json", home=root)
    replies = [i["text"] for i in json.loads(as_json.stdout)["items"] if i["kind"] == "reply"]
    assert replies == ["done \x1b]52;c;aGk=\x07\nall \x9b2J clear"]  # as written
