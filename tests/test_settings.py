"""Size caps are configurable per project (.lifeline/config.json) and enforced by the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.errors import ConfigError
from lifeline.home import Home
from lifeline.validate import DEFAULT_LIMITS


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_defaults_without_a_file(tmp_path: Path) -> None:
    assert Home(tmp_path).limits() == DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not readable JSON"),
        ('{"limits": {"body_bytes": -1}}', "positive integer"),
        ('{"limits": {"bodybytes": 10}}', "unknown limit"),
        ('{"limits": 5}', "must be an object"),
    ],
)
def test_bad_settings_are_loud(tmp_path: Path, content: str, words: str) -> None:
    Home(tmp_path).settings_path.parent.mkdir()
    Home(tmp_path).settings_path.write_text(content)
    with pytest.raises(ConfigError, match=words):
        Home(tmp_path).limits()


def test_the_cli_enforces_a_configured_cap(tmp_path: Path) -> None:
    assert _cli(tmp_path, "init").returncode == 0
    Home(tmp_path).settings_path.write_text(json.dumps({"limits": {"body_bytes": 10}}))
    refused = _cli(tmp_path, "log", "--kind", "note", "--summary", "s", "--body", "x" * 11)
    assert refused.returncode == 2 and "over the cap of 10" in refused.stderr
    assert (
        _cli(tmp_path, "log", "--kind", "note", "--summary", "s", "--body", "x" * 10).returncode
        == 0
    )
