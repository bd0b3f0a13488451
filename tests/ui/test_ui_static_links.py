"""`lifeline-mesh ui --static DIR` never writes through a link planted in DIR: DIR must be
new or empty, and each file is created new without following a link (real CLI
subprocesses; the tree writer on its own for a link planted while it writes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lifeline.errors import ConfigError
from lifeline.fsutil import NewTree
from tests.support.clirun import lifeline
from tests.support.mesh_procs import cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    assert lifeline(root, "init").returncode == 0
    done = lifeline(root, "log", "--kind", "decision", "--summary", "Database: PostgreSQL")
    assert done.returncode == 0, done.stderr
    return root


def _static(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, "ui", "--static", str(out), check=False)


def _refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_a_link_planted_in_the_folder_is_refused_and_its_target_kept(
    project: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=...\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").symlink_to(victim)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (site / "lines").symlink_to(elsewhere, target_is_directory=True)
    _refused(_static(project, site), "is not an empty folder; give a new one")
    assert victim.read_text() == "export PATH=...\n"  # before: the home page's HTML
    assert list(elsewhere.iterdir()) == []  # before: the line's pages
    assert sorted(p.name for p in site.iterdir()) == ["index.html", "lines"]


def test_a_folder_in_use_is_refused_a_new_or_empty_one_taken(project: Path, tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    _refused(_static(project, used), str(used))
    assert [p.name for p in used.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _static(project, empty).returncode == 0
    assert (empty / "index.html").is_file() and (empty / "assets" / "style.css").is_file()
    _refused(_static(project, empty), "give a new one")  # a second copy: a new folder
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _refused(_static(project, a_file), "is not an empty folder")


def test_a_link_planted_while_the_tree_is_written_stops_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("kept")
    outside = tmp_path / "outside"
    outside.mkdir()
    with NewTree(tmp_path / "site") as tree:
        tree.write("lines/ledger/index.html", b"<p>one</p>")
        (tmp_path / "site" / "index.html").symlink_to(victim)
        with pytest.raises(ConfigError, match="something was put in"):
            tree.write("index.html", b"<p>home</p>")
        (tmp_path / "site" / "sessions").symlink_to(outside, target_is_directory=True)
        with pytest.raises(ConfigError, match="something was put in"):
            tree.write("sessions/list.html", b"<p>list</p>")
        with pytest.raises(ConfigError, match="not a path inside"):
            tree.write("../victim", b"x")
        with pytest.raises(ConfigError, match="something was put in"):
            tree.write("lines/ledger/index.html", b"<p>again</p>")
    assert victim.read_text() == "kept"
    assert list(outside.iterdir()) == []
    assert (tmp_path / "site/lines/ledger/index.html").read_bytes() == b"<p>one</p>"
