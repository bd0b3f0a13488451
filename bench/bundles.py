"""Continuation bundles: build time, token-estimate error, size against the budget.

    python bench/bundles.py [--whole-only] [--runs 5] [--python A --python B] [--baseline DIR]

1. Token estimate vs the counts the transcripts record: the estimate (UTF-8 bytes / 4) of
   the text the model produced (replies, clear-text thinking, tool-call inputs as JSON)
   against the recorded output tokens — per API response for Claude Code, read from the
   raw fixture lines (the final count of each response); per session for Codex and
   Gemini, from the ingested usage items (output minus reasoning, which those transcripts
   do not hold in clear).
2. Build time: a synthetic 5,000-turn Claude Code session (prompt, tool call, result,
   reply, a todo list every 50 turns) and 20 sessions of one scope and topic, ingested
   once into a real line; then ``build_bundle`` warm in process (median of 7), and
   ``lifeline sessions resume`` as a whole process (median of 3).
3. Bundle size against the budget for the 5,000-turn session.

Prints figures; no pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lifeline.home import Home  # noqa: E402
from lifeline.sessions.bundles.resume import BundleRequest, build_bundle  # noqa: E402
from lifeline.sessions.catalogue import Catalogue  # noqa: E402
from lifeline.sessions.config import SessionSettings  # noqa: E402
from lifeline.sessions.ingest.service import ingest_sources, open_ingester, sources_in  # noqa: E402
from lifeline.sessions.model import Reply, Session, Thinking, Tool, ToolCall, Usage  # noqa: E402
from lifeline.store.sqlite import SqliteStore  # noqa: E402
from lifeline.truth.budget import Budget, estimate_tokens  # noqa: E402
from tests.support.sessions_support import FIXTURES, claude_line, lay_out_home, write_jsonl  # noqa: E402


def produced_text(session: Session) -> tuple[int, int]:
    """(estimated, recorded) output tokens of one session."""
    estimated = recorded = 0
    for item in session.items:
        if isinstance(item, Reply) or (isinstance(item, Thinking) and session.tool is Tool.CLAUDE):
            estimated += estimate_tokens(item.text)  # others record only summaries of thought
        elif isinstance(item, ToolCall):
            estimated += estimate_tokens(json.dumps(item.input, ensure_ascii=False))
        elif isinstance(item, Usage):
            recorded += max(item.output - item.reasoning, 0)
    return estimated, recorded


def turn(i: int, cwd: str) -> list[dict[str, object]]:
    prompt = f"Step {i}: refactor module_{i % 97}.py so that parse() never raises on empty input."
    call = {
        "type": "tool_use",
        "id": f"t{i}",
        "name": "Edit",
        "input": {"file_path": f"{cwd}/module_{i % 97}.py", "old_string": "a", "new_string": "b"},
    }
    lines = [
        claude_line("user", f"u{i}", prompt, cwd=cwd),
        claude_line("assistant", f"a{i}", [call], cwd=cwd),
        claude_line(
            "user",
            f"r{i}",
            [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}],
            cwd=cwd,
        ),
        claude_line(
            "assistant",
            f"b{i}",
            [{"type": "text", "text": f"Done with step {i}; tests pass."}],
            cwd=cwd,
            stop_reason="end_turn",
        ),
    ]
    if i % 50 == 0:
        todos = [
            {
                "content": f"step {j}",
                "status": "completed" if j <= i else "pending",
                "activeForm": "x",
            }
            for j in range(i - 5, i + 5)
        ]
        lines.append(
            claude_line(
                "assistant",
                f"d{i}",
                [
                    {
                        "type": "tool_use",
                        "id": f"w{i}",
                        "name": "TodoWrite",
                        "input": {"todos": todos},
                    }
                ],
                cwd=cwd,
            )
        )
        lines.append(
            claude_line(
                "user",
                f"e{i}",
                [{"type": "tool_result", "tool_use_id": f"w{i}", "content": "ok"}],
                cwd=cwd,
            )
        )
    return lines


def write_corpus(base: Path) -> list[Path]:
    cwd = "/srv/bench/project"
    big = write_jsonl(
        base / "big" / "11111111-2222-3333-4444-555555555555.jsonl",
        [line for i in range(1, 5001) for line in turn(i, cwd)],
    )
    many = []
    for k in range(20):
        native = f"22222222-2222-3333-4444-{k:012d}"
        lines = [
            dict(line, sessionId=native)
            for i in range(1, 11)
            for line in turn(i if i > 1 else 1, "/srv/bench/merged")
        ]
        many.append(write_jsonl(base / "many" / f"{native}.jsonl", lines))
    return [big, *many]


async def ingest(root: Path, paths: list[Path]) -> None:
    async with open_ingester(Home(root), "sessions", SessionSettings()) as ingester:
        await ingest_sources(ingester, sources_in(paths))


def claude_responses() -> list[tuple[int, int]]:
    """(estimated, recorded) per Claude API response, from the raw fixture lines: the
    final output count of each response (on a line with ``stop_reason``; earlier lines
    hold partial, streaming counts) against the text of its blocks. Responses with
    thinking that is not in clear (signature only) are left out: their tokens cannot be
    seen."""
    pairs = []
    for path in sorted((FIXTURES / "claude-code").glob("*.jsonl")):
        blocks: dict[str, dict[str, Any]] = {}
        final: dict[str, int] = {}
        hidden: set[str] = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = rec.get("message")
            if not isinstance(msg, dict) or msg.get("role") != "assistant" or not msg.get("id"):
                continue
            mid = msg["id"]
            for block in msg.get("content") or []:
                if not isinstance(block, dict):
                    continue
                text = block.get("text") or block.get("thinking")
                if block.get("type") == "tool_use":
                    text = json.dumps(block.get("input"), ensure_ascii=False)
                if block.get("type") == "thinking" and not block.get("thinking"):
                    hidden.add(mid)
                if text:
                    blocks.setdefault(mid, {})[json.dumps(block, sort_keys=True)] = text
            usage = msg.get("usage") or {}
            if isinstance(usage.get("output_tokens"), int) and msg.get("stop_reason"):
                final[mid] = usage["output_tokens"]  # only a finished message's count is final
        for mid, texts in blocks.items():
            if mid in final and mid not in hidden and final[mid] > 0:
                pairs.append((sum(estimate_tokens(t) for t in texts.values()), final[mid]))
    return pairs


def _report(label: str, pairs: list[tuple[int, int]]) -> None:
    errors = [(e - r) / r * 100 for e, r in pairs]
    total_e, total_r = sum(e for e, _ in pairs), sum(r for _, r in pairs)
    print(
        f"  {label:<22} n={len(pairs):>3}  recorded {total_r:>7}  estimated {total_e:>7}"
        f"  aggregate {(total_e - total_r) / total_r * 100:+.0f}%"
        f"  median |error| {statistics.median(abs(x) for x in errors):.0f}%"
        f"  p10..p90 {sorted(errors)[len(errors) // 10]:+.0f}%.."
        f"{sorted(errors)[len(errors) * 9 // 10]:+.0f}%"
    )


async def calibrate(root: Path) -> None:
    home = lay_out_home(root / "home")
    await ingest(root, [home])
    store = await SqliteStore.open(root / ".lifeline" / "sessions.db", create=False)
    cat = await Catalogue(store).load()
    by_tool: dict[str, list[tuple[int, int]]] = {}
    for summary in cat.summaries():
        est, rec = produced_text(await cat.session(summary.id))
        if rec > 0 and est > 0:
            by_tool.setdefault(summary.tool.value, []).append((est, rec))
    await store.close()
    print("token estimate (UTF-8 bytes / 4) vs recorded output tokens")
    _report("claude, per response", claude_responses())
    for tool in ("codex", "gemini"):
        _report(f"{tool}, per session", by_tool.get(tool, []))


async def timings(root: Path) -> tuple[str, str]:
    paths = write_corpus(root / "corpus")
    await ingest(root, paths)
    store = await SqliteStore.open(root / ".lifeline" / "sessions.db", create=False)
    cat = await Catalogue(store).load()
    big = next(s for s in cat.summaries() if s.native_id.startswith("11111111"))
    merged = next(s for s in cat.summaries() if s.native_id.startswith("22222222"))
    print(f"5,000-turn session: {big.turns} turns, {big.item_count} items")
    for label, req in (
        ("5,000-turn session", BundleRequest(ref=big.id)),
        ("merge of 20 sessions", BundleRequest(scope=merged.scope)),
    ):
        runs = []
        for _ in range(7):
            start = time.perf_counter()
            bundle, _ = await build_bundle(cat, req)
            runs.append((time.perf_counter() - start) * 1000)
        sessions = bundle.slices[next(iter(bundle.slices))].fields["sessions"]
        print(
            f"  {label}: build_bundle cold {runs[0]:.0f} ms (reads the items), warm median "
            f"{statistics.median(runs[1:]):.0f} ms (min {min(runs[1:]):.0f}, max "
            f"{max(runs[1:]):.0f}); {sessions} sessions in the bundle"
        )
    print("bundle size against the budget (5,000-turn session)")
    for limit, unit in ((500, "tokens"), (2000, "tokens"), (8000, "tokens"), (24000, "chars")):
        bundle, text = await build_bundle(
            cat, BundleRequest(ref=big.id, budget=Budget(limit, unit))
        )
        used = estimate_tokens(text) if unit == "tokens" else len(text)
        dropped = sum(o.count for s in bundle.slices.values() for o in s.omitted.values())
        print(
            f"  budget {limit:>6} {unit:<6} → {used:>6} {unit} ({used / limit:.0%}), "
            f"{len(bundle.facts())} facts kept, {dropped} omitted, text cap {bundle.cap or 'none'}"
        )
    await store.close()
    return big.id, merged.scope


def whole_process(root: Path, big: str, scope: str, pythons: list[str], runs: int = 5) -> None:
    """``lifeline sessions resume`` as a user runs it, each interpreter in turn (the tree
    before and after a change, side by side: their runs alternate, so load hits both
    alike). Bytecode is cached as an installed package has it (a prefix outside the trees,
    warmed by one run), whatever PYTHONDONTWRITEBYTECODE says; the process runs in the
    line's folder, so an interpreter imports its own tree."""
    for label, args in (("5,000-turn session", [big]), ("merge of 20", ["--scope", scope])):
        walls: dict[str, list[float]] = {p: [] for p in pythons}
        cpus: dict[str, list[float]] = {p: [] for p in pythons}
        for attempt in range(runs + 1):
            for python in pythons:
                env = dict(
                    os.environ, PYTHONPYCACHEPREFIX=str(root / "pyc" / str(abs(hash(python))))
                )
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                if "=" in python:  # TREE=PYTHON: that interpreter importing that tree
                    tree, command = python.split("=", 1)
                    env["PYTHONPATH"] = tree
                else:
                    command = python
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(
                    [command, "-m", "lifeline", "--root", str(root), "sessions", "resume", *args],
                    check=True,
                    capture_output=True,
                    env=env,
                    cwd=root,
                )
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if attempt:  # the first run of each writes its bytecode
                    walls[python].append(wall)
                    cpus[python].append(
                        after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                    )
        for python in pythons:
            print(
                f"  `lifeline sessions resume` {label} ({python}): whole process median "
                f"{statistics.median(walls[python]):.2f} s wall (min {min(walls[python]):.2f}), "
                f"{statistics.median(cpus[python]):.2f} s CPU"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        help="interpreter(s) for the whole-process runs (default: this one); give two to "
        "compare trees",
    )
    parser.add_argument("--runs", type=int, default=5, help="whole-process runs each")
    parser.add_argument(
        "--baseline", type=Path, help="another tree, run side by side with this one"
    )
    parser.add_argument("--whole-only", action="store_true", help="skip the token calibration")
    opts = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        if not opts.whole_only:
            asyncio.run(calibrate(base / "cal"))
        big, scope = asyncio.run(timings(base / "time"))
        pythons = opts.python or [sys.executable]
        if opts.baseline is not None:
            pythons = [f"{opts.baseline.resolve()}={sys.executable}", f"{REPO}={sys.executable}"]
        whole_process(base / "time", big, scope, pythons, opts.runs)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
