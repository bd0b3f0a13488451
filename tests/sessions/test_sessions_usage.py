"""`lifeline sessions usage` on real transcripts of Claude Code, Codex and Gemini: the
tokens it reports per session equal each transcript's own final totals, recomputed here
from the raw file, independently of the adapters; cost from the dated table, unknown
models shown as tokens only; the user's price file; filters; bad input."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.sessions_support import FIXTURES, run_cli

TOOLS = [FIXTURES / tool for tool in ("claude-code", "codex", "gemini")]


def _claude(path: Path) -> dict[str, int]:
    """The last usage line of each message id (streaming chunks repeat it, growing)."""
    last: dict[str, dict[str, Any]] = {}
    for raw in path.read_bytes().splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        message = rec.get("message") if isinstance(rec, dict) else None
        if (
            rec.get("type") == "assistant"
            and isinstance(message, dict)
            and isinstance(message.get("usage"), dict)
        ):
            last[str(message.get("id"))] = message["usage"]

    def total(name: str) -> int:
        return sum(int(u.get(name) or 0) for u in last.values())

    return {
        "input": total("input_tokens"),
        "cached": total("cache_read_input_tokens"),
        "cache_write": total("cache_creation_input_tokens"),
        "output": total("output_tokens"),
        "reasoning": 0,
    }


def _codex(path: Path) -> dict[str, int]:
    """``total_token_usage`` of the last ``token_count`` event (each is written twice):
    cached input is inside input, reasoning inside output."""
    total: dict[str, int] = {}
    for raw in path.read_bytes().splitlines():
        rec = json.loads(raw)
        payload = rec.get("payload") or {}
        if rec.get("type") == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                total = info["total_token_usage"]
    cached = int(total.get("cached_input_tokens") or 0)
    return {
        "input": int(total.get("input_tokens") or 0) - cached,
        "cached": cached,
        "cache_write": 0,
        "output": int(total.get("output_tokens") or 0),
        "reasoning": int(total.get("reasoning_output_tokens") or 0),
    }


def _gemini(path: Path) -> dict[str, int]:
    """The sum of each message's ``tokens`` (the message as last written: an upsert log);
    cached input is inside input, thoughts beside output."""
    messages: dict[str, dict[str, Any]] = {}
    for raw in path.read_bytes().splitlines():
        rec = json.loads(raw)
        if isinstance(rec.get("id"), str) and "type" in rec:
            messages[rec["id"]] = rec
    tokens = [m["tokens"] for m in messages.values() if isinstance(m.get("tokens"), dict)]

    def total(name: str) -> int:
        return sum(int(t.get(name) or 0) for t in tokens)

    return {
        "input": total("input") - total("cached"),
        "cached": total("cached"),
        "cache_write": 0,
        "output": total("output") + total("thoughts"),
        "reasoning": total("thoughts"),
    }


def _json(root: Path, *args: str) -> Any:
    done = run_cli(root, "sessions", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("usage") / "p"
    root.mkdir()
    _json(root, "ingest", *map(str, TOOLS))
    return root


def test_each_session_totals_are_its_transcripts_own(project: Path) -> None:
    by_source = {Path(r["source"]).name: r["id"] for r in _json(project, "list")}
    rows = {r["key"]: r for r in _json(project, "usage", "--by", "session")["rows"]}
    recompute = {"claude-code": _claude, "codex": _codex, "gemini": _gemini}
    checked: dict[str, int] = {}
    for tool in TOOLS:
        for path in sorted(tool.glob("*.jsonl")):
            if path.name not in by_source:
                continue  # the empty file
            expected = recompute[tool.name](path)
            expected["total"] = sum(v for k, v in expected.items() if k != "reasoning")
            row = rows.get(by_source[path.name])
            got = row["tokens"] if row else dict.fromkeys(expected, 0)
            assert got == expected, path.name
            checked[tool.name] = checked.get(tool.name, 0) + bool(expected["total"])
    assert checked["claude-code"] >= 12 and checked["codex"] == 2 and checked["gemini"] == 1


def test_every_grouping_adds_up_to_the_same_total(project: Path) -> None:
    totals = {
        by: _json(project, "usage", "--by", by)
        for by in ("session", "day", "model", "project", "tool")
    }
    grand = totals["session"]["total"]
    assert grand["tokens"]["total"] > 30_000_000 and grand["sessions"] >= 15
    for by, report in totals.items():
        assert report["total"] == grand, by
        summed = sum(r["tokens"]["total"] for r in report["rows"])
        assert summed == grand["tokens"]["total"], by
    tools = {r["key"]: r for r in totals["tool"]["rows"]}
    assert set(tools) == {"claude", "codex", "gemini"}
    assert tools["codex"]["tokens"]["reasoning"] > 0 and tools["gemini"]["tokens"]["reasoning"] > 0
    days = [r["key"] for r in totals["day"]["rows"]]
    assert days == sorted(days) and all(len(d) == 10 for d in days)


def test_cost_from_the_dated_table_and_unknown_models_as_tokens_only(project: Path) -> None:
    report = _json(project, "usage", "--by", "model")
    assert report["prices_as_of"].startswith("2025-") and report["currency"] == "USD"
    models = {r["key"]: r for r in report["rows"]}
    sonnet = models["claude-sonnet-4-20250514"]  # $3 in, $0.30 cached, $3.75 write, $15 out
    t = sonnet["tokens"]
    expected = (
        t["input"] * 3 + t["cached"] * 0.3 + t["cache_write"] * 3.75 + t["output"] * 15
    ) / 1e6
    assert sonnet["cost"] == pytest.approx(expected) and sonnet["unpriced"] == {}
    codex = models["gpt-5.1-codex"]["tokens"]  # reasoning is inside output: not billed twice
    assert models["gpt-5.1-codex"]["cost"] == pytest.approx(
        (codex["input"] * 1.25 + codex["cached"] * 0.125 + codex["output"] * 10) / 1e6
    )
    unknown = models["gemini-3-flash-preview"]
    assert unknown["cost"] == 0 and unknown["unpriced"] == {
        "gemini-3-flash-preview": unknown["tokens"]["total"]
    }
    assert "gemini-3-flash-preview" in report["total"]["unpriced"]

    text = run_cli(project, "sessions", "usage", "--by", "tool").stdout
    assert "prices as of 2025-" in text
    assert "no price known for" in text and "gemini-3-flash-preview" in text


def test_a_price_file_of_the_users_prices_unknown_models(project: Path, tmp_path: Path) -> None:
    own = tmp_path / "prices.json"
    own.write_text(
        json.dumps(
            {"as_of": "2026-12-01", "models": {"gemini-3-flash-preview": {"input": 1, "output": 2}}}
        )
    )
    report = _json(project, "usage", "--by", "model", "--prices", str(own))
    row = next(r for r in report["rows"] if r["key"] == "gemini-3-flash-preview")
    t = row["tokens"]
    # cached input at the input rate when the file gives none
    assert row["cost"] == pytest.approx(((t["input"] + t["cached"]) * 1 + t["output"] * 2) / 1e6)
    assert row["unpriced"] == {} and report["prices_as_of"].startswith("2026-12-01 (prices.json)")

    placed = project / ".lifeline" / "prices.json"  # the home's own file applies by itself
    placed.write_text(own.read_text())
    try:
        again = _json(project, "usage", "--by", "model")
        assert next(r for r in again["rows"] if r["key"] == "gemini-3-flash-preview")["cost"] > 0
        placed.write_text('{"as_of": "2026-12-01", "models": {"x": {"input": -1, "output": 1}}}')
        bad = run_cli(project, "sessions", "usage")
        assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
        assert "must be a number >= 0" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        placed.unlink()


def test_filters_and_bad_input(project: Path) -> None:
    every = _json(project, "usage", "--by", "day")
    days = [r["key"] for r in every["rows"]]
    later = _json(project, "usage", "--by", "day", "--since", days[-1])
    assert [r["key"] for r in later["rows"]] == [days[-1]]
    # a time inside a day: that day's items from then on, not the whole day
    day = "2025-11-17"  # the Codex rollout's: token counts from 15:30 to 21:38 UTC
    whole = _json(project, "usage", "--since", day)["total"]["tokens"]["total"]
    late = _json(project, "usage", "--since", f"{day}T18:00:00Z")["total"]["tokens"]["total"]
    after = sum(r["tokens"]["total"] for r in every["rows"] if r["key"] > day)
    assert whole > late > after
    codex = _json(project, "usage", "--by", "tool", "--tool", "codex")
    assert [r["key"] for r in codex["rows"]] == ["codex"]
    scopes = {r["key"]: r for r in _json(project, "usage", "--by", "project")["rows"]}
    repo = "git:github.com/acidicsoil/chatbot-ui:"
    scoped = _json(project, "usage", "--by", "project", "--scope", repo)
    assert [r["key"] for r in scoped["rows"]] == [repo] and scoped["total"]["tokens"] == (
        scopes[repo]["tokens"]
    )
    inside = _json(project, "usage", "--by", "project", "--scope", "path:~/projects")
    assert {r["key"] for r in inside["rows"]} == {
        k for k in scopes if k.startswith("path:~/projects/")
    }
    bad = run_cli(project, "sessions", "usage", "--since", "last tuesday")
    assert bad.returncode != 0 and "is not a date" in bad.stderr and "Traceback" not in bad.stderr
    missing = run_cli(project, "sessions", "usage", "--prices", str(project / "nope.json"))
    assert missing.returncode != 0 and "no price file" in missing.stderr


def test_a_window_with_no_usage_says_how_many_sessions_are_before_it(project: Path) -> None:
    days = [r["key"] for r in _json(project, "usage", "--by", "day")["rows"]]
    sessions = _json(project, "usage")["total"]["sessions"]
    after = (dt.date.fromisoformat(days[-1]) + dt.timedelta(days=1)).isoformat()
    done = run_cli(project, "sessions", "usage", "--by", "day", "--since", after)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"no recorded token usage since {after} 00:00:00 UTC; {sessions} sessions have usage "
        "from before then: widen --since, or leave it out"
    ]
    assert _json(project, "usage", "--since", after)["rows"] == []  # --json: as before
