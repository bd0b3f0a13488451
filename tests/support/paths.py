"""Where the repository and the fixtures the tests read are, wherever a test file sits."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
LC_FIXTURE = FIXTURES / "lifeline-context-0.6.1"
