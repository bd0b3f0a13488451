"""The truth commands run as a user runs them: real subprocesses on a real line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.clirun import lifeline

COMMANDS = ["context", "recall", "resume", "checkpoint", "correct", "pin", "unpin"]


def run(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return lifeline(root, *args, env={"LIFELINE_AUTHOR": "tester"} | (env or {}))


def ok(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = run(root, *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A line built once through the CLI; tests that write get their own copy."""
    tmp_path = tmp_path_factory.mktemp("truth-cli")
    ok(tmp_path, "init")
    ids = {"root": str(tmp_path)}
    ids["boot"] = ok(tmp_path, "log", "--kind", "bootstrap", "--summary", "Aurora gateway").strip()
    ids["pg"] = ok(
        tmp_path,
        "log",
        "--kind",
        "decision",
        "--summary",
        "Database: PostgreSQL",
        "--body",
        "audit trail needs ACID",
    ).strip()
    ids["redis"] = ok(
        tmp_path,
        "log",
        "--kind",
        "decision",
        "--summary",
        "Cache: Redis",
        "--body",
        "fast session reads",
    ).strip()
    for n in range(6):
        ok(tmp_path, "log", "--kind", "note", "--summary", f"filler note {n}")
    return ids


@pytest.fixture
def line(template: dict[str, str], tmp_path: Path) -> dict[str, str]:
    copy = tmp_path / "root"
    shutil.copytree(template["root"], copy)
    return template | {"root": str(copy)}


@pytest.mark.parametrize("command", COMMANDS)
def test_help(tmp_path: Path, command: str) -> None:
    out = ok(tmp_path, command, "--help")
    assert out.startswith("usage: lifeline") and command in out


def test_correct_pin_checkpoint_resume_and_context(line: dict[str, str]) -> None:
    root = Path(line["root"])
    fix = ok(
        root,
        "correct",
        line["redis"][:10],
        "--summary",
        "Cache: Memcached",
        "--body",
        "licence change",
        "--json",
    )
    fixed = json.loads(fix)
    assert fixed["kind"] == "correction" and fixed["parents"] == [line["redis"]]
    ok(root, "pin", line["pg"][:10])
    cp = ok(
        root,
        "checkpoint",
        "--thread",
        "main",
        "--done",
        "harness",
        "--next",
        "load test",
        "--blocked",
        "quota",
    ).strip()
    resume = json.loads(ok(root, "resume", "--json"))
    assert resume == [
        {
            "blocks": {"blocked": ["quota"], "done": ["harness"], "next": ["load test"]},
            "checkpoint": cp,
            "label": "main",
            "thread": "main",
            "ts": resume[0]["ts"],
        }
    ]
    assert "thread main" in ok(root, "resume")
    text = ok(root, "context")
    assert f"## Pinned\n\n- `{line['pg'][:12]}` Database: PostgreSQL" in text
    assert f"(replaces `{line['redis'][:12]}`) Cache: Memcached" in text
    assert "- next: load test" in text and "## Identity" in text
    ok(root, "unpin", line["pg"][:10])
    assert "## Pinned" not in ok(root, "context")
    brief = ok(root, "context", "--thread", "main")
    assert brief.startswith("# Brief — thread main")


def test_pin_and_unpin_read_what_is_in_force(line: dict[str, str]) -> None:
    """`pin` refuses a superseded entry and `unpin` an entry no pin names (they read what
    is in force, not every item of the line: decision 0104)."""
    root = Path(line["root"])
    ok(root, "correct", line["redis"][:10], "--summary", "Cache: Memcached", "--body", "b")
    refused = run(root, "pin", line["redis"][:10])
    assert refused.returncode == 2 and "is superseded; pin the entry" in refused.stderr
    assert run(root, "unpin", line["pg"][:10]).returncode == 2  # not pinned yet
    note = ok(root, "pin", line["pg"][:10]).strip()
    ok(root, "correct", note[:10], "--summary", "not pinned after all", "--body", "b")
    gone = run(root, "unpin", line["pg"][:10])  # its one pin note superseded: no pin left
    assert gone.returncode == 2 and "is not pinned" in gone.stderr
    assert "## Pinned" not in ok(root, "context")
    ok(root, "pin", line["boot"][:10])
    ok(root, "unpin", line["boot"][:10])
    assert "## Pinned" not in ok(root, "context")


def test_pin_again_after_unpin(line: dict[str, str]) -> None:
    """Ids leave out the time: a second pin of the same words after an unpin must not be
    the first, superseded note again, nor the third the second."""
    root = Path(line["root"])
    notes = []
    for _ in range(3):
        notes.append(ok(root, "pin", line["pg"][:10]).strip())
        assert ok(root, "pin", line["pg"][:10]).strip() == notes[-1]  # pinned: the same note
        assert f"## Pinned\n\n- `{line['pg'][:12]}`" in ok(root, "context")
        ok(root, "unpin", line["pg"][:10])
        assert "## Pinned" not in ok(root, "context")
    assert len(set(notes)) == 3
    ok(root, "pin", line["pg"][:10])
    assert f"## Pinned\n\n- `{line['pg'][:12]}`" in ok(root, "context")


def test_context_budget_formats_and_query(line: dict[str, str]) -> None:
    root = Path(line["root"])
    small = ok(root, "context", "--budget", "400")
    assert len(small) <= 400 and "[omitted" in small
    tokens = ok(root, "context", "--budget-tokens", "120")
    assert (len(tokens.encode()) + 3) // 4 <= 120
    shaped = json.loads(ok(root, "context", "--format", "anthropic"))
    assert shaped["system"][0]["cache_control"] == {"type": "ephemeral"}
    rel = ok(root, "context", "--query", "session cache")
    assert "## Relevant" in rel and "Cache: Redis" in rel.split("## Relevant")[1]


@pytest.mark.parametrize("env", [{}, {"LIFELINE_RECALL": "scan"}])
def test_recall_json_and_fallback(line: dict[str, str], env: dict[str, str]) -> None:
    root = Path(line["root"])
    hits = json.loads(ok(root, "recall", "redis", "--json", env=env))
    assert hits[0]["id"] == line["redis"] and hits[0]["superseded"] is False
    fillers = json.loads(ok(root, "recall", 'filler" OR "', "--json", env=env))
    assert fillers and all(h["summary"].startswith("filler note") for h in fillers)
    assert "no entry shares a word with 'zebra'" in ok(root, "recall", "zebra", env=env)
    assert json.loads(ok(root, "recall", "zebra", "--json", env=env)) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["context", "--budget", "0"], "must be greater than 0"),
        (["context", "--budget", "50"], "too small"),
        (["context", "--format", "xml"], "invalid choice"),
        (["context", "--thread", "nope"], "no thread 'nope'"),
        (["checkpoint", "--thread", "main"], "needs at least one item"),
        (["correct", "ffff", "--summary", "x"], "no entry id starts with 'ffff'"),
        (["unpin", "zz"], "is not an id prefix"),
    ],
)
def test_bad_arguments_say_what_to_do(
    template: dict[str, str], args: list[str], message: str
) -> None:
    done = run(Path(template["root"]), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
