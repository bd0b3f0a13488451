"""Text someone else wrote never drives the terminal through the listings either (decision
0128): `capture` and `proposals` (commit subjects, an agent's drafts), `promote`, `exam` and
the one error line, the `peers` table and serve's text log print control characters escaped;
`--json` keeps the text as written."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.cli.logformat import TextFormatter
from lifeline_mesh.cli.cmd_peers import render_peers
from tests.support.clirun import lifeline, one_line_error
from tests.support.mesh_procs import cli

# what a terminal acts on: C0 but LF and TAB, DEL, C1 (CSI U+009B included)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SUBJECT = "fix: Red \x1b[31mALERT\x1b[0m \x1b]0;pwned\x07"
SHOWN = "fix: Red \\x1b[31mALERT\\x1b[0m \\x1b]0;pwned\\x07"

pytestmark = pytest.mark.timeout(120)


def _mesh(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, *args, check=False)


def _git(repo: Path, *args: str) -> None:
    env = os.environ | {
        "GIT_AUTHOR_NAME": "Ana \x1b[2JLima",
        "GIT_AUTHOR_EMAIL": "ana@example.org",
        "GIT_COMMITTER_NAME": "Ana Lima",
        "GIT_COMMITTER_EMAIL": "ana@example.org",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def _clean(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    assert CONTROL.findall(out.stdout) == [], out.stdout
    assert CONTROL.findall(out.stderr) == [], out.stderr
    return out.stdout


def test_capture_and_proposals_print_commit_text_escaped(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    body = "The gateway sheds load \x1b[2Jduring deploys."
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", f"{SUBJECT}\n\n{body}")
    assert lifeline(tmp_path, "init").returncode == 0

    captured = _clean(_mesh(tmp_path, "capture"))
    assert f"proposed          {SHOWN}\n" in captured
    listed = _clean(_mesh(tmp_path, "proposals"))
    assert f"git-capture  fix: {SHOWN}\n" in listed

    pending = json.loads(_mesh(tmp_path, "proposals", "--json").stdout)["proposals"]
    assert [p["draft"]["summary"] for p in pending] == [SUBJECT]  # as written
    rejected = _mesh(tmp_path, "reject", pending[0]["id"], "--reason", "noise", "--by", "x\x07y")
    assert rejected.returncode == 0, rejected.stderr
    trail = _clean(_mesh(tmp_path, "proposals", "--all"))
    assert "rejected by x\\x07y at " in trail and SHOWN in trail


def test_promote_and_exam_print_entry_text_escaped(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    logged = lifeline(tmp_path, "log", "--kind", "bootstrap", "--summary", SUBJECT)
    assert logged.returncode == 0, logged.stderr
    entry_id = logged.stdout.strip()

    promoted = _clean(lifeline(tmp_path, "promote", entry_id, "--to", "team"))
    assert f"  promoted  {SHOWN}\n" in promoted
    exam = lifeline(tmp_path, "exam")
    assert exam.returncode == 0, exam.stderr
    assert CONTROL.findall(exam.stdout) == [], exam.stdout
    assert f"project: {SHOWN}" in exam.stdout


def test_the_error_line_prints_quoted_text_escaped(tmp_path: Path) -> None:
    """The one error line names what it was given (here a folder) as escaped as the rest."""
    assert lifeline(tmp_path, "init").returncode == 0
    done = _mesh(tmp_path, "capture", "--repo", str(tmp_path / "no\x1b]0;pwned\x07where"))
    one_line_error(done, "capture needs a git work tree", "no\\x1b]0;pwned\\x07where")
    assert CONTROL.findall(done.stderr) == [], done.stderr


def test_peers_table_and_log_lines_show_a_peers_words_escaped() -> None:
    """A peer's refusal kept as a last error, and a node's log line quoting a peer: the
    `peers` table and serve's text log show them escaped; the report (`peers --json`) as
    written."""
    said = "peer 127.0.0.1:7420 refused us: line \x1b[2J\x9b1m gone\r"
    row = {"address": "127.0.0.1:7420", "node_id": "ab\x07cd", "last_error": said}
    report = {"node_running": False, "updated_at": 1.0, "peers": [row], "inbound": []}
    shown = render_peers(report, now=2.0)
    assert CONTROL.findall(shown) == [], shown
    assert "refused us: line \\x1b[2J\\x9b1m gone\\r" in shown and "ab\\x07cd" in shown
    assert report["peers"][0]["last_error"] == said
    record = logging.LogRecord("lifeline_mesh.node", logging.WARNING, "", 0, "%s", (said,), None)
    line = TextFormatter().format(record)
    assert CONTROL.findall(line) == [] and line.startswith("WARNING lifeline_mesh.node: peer ")
    assert line.endswith("refused us: line \\x1b[2J\\x9b1m gone\\r")


def test_a_peers_newline_starts_no_log_record_of_its_own() -> None:
    """A peer's words quoted in serve's text log keep their lines, indented: none can read
    as a record of its own (`ERROR …` at the start of a line); a traceback keeps its lines."""
    said = "refused us: bad\nERROR lifeline_mesh.node: forged record"
    record = logging.LogRecord("lifeline_mesh.node", logging.WARNING, "", 0, "%s", (said,), None)
    lines = TextFormatter().format(record).split("\n")
    assert lines == [
        "WARNING lifeline_mesh.node: refused us: bad",
        "  ERROR lifeline_mesh.node: forged record",
    ]
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord(
            "lifeline_mesh.node", logging.ERROR, "", 0, "stopped", (), sys.exc_info()
        )
    shown = TextFormatter().format(failed).split("\n")
    assert shown[0] == "ERROR lifeline_mesh.node: stopped"
    assert shown[1] == "Traceback (most recent call last):" and shown[-1] == "ValueError: boom"
