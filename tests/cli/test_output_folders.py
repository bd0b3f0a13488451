"""A folder a command must make, on a path that cannot hold it (a file on the way, a
special file system), is one line on stderr and exit 2, naming the path: not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clirun import lifeline, one_line_error
from tests.support.mesh_procs import cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert lifeline(tmp_path, "init").returncode == 0
    (tmp_path / "afile").write_text("a file, not a folder\n")
    return tmp_path


def test_a_static_site_under_a_file_is_refused(project: Path) -> None:
    target = project / "afile" / "site"
    done = cli("lifeline_mesh", project, "ui", "--static", str(target), check=False)
    one_line_error(done, f"cannot create the folder {target}: Not a directory", "is a file")


def test_a_static_site_where_no_folder_can_be_made_is_refused(project: Path) -> None:
    done = cli("lifeline_mesh", project, "ui", "--static", "/proc/nope", check=False)
    one_line_error(done, "cannot create the folder /proc/nope", "give a new folder")


def test_an_okf_export_under_a_file_is_refused(project: Path) -> None:
    target = project / "afile" / "x"
    done = lifeline(project, "sessions", "export", "--okf", str(target))
    one_line_error(done, f"cannot create the folder {target}: Not a directory")


def test_any_command_meeting_a_file_for_a_folder_says_so(project: Path) -> None:
    """Caught where every command ends (the CLI's `run`), not only where folders are made."""
    config = project / "afile" / "claude"
    done = lifeline(project, "hooks", "install", "claude-code", "--config-dir", str(config))
    one_line_error(done, f"cannot use {config}: Not a directory", "give another path")
    verbose = lifeline(
        project, "-v", "hooks", "install", "claude-code", "--config-dir", str(config)
    )
    assert verbose.returncode == 1 and "NotADirectoryError" in verbose.stderr  # -v: the traceback
