"""docs/cli.md is the commands' own --help (regenerate with scripts/gen_cli_doc.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO


def test_cli_reference_matches_help() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_cli_doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
