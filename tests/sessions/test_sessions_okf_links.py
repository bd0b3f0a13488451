"""`lifeline sessions export --okf DIR` never writes through a link put in DIR while it is
written (docs/security.md, "Another user of this machine").

DIR must be new or empty when the export starts; whoever else can write there (a folder
given in /tmp, made by another user) could still put a link in it afterwards, and the
export followed it: ``index.md`` linked to the user's ``.bashrc`` had the index written
over it. The export now writes through ``lifeline.fsutil.NewTree``, as ``ui --static``
does. The sessions are ingested by the real CLI; the export runs in process so that the
links can be put in after the folder was checked, as a racing user would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.errors import ConfigError
from lifeline.fsutil import NewTree
from lifeline.sessions.bundles.okf import export_okf
from lifeline.sessions.catalogue import Catalogue
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.budget import Budget
from tests.support.clirun import lifeline
from tests.support.paths import REPO

TRANSCRIPT = (
    REPO
    / "tests/fixtures/transcripts/claude-code"
    / "daaain__claude-code-log__claude-code-log-sample__4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    assert lifeline(root, "init").returncode == 0
    done = lifeline(root, "sessions", "ingest", "--tool", "claude", str(TRANSCRIPT))
    assert done.returncode == 0, done.stderr
    return root


async def _export(root: Path, tree: NewTree) -> None:
    store = await SqliteStore.open(root / ".lifeline" / "sessions.db", create=False)
    try:
        await export_okf(await Catalogue(store).load(), tree, Budget(6000, "tokens"))
    finally:
        await store.close()


@pytest.mark.parametrize("planted", ["index.md", "sessions", "bundles"])
async def test_a_link_put_in_the_folder_while_it_is_written_stops_the_export(
    project: Path, tmp_path: Path, planted: str
) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=...\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "okf"
    with NewTree(out) as tree:  # the folder checked new, as the command does first
        target = victim if planted == "index.md" else outside
        (out / planted).symlink_to(target, target_is_directory=target.is_dir())
        with pytest.raises(ConfigError, match="something was put in"):
            await _export(project, tree)
    assert victim.read_text() == "export PATH=...\n"  # was: the export's index.md
    assert list(outside.iterdir()) == []


def test_the_command_still_exports_into_a_new_folder(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "okf"
    done = lifeline(project, "sessions", "export", "--okf", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "index.md").is_file() and list((out / "sessions").glob("*.md"))
    again = lifeline(project, "sessions", "export", "--okf", str(out))
    assert again.returncode == 2 and "not an empty folder" in again.stderr, again.stderr
