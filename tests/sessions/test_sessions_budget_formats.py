"""One budget, comparable content in markdown and JSON: `--format json` is fitted like the
markdown (its own characters measured), not cut to a fraction of what markdown keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.clirun import lifeline

SESSION = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "transcripts"
    / "claude-code"
    / "daaain__claude-code-log__deep-manifest__a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
)


def _kept_md(text: str) -> tuple[int, bool]:
    """Facts kept (bullet lines under a group, omission markers and sources aside) and
    whether a text was clipped."""
    lines = text.splitlines()
    facts = [
        line
        for i, line in enumerate(lines)
        if line.startswith("- ")
        and not line.startswith(("- [omitted", "- P"))
        and any(prev.startswith("### ") for prev in lines[max(0, i - 200) : i])
        and _in_group(lines, i)
    ]
    return len(facts), any(f.endswith("…") or "… [P" in f for f in facts)


def _in_group(lines: list[str], index: int) -> bool:
    for line in reversed(lines[:index]):
        if line.startswith("### "):
            return True
        if line.startswith("## "):
            return False
    return False


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("formats")
    done = lifeline(base, "sessions", "ingest", "--tool", "claude", str(SESSION))
    assert done.returncode == 0, done.stderr
    return base


@pytest.mark.parametrize("budget", [8000, 6000])
def test_the_same_budget_keeps_comparable_content_in_both_formats(root: Path, budget: int) -> None:
    tmp_path, ref = root, SESSION.stem
    md = lifeline(tmp_path, "sessions", "resume", ref, "--budget", str(budget))
    js = lifeline(tmp_path, "sessions", "resume", ref, "--budget", str(budget), "--format", "json")
    assert md.returncode == js.returncode == 0, md.stderr + js.stderr
    assert len(md.stdout) <= budget and len(js.stdout) <= budget
    md_facts, md_clipped = _kept_md(md.stdout)
    data = json.loads(js.stdout)
    js_facts = sum(len(facts) for s in data["slices"] for facts in s["groups"].values())
    assert md_facts == 36 and not md_clipped  # the whole session fits in markdown
    assert js_facts >= 0.85 * md_facts, (js_facts, md_facts)
    if budget == 8000:  # with room to spare JSON keeps every fact whole, as markdown does
        texts = [f["text"] for s in data["slices"] for g in s["groups"].values() for f in g]
        assert js_facts == md_facts and not any(t.endswith("…") for t in texts)
    assert data["slices"][0]["fields"]["scope_sized"] is True
