"""Counts agree with their nouns in what the commands print: a line of one entry reads
"1 entry", never "1 entries" (lifeline/wording.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.clirun import lifeline

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
