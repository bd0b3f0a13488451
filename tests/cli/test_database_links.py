"""A symbolic link planted in ``.lifeline/`` does not carry the ledger out of it
(docs/security.md, "Another user of this machine"; decision 0132).

Git keeps symbolic links, so a repository the user clones can carry ``.lifeline/ledger.db``
as a link to any path. The real CLI ran in such a project made the line there: outside the
0700 folder, mode 0644 — or, when another user had made that file first (a world-writable
database in /tmp), wrote the user's entries into a file that user reads. Now every database
of ours is opened only as a file of its own, and a link is refused in one line.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.clirun import lifeline, one_line_error
from tests.support.paths import REPO

TRANSCRIPT = (
    REPO
    / "tests/fixtures/transcripts/claude-code"
    / "daaain__claude-code-log__claude-code-log-sample__4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"
)
SECRET = "Private: the acquisition of Initech closes on Friday"


def _cloned(tmp_path: Path, name: str, target: Path) -> Path:
    """A project whose ``.lifeline/NAME`` is a link to ``target``, as a clone has it."""
    root = tmp_path / "clone"
    (root / ".lifeline").mkdir(parents=True, exist_ok=True)
    (root / ".lifeline" / name).symlink_to(target)
    return root


def test_a_linked_line_is_not_made_outside_the_project(tmp_path: Path) -> None:
    outside = tmp_path / "shared" / "ledger.db"  # a folder another user reads
    outside.parent.mkdir()
    root = _cloned(tmp_path, "ledger.db", outside)
    one_line_error(lifeline(root, "init"), "ledger.db is a symbolic link", "rm ")
    one_line_error(lifeline(root, "log", "--kind", "note", "--summary", SECRET), "symbolic link")
    assert not outside.exists()  # was: made there, 0644, holding the entry


def test_a_linked_line_does_not_write_into_another_user_s_file(tmp_path: Path) -> None:
    """Another user made the database the link leads to, and reads it."""
    theirs = tmp_path / "shared" / "ledger.db"
    theirs.parent.mkdir()
    sqlite3.connect(theirs).close()
    theirs.chmod(0o666)
    root = _cloned(tmp_path, "ledger.db", theirs)
    for args in (("init",), ("log", "--kind", "note", "--summary", SECRET)):
        one_line_error(lifeline(root, *args), "symbolic link")
    assert SECRET.encode() not in theirs.read_bytes()
    assert theirs.stat().st_size == 0  # nothing written into it


def test_a_linked_sessions_file_is_refused(tmp_path: Path) -> None:
    """The file that records which transcripts were read, linked out the same way."""
    outside = tmp_path / "shared" / "sources.sqlite"
    outside.parent.mkdir()
    root = _cloned(tmp_path, "sessions-sources.sqlite", outside)
    assert lifeline(root, "init").returncode == 0  # the line itself is a file of its own
    done = lifeline(root, "sessions", "ingest", "--tool", "claude", str(TRANSCRIPT))
    assert done.returncode != 0, done.stdout
    assert "sessions-sources.sqlite is a symbolic link" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not outside.exists()
