"""Counts agree with their nouns in what the commands print: a line of one entry reads
"1 entry", never "1 entries" (lifeline/wording.py)."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from lifeline.home import Home
from tests.support.clirun import lifeline
from tests.support.mesh_procs import serve_insecure

WRONG = re.compile(r"\b1 (entries|sessions|turns|items|attestations|bundles|files)\b")


def _mesh(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_line_of_one_entry_reads_1_entry(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    assert lifeline(root, "init").returncode == 0
    assert lifeline(root, "log", "--kind", "decision", "--summary", "use sqlite").returncode == 0
    said: dict[str, str] = {}
    for name, done in {
        "lines": lifeline(root, "lines"),
        "context": lifeline(root, "context"),
        "render": lifeline(root, "render", "-v"),
        "status": _mesh(root, "status"),
        "verify": _mesh(root, "verify"),
    }.items():
        assert done.returncode == 0, (name, done.stderr)
        said[name] = done.stdout + done.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    ingested = lifeline(copy, "ingest", str(root / "LIFELINE.md"))
    assert ingested.returncode == 0, ingested.stderr
    said["ingest"] = ingested.stdout
    for name, text in said.items():
        assert not WRONG.search(text), (name, text)
    assert re.search(r"ledger\s+1 entry$", said["lines"], re.M), said["lines"]
    assert "1 entry · head" in said["context"]
    assert "1 entry written" in said["render"]
    assert re.search(r"ledger\s+1 entry\s+private", said["status"]), said["status"]
    assert "1 entry (" in said["verify"]
    assert said["ingest"].startswith("ingested 1 entry (1 new)")


def test_many_still_read_as_plural(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    for n in range(2):
        assert lifeline(tmp_path, "log", "--kind", "note", "--summary", f"n{n}").returncode == 0
    assert re.search(r"ledger\s+2 entries$", lifeline(tmp_path, "lines").stdout, re.M)


def test_exam_and_serve_and_sync_counts_of_one_read_singular(tmp_path: Path) -> None:
    """`exam`'s checks, a sync's round trips and serve's closing line: `1 decision in
    force`, `1 thread says`, `1 round trip`, `stopped after 1 session in`, no `(s)`."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        assert lifeline(root, "init").returncode == 0
        assert _mesh(root, "share", "ledger").returncode == 0
    ok = lifeline(a, "log", "--kind", "decision", "--summary", "Db: sqlite", "--body", "because")
    assert ok.returncode == 0, ok.stderr
    assert lifeline(a, "checkpoint", "--thread", "main", "--next", "ship").returncode == 0
    exam = lifeline(a, "exam").stdout
    assert "1 of 1 decision in force says why" in exam and "  1 decision in force" in exam, exam
    assert "1 thread says what is next; 0 of 0 open questions have" in exam, exam
    with serve_insecure(b) as (proc, address):
        first = _mesh(a, "sync", "--insecure", address)
        assert first.returncode == 0, first.stderr
        again = _mesh(a, "sync", "--insecure", address)  # nothing new: one round trip
        assert again.returncode == 0 and "; 1 round trip; " in again.stdout, again.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None
        closing = proc.stdout.read()
    assert "stopped after 2 sessions in (0 failed) and 0 syncs out (0 failed)" in closing
    assert "(s)" not in exam + again.stdout + closing


def test_serve_closing_line_of_one_session(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        assert lifeline(root, "init").returncode == 0
        assert _mesh(root, "share", "ledger").returncode == 0
    with serve_insecure(b) as (proc, address):
        assert _mesh(a, "sync", "--insecure", address).returncode == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None
        closing = proc.stdout.read()
    assert "stopped after 1 session in (0 failed) and 0 syncs out" in closing, closing
    assert "of 0 changes over watches" in closing and "of 0 trees of relays" in closing


def test_counts_that_read_n_thing_s_agree_with_their_noun(tmp_path: Path) -> None:
    """What read `1 problem(s)`, `1 undecodable row(s)`, `unknown limit(s)`: one reads
    singular, more plural, and no `(s)` is left."""
    assert lifeline(tmp_path, "init").returncode == 0
    for n in range(2):
        assert lifeline(tmp_path, "log", "--kind", "note", "--summary", f"n{n}").returncode == 0
    conn = sqlite3.connect(tmp_path / ".lifeline" / "ledger.db")
    with conn:  # one row no reader decodes
        conn.execute("UPDATE entries SET parents = 'not json' WHERE seq = 2")
    conn.close()
    history = lifeline(tmp_path, "history")
    assert "warning: 1 undecodable row skipped in line 'ledger'" in history.stderr
    verified = lifeline(tmp_path, "verify")
    assert verified.returncode == 1
    assert verified.stdout.startswith("line 'ledger': 1 problem in 1 entry\n"), verified.stdout
    settings = Home(tmp_path).settings_path
    settings.write_text(json.dumps({"limits": {"bodybytes": 10}}))
    one = lifeline(tmp_path, "log", "--kind", "note", "--summary", "x")
    assert "unknown limit ['bodybytes']; known:" in one.stderr, one.stderr
    settings.write_text(json.dumps({"limits": {"a": 1, "b": 2}}))
    two = lifeline(tmp_path, "log", "--kind", "note", "--summary", "x")
    assert "unknown limits ['a', 'b']; known:" in two.stderr, two.stderr
    settings.unlink()
    single = tmp_path / "single"
    single.mkdir()
    assert lifeline(single, "init").returncode == 0
    assert lifeline(single, "log", "--kind", "note", "--summary", "only").returncode == 0
    alone = lifeline(single, "verify").stdout
    assert alone == "line 'ledger': 1 entry, all ids and parents verify\n", alone
    said = history.stderr + verified.stdout + one.stderr + two.stderr + alone
    assert "(s)" not in said and not WRONG.search(said), said


def test_recover_of_one_altered_entry_reads_singular(tmp_path: Path) -> None:
    """`recover` on a line of two entries, one altered after it was written: `1 entry no
    longer matches its id`, `kept 1 entry whose id verifies; 1 row lost`."""
    assert lifeline(tmp_path, "init").returncode == 0
    for n in range(2):
        assert lifeline(tmp_path, "log", "--kind", "note", "--summary", f"n{n}").returncode == 0
    conn = sqlite3.connect(tmp_path / ".lifeline" / "ledger.db")
    with conn:  # its id no longer matches its content; the file passes SQLite's check
        conn.execute("UPDATE entries SET summary = 'altered' WHERE seq = 2")
    conn.close()
    done = lifeline(tmp_path, "recover")
    assert done.returncode == 0, done.stderr
    assert "but 1 entry no longer matches its id, does not decode, or holds" in done.stderr
    assert "kept 1 entry whose id verifies; 1 row lost (unreadable" in done.stdout, done.stdout
    assert not WRONG.search(done.stdout + done.stderr)


def test_the_truth_of_one_decision_cut_by_its_budget_reads_singular(tmp_path: Path) -> None:
    """`context`'s omitted markers (the MCP truth tools print the same text): `omitted 1
    decision`, `omitted 1 entry`."""
    assert lifeline(tmp_path, "init").returncode == 0
    assert (
        lifeline(tmp_path, "log", "--kind", "decision", "--summary", "Db: sqlite").returncode == 0
    )
    done = lifeline(tmp_path, "context", "--budget", "200")
    assert done.returncode == 0, done.stderr
    assert "- [omitted 1 decision to fit the budget;" in done.stdout, done.stdout
    assert "- [omitted 1 entry to fit the budget;" in done.stdout, done.stdout
    assert not WRONG.search(done.stdout) and "1 decisions" not in done.stdout


def test_only_overlong_words_are_clipped_and_the_message_around_them_kept() -> None:
    from lifeline.wording import LONG_WORD, clipped_words

    path = "/home/someone/projects/" + "a" * 150 + "/.lifeline/ledger.db"
    assert len(path) < LONG_WORD and clipped_words(f"cannot open {path}: gone") == (
        f"cannot open {path}: gone"
    )
    told = clipped_words("unknown kind '" + "x" * 5000 + "'; use one of: a, b")
    assert told == f"unknown kind '{'x' * (LONG_WORD // 2)}…' (5,000 characters); use one of: a, b"
    assert clipped_words("(" + "y" * 300 + "),") == f"({'y' * (LONG_WORD // 2)}… (300 characters)),"
