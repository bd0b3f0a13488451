"""`lifeline render` does not extend the file a `LIFELINE.md` link leads to (docs/security.md,
"Another user of this machine").

`LIFELINE.md` is committed, and git keeps links: a repository can carry it as a link to a
file of the user's (relative, `../../.bashrc`), with a render record in `.lifeline/` that
matches that file's known content (a distribution's default, say). The next render found
the file "unchanged since the last render" through the link and appended the new entries'
blocks to it. A whole render replaces the link with a file, as it always did; now so does
every render. The real CLI plays both parts here: the record is the project's own, and the
file the link leads to holds exactly what it describes.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.clirun import lifeline


def _ok(root: Path, *args: str) -> None:
    done = lifeline(root, *args)
    assert done.returncode == 0, (args, done.stderr)


def test_a_render_does_not_append_through_a_link(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    _ok(root, "init")
    _ok(root, "log", "--kind", "decision", "--summary", "Database: PostgreSQL")
    _ok(root, "render")
    projection = root / "LIFELINE.md"
    victim = tmp_path / "bashrc"  # the user's file, whose content the record matches
    victim.write_bytes(projection.read_bytes())
    kept = victim.read_bytes()
    projection.unlink()
    projection.symlink_to(Path("..") / "bashrc")
    _ok(root, "log", "--kind", "note", "--summary", "appended where the link leads")
    _ok(root, "render")
    assert victim.read_bytes() == kept  # was: the new entry's block appended to it
    assert not projection.is_symlink()  # rendered whole, as a file of its own
    assert "appended where the link leads" in projection.read_text()
