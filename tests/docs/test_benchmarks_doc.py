"""docs/benchmarks.md stays one page of current figures, and what it names exists.

Each row is a target with its figure, the day, the command and the status; history lives
in the decision records and bench/history/. Every script in bench/ is named on the page,
so a one-off experiment either earns its row or leaves; and no doc names a scratch path
under /tmp, which means nothing on the reader's machine.
"""

from __future__ import annotations

import re

from tests.support.paths import REPO

PAGE = REPO / "docs" / "benchmarks.md"
CELL_MAX = 400
PAGE_MAX_LINES = 150


def _rows() -> list[list[str]]:
    rows = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            rows.append(cells)
    return rows


def test_the_page_is_short_and_its_cells_are_figures_not_history() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= PAGE_MAX_LINES, "move history out: decisions, bench/history/"
    for row in _rows():
        for cell in row:
            assert len(cell) <= CELL_MAX, f"a cell of {len(cell)} characters: {cell[:80]}…"


def test_every_target_row_has_a_figure_a_day_a_command_and_a_status() -> None:
    targets = [r for r in _rows() if len(r) == 5 and r[0] != "target"]
    assert len(targets) >= 20
    for target, figure, day, command, status in targets:
        assert figure and status, target
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", day), f"{target}: day {day!r}"
        assert "`" in command, f"{target}: no command"


def test_the_page_names_every_bench_script_and_only_existing_ones() -> None:
    text = PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"\b([a-z_]+)\.py\b", text))
    scripts = {p.stem for p in (REPO / "bench").glob("*.py") if p.stem != "__init__"}
    assert scripts - named == set(), "a bench script the page does not name: name it or remove it"
    assert named - scripts == set(), "the page names a script bench/ does not have"


def test_no_doc_names_a_scratch_path() -> None:
    history = (REPO / "bench" / "history").glob("*.md")
    docs = [*(REPO / "docs").rglob("*.md"), REPO / "README.md", *history]
    offenders = [str(p.relative_to(REPO)) for p in docs if "/tmp/" in p.read_text(encoding="utf-8")]
    assert offenders == [], "write DIR or $TMPDIR, not a path under /tmp"
