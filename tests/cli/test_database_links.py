"""A symbolic link planted in ``.lifeline/`` does not carry the ledger out of it
(docs/security.md, "Another user of this machine"; decision 0132).

Git keeps symbolic links, so a repository the user clones can carry ``.lifeline/ledger.db``
as a link to any path. The real CLI ran in such a project made the line there: outside the
0700 folder, mode 0644 — or, when another user had made that file first (a world-writable
database in /tmp), wrote the user's entries into a file that user reads. Now every database
of ours is opened only as a file of its own, and a link is refused in one line.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.clirun import lifeline, one_line_error
from tests.support.mesh_procs import cli
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


NOBODY = 65534


def _theirs(folder: Path) -> Path:
    """A folder another user (nobody) made, open to all, holding a database they planted
    open to all: what a link a clone carries can lead to."""
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    planted = folder / "ledger.db"
    sqlite3.connect(planted).close()
    planted.chmod(0o666)
    for path in (folder, planted):
        os.chown(path, NOBODY, NOBODY)
    return planted


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")
def test_a_linked_lifeline_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    """`.lifeline` itself a link to another user's folder: the lines, the node's keys and
    the ignore file would all be written there, into the database they planted (the real
    CLI did: the entry landed in their 0666 file), and a key they swap in would be taken."""
    planted = _theirs(tmp_path / "shared")
    root = tmp_path / "clone"
    root.mkdir()
    (root / ".lifeline").symlink_to(planted.parent)
    for args in (("init",), ("log", "--kind", "note", "--summary", SECRET)):
        one_line_error(lifeline(root, *args), "belongs to another user", "nobody", "rm ")
    done = cli("lifeline_mesh", root, "init", check=False)
    one_line_error(done, "belongs to another user")
    assert sorted(p.name for p in planted.parent.iterdir()) == ["ledger.db"]
    assert planted.stat().st_size == 0  # nothing written into it


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")
def test_a_line_file_or_key_of_another_user_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    assert lifeline(root, "init").returncode == 0
    cli("lifeline_mesh", root, "init")
    line = root / ".lifeline" / "ledger.db"
    os.chown(line, NOBODY, NOBODY)  # e.g. swapped in by whoever could write the folder
    one_line_error(lifeline(root, "log", "--kind", "note", "--summary", SECRET), "ledger.db")
    os.chown(line, 0, 0)
    key = root / ".lifeline" / "mesh" / "node.key"
    os.chown(key, NOBODY, NOBODY)
    one_line_error(cli("lifeline_mesh", root, "id", check=False), "node.key belongs to another")
