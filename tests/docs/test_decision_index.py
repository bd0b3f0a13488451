"""docs/decisions/README.md lists every decision record, each number once
(`python scripts/gen_decision_index.py` writes it)."""

from __future__ import annotations

import re

from tests.support.paths import REPO

DECISIONS = REPO / "docs" / "decisions"


def test_the_index_lists_every_record_once() -> None:
    files = sorted(p.name for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))
    numbers = [name[:4] for name in files]
    assert len(numbers) == len(set(numbers)), "two records share a number"
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\((\d{4}-[^)]+\.md)\)", index)
    assert linked == files, "run `python scripts/gen_decision_index.py`"
