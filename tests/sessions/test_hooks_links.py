"""`lifeline hooks install` into a config file kept as a symbolic link (a dotfiles
repository's): the link stays, the file it leads to is changed (real CLI subprocesses on
fixture copies, the tool's folder given by CLAUDE_CONFIG_DIR, never the real home)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import FIXTURES


def _hooks(folder: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    env |= {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(folder)}
    return subprocess.run(
        [sys.executable, "-m", "lifeline", "hooks", *args, "claude-code"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def _commands(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    return [h["command"] for g in data.get("hooks", {}).get("SessionStart", []) for h in g["hooks"]]


def test_a_linked_settings_file_stays_a_link(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    shutil.copyfile(FIXTURES / "hooks" / "claude-settings.json", real)
    real.chmod(0o600)
    original = real.read_text()
    folder = tmp_path / "claude"
    folder.mkdir()
    settings = folder / "settings.json"
    settings.symlink_to(Path("..") / "dotfiles" / "claude-settings.json")  # relative, as stow
    done = _hooks(folder, tmp_path / "home", "install")
    assert done.returncode == 0, done.stderr
    assert settings.is_symlink()  # before: replaced by a regular file, the link broken
    assert os.readlink(settings) == "../dotfiles/claude-settings.json"
    assert any("hooks run session-start" in c for c in _commands(real))
    assert real.stat().st_mode & 0o777 == 0o600  # the file keeps its mode
    assert sorted(p.name for p in dotfiles.iterdir()) == ["claude-settings.json"]  # no temp
    assert _hooks(folder, tmp_path / "home", "uninstall").returncode == 0
    assert settings.is_symlink() and json.loads(real.read_text()) == json.loads(original)


def test_a_link_that_leads_nowhere_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "claude"
    folder.mkdir()
    settings = folder / "settings.json"
    settings.symlink_to(tmp_path / "gone" / "settings.json")
    done = _hooks(folder, tmp_path / "home", "install")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "symbolic link" in done.stderr
    assert settings.is_symlink() and not (tmp_path / "gone").exists()
