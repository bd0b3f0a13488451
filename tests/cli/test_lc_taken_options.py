"""lifeline-context 0.6.1's options that `lifeline` took late: `log --thread`, `pin --body`,
`unpin --body` (with the unpin it records), `init --hooks`, `--agent`, `--no-mcp`,
`--no-policy`, and `exam --budget` (refused, in one line: our exam scores no budgeted
context).

Compared with the real predecessor: the same command lines on the same ledger record the
same entries (ids leave out the time, and hold kind, author, agent, provider, model,
summary, body and parents, so equal ids are equal bodies and parents), and `init --agent`
writes a policy that decides every (agent, kind) as the predecessor's own policy does.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.entry import KNOWN_KINDS
from lifeline_mesh.mcp.policy import WritePolicy
from tests.support.lc_venv import lc_command, lc_env, run_lc

AUTHOR = ["--author", "t"]


def _run(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _lifeline(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = _run(root, *args, env=env)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def _log(root: Path, *args: str) -> dict[str, object]:
    entry: dict[str, object] = json.loads(_lifeline(root, "log", *args, *AUTHOR, "--json"))
    return entry


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _lifeline(tmp_path, "init")
    return tmp_path


def test_log_on_a_thread_labels_the_body_and_follows_the_thread(root: Path) -> None:
    decision = _log(root, "--kind", "decision", "--summary", "use sqlite", "--body", "small")
    opened = _log(root, "--kind", "open", "--summary", "which cache?", "--body", "slow reads")
    o = str(opened["id"])
    first = _log(root, "--kind", "note", "--summary", "tokens", "--thread", "auth", "--body", "b")
    assert first["body"] == "thread: auth\n\nb"
    assert first["parents"] == [o]  # a new thread: the line's tips (here its one head)
    on_open = _log(root, "--kind", "note", "--summary", "measure", "--thread", o[:10])
    assert on_open["body"] == f"thread: {o}"  # the open entry's full id, no blank body
    assert on_open["parents"] == [o]  # the thread has no entry yet: its open entry
    again = _log(
        root, "--kind", "fix", "--summary", "x", "--thread", "auth", "--body", "thread: auth"
    )
    assert again["body"] == "thread: auth"  # not twice
    assert again["parents"] == [first["id"]]  # the thread's newest entry, not the line's tips
    given = ["--thread", o, "--parents", str(decision["id"])[:10], "--body", "  "]
    chosen = _log(root, "--kind", "note", "--summary", "given", *given)
    assert chosen["parents"] == [decision["id"]] and chosen["body"] == f"thread: {o}"
    latest = _log(root, "--kind", "note", "--summary", "next", "--thread", o)
    assert latest["parents"] == [chosen["id"]]
    for empty in ("", "  "):
        done = _run(root, "log", "--kind", "note", "--summary", "s", "--thread", empty)
        assert done.returncode == 2 and done.stderr.count("\n") == 1
        assert "--thread is empty" in done.stderr


@pytest.mark.slow
def test_log_thread_records_what_lifeline_context_records(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    lc = lc_command(tmp_path_factory.mktemp("lc"))
    theirs = tmp_path_factory.mktemp("theirs")
    assert run_lc(lc, theirs, "init", "--no-mcp", "--no-policy").returncode == 0
    ours: list[str] = []

    def both(*args: str) -> str:
        done = run_lc(lc, theirs, "log", *args, *AUTHOR)
        assert done.returncode == 0, (args, done.stderr)
        ours.append(str(_log(root, *args)["id"]))
        return ours[-1]

    d = both("--kind", "decision", "--summary", "use sqlite", "--body", "small")
    o = both("--kind", "open", "--summary", "which cache?", "--body", "slow reads")
    o2 = both("--kind", "open", "--summary", "drop 3.9?", "--body", "old")
    both("--kind", "correction", "--summary", "keep 3.9", "--body", "users", "--parents", o2)
    # a closed question names no open entry: the line's head (its one tip here)
    both("--kind", "note", "--summary", "late", "--thread", o2[:10])
    a1 = both("--kind", "note", "--summary", "tokens", "--thread", "auth", "--body", "login")
    both("--kind", "note", "--summary", "measure", "--thread", o[:10])  # its open entry
    both("--kind", "fix", "--summary", "login", "--thread", "auth", "--body", "thread: auth\n\nok")
    both("--kind", "note", "--summary", "given", "--thread", o[:12], "--parents", d[:10])
    both("--kind", "note", "--summary", "next", "--thread", o)  # the thread's newest entry
    with sqlite3.connect(theirs / ".lifeline" / "ledger.db") as conn:
        rows = [json.loads(p) for (p,) in conn.execute("SELECT payload FROM entries ORDER BY seq")]
    assert [r["id"] for r in rows] == ours  # same bodies and parents: the ids hold them
    by_id = {r["id"]: r for r in rows}
    assert by_id[ours[5]]["body"] == "thread: auth\n\nlogin"
    assert by_id[ours[7]]["body"] == "thread: auth\n\nok"
    assert by_id[ours[7]]["parents"] == [a1]
    assert by_id[ours[8]]["body"] == f"thread: {o}" and by_id[ours[8]]["parents"] == [d]


@pytest.mark.slow
def test_pin_body_records_what_lifeline_context_records(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    lc = lc_command(tmp_path_factory.mktemp("lc"))
    theirs = tmp_path_factory.mktemp("theirs")
    assert run_lc(lc, theirs, "init", "--no-mcp", "--no-policy").returncode == 0
    decide = ["log", "--kind", "decision", "--summary", "use sqlite", "--body", "small", *AUTHOR]
    assert run_lc(lc, theirs, *decide).returncode == 0
    d = _lifeline(root, *decide).strip()
    pin = ["pin", d[:10], "--body", " the base of everything ", *AUTHOR]
    assert run_lc(lc, theirs, *pin).returncode == 0, run_lc(lc, theirs, *pin).stderr
    mine = json.loads(_lifeline(root, *pin, "--json"))
    assert mine["body"] == f"pin: {d}\n\nthe base of everything"
    pinned = f"## Pinned\n\n- `{d[:12]}` use sqlite"  # still pinned: its body's first line
    assert pinned in _lifeline(root, "context")
    ours = [d, mine["id"]]
    for step in (
        ["unpin", d[:10], "--body", "  no longer  "],  # its own words, trimmed
        ["pin", d[:10], "--body", "A"],
        ["pin", d[:10], "--body", "B"],  # two pin notes in force
        ["unpin", d[:10]],  # both corrected at once; the body says `unpinned`
    ):
        done = run_lc(lc, theirs, *step, *AUTHOR)
        assert done.returncode == 0, (step, done.stderr)
        ours.append(json.loads(_lifeline(root, *step, *AUTHOR, "--json"))["id"])
    with sqlite3.connect(theirs / ".lifeline" / "ledger.db") as conn:
        ids = [i for (i,) in conn.execute("SELECT id FROM entries ORDER BY seq")]
    assert ids == ours  # the same entries: ids hold kind, summary, body and parents
    assert "## Pinned" not in _lifeline(root, "context")


def test_init_hooks_installs_ours_and_no_mcp_no_policy_write_nothing(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
    project = tmp_path / "p"
    project.mkdir()
    said = _lifeline(project, "init", "--hooks", "--no-mcp", "--no-policy", env=env)
    assert "created line 'ledger'" in said and "installed in" in said
    hooks = json.loads((config / "settings.json").read_text())["hooks"]
    start = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert start.endswith("lifeline hooks run session-start --client claude-code")
    assert not (project / ".mcp.json").exists()
    assert not (project / ".lifeline" / "policy.json").exists()
    again = _lifeline(project, "init", "--hooks", env=env)  # as `hooks install`: idempotent
    assert "already installed" in again
    assert not (project / ".lifeline" / "policy.json").exists()  # none without --agent


@pytest.mark.slow
def test_init_agent_writes_the_policy_lifeline_context_wrote(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    lc = lc_command(tmp_path_factory.mktemp("lc"))
    theirs = tmp_path_factory.mktemp("theirs")
    assert run_lc(lc, theirs, "init", "--agent", "claude-code").returncode == 0
    agents, kinds = ["claude-code", "other", ""], sorted(KNOWN_KINDS)
    code = (
        "import json, sys; from lifeline.policy import decide, load_policy; "
        "p = load_policy('.lifeline/policy.json'); a, k = json.loads(sys.argv[1]); "
        "print(json.dumps([[decide(p, x, y) for y in k] for x in a]))"
    )
    told = subprocess.run(
        [str(lc.parent / "python"), "-c", code, json.dumps([agents, kinds])],
        cwd=theirs,
        env=lc_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert told.returncode == 0, told.stderr
    project = tmp_path_factory.mktemp("ours")
    said = _lifeline(project, "init", "--agent", "claude-code")
    assert "records checkpoint, feature, fix, note entries at once" in said
    path = project / ".lifeline" / "policy.json"
    policy = WritePolicy.parse(json.loads(path.read_text()), source=str(path))
    assert [[policy.decide(a, k).mode.value for k in kinds] for a in agents] == json.loads(
        told.stdout
    )
    # ... and the file it wrote itself decides the same here (it was refused: its agent
    # rules are kind -> mode, not ours' default/kinds)
    theirs_file = theirs / ".lifeline" / "policy.json"
    read = WritePolicy.parse(json.loads(theirs_file.read_text()), source=str(theirs_file))
    assert [[read.decide(a, k).mode.value for k in kinds] for a in agents] == json.loads(
        told.stdout
    )
    path.write_text('{"default": "deny"}\n')
    kept = _lifeline(project, "init", "--agent", "ci")
    assert "kept" in kept and '"ci": {"kinds": {"checkpoint": "direct"' in kept
    assert path.read_text() == '{"default": "deny"}\n'  # never overwritten
    other = tmp_path_factory.mktemp("none")
    skipped = _run(other, "init", "--agent", "ci", "--no-policy")
    assert skipped.returncode == 0 and "not granted" in skipped.stderr
    assert not (other / ".lifeline" / "policy.json").exists()


def test_exam_budget_is_refused_in_one_line(root: Path) -> None:
    done = _run(root, "exam", "--budget", "8000")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "exam takes no --budget" in done.stderr
    assert "lifeline context --budget N" in done.stderr
