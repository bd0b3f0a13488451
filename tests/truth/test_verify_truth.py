"""`verify` covers everything `context` reads (issue 32; DESIGN §9b): the truth tables are
edited with sqlite3 as another local user or a rogue process would, and the real CLIs run
as subprocesses (`lifeline verify`, `lifeline-mesh verify`, `lifeline context`, the MCP
`context` tool through the SDK's own client). Each edit reaches `context` first (the
attack is real), then `verify` names the row and what differs, exits 1 and rebuilds the
tables from the entries, and the next `context` says what the entries say again."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import lifeline
from tests.support.mcp_client import mcp_client, tool_text

pytestmark = pytest.mark.timeout(300)

SERIAL = {"LIFELINE_VERIFY_PARALLEL_MIN": str(10**9)}
PARALLEL = {"LIFELINE_VERIFY_PARALLEL_MIN": "0", "LIFELINE_VERIFY_WORKERS": "2"}


def ok(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = lifeline(root, *args, env={"LIFELINE_AUTHOR": "tester", **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout


def mesh(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def verify_json(root: Path, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = lifeline(root, "verify", "--json", env=env)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def decisions(context: str) -> str:
    return context.split("## Decisions in force")[1].split("## Open")[0]


def sql(root: Path, *statements: str) -> None:
    conn = sqlite3.connect(root / ".lifeline" / "ledger.db")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A line with a decision, a question, a checkpoint, a correction and a pin, whose
    tables a `context` has folded."""
    root = tmp_path_factory.mktemp("truth-verify")
    ok(root, "init")
    ids = {"root": str(root)}
    ids["pg"] = ok(root, "log", "--kind", "decision", "--summary", "Database: PostgreSQL",
                   "--body", "audit trail needs ACID").strip()  # fmt: skip
    ids["redis"] = ok(root, "log", "--kind", "decision", "--summary", "Cache: Redis",
                      "--body", "fast session reads").strip()  # fmt: skip
    ids["q"] = ok(root, "log", "--kind", "open", "--summary", "Queue: SQS or Rabbit").strip()
    ok(root, "checkpoint", "--thread", "main", "--next", "run the load test")
    ids["fix"] = ok(root, "correct", ids["redis"], "--summary", "Cache: none",
                    "--body", "reads are fast enough").strip().split()[-1]  # fmt: skip
    ok(root, "pin", ids["pg"])
    for n in range(3):
        ok(root, "log", "--kind", "note", "--summary", f"filler {n}")
    context = ok(root, "context")
    assert "Database: PostgreSQL" in context and "run the load test" in context
    assert "Cache: Redis" not in decisions(context)  # corrected
    return ids


@pytest.fixture
def project(template: dict[str, str], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "project"
    shutil.copytree(template["root"], root)
    return root, template


@pytest.mark.parametrize("env", [SERIAL, PARALLEL], ids=["serial", "workers"])
def test_an_edited_summary_is_found_and_rebuilt(
    project: tuple[Path, dict[str, str]], env: dict[str, str]
) -> None:
    root, ids = project
    sql(root, "UPDATE truth_items SET summary = 'Database: MongoDB', why = 'web scale'"
              f" WHERE id = '{ids['pg']}'")  # fmt: skip
    assert "Database: MongoDB — why: web scale" in ok(root, "context")  # the attack works

    code, report = verify_json(root, env)
    assert code == 1 and not report["ok"]
    rows = [f for f in report["findings"] if f["check"] == "truth-row"]
    assert {f["entry_id"] for f in rows} == {ids["pg"]}
    details = " | ".join(f["detail"] for f in rows)
    assert "truth_items.summary holds 'Database: MongoDB'; the entry gives " \
        "'Database: PostgreSQL'" in details  # fmt: skip
    assert "truth_items.why holds 'web scale'; the entry gives 'audit trail needs ACID'" in details
    assert report["findings"][-1]["check"] == "truth-rebuilt"
    assert "rebuilt from the entries" in report["findings"][-1]["detail"]

    context = ok(root, "context")
    assert "MongoDB" not in context and "Database: PostgreSQL — why: audit trail" in context
    assert verify_json(root, env) == (0, {**report, "ok": True, "findings": []})


@pytest.mark.parametrize("env", [SERIAL, PARALLEL], ids=["serial", "workers"])
def test_roles_rows_and_counters_edited(
    project: tuple[Path, dict[str, str]], env: dict[str, str]
) -> None:
    """A decision hidden (its role), one invented, a checkpoint's mark dropped, what is
    superseded forgotten, a counter changed: each named; all rebuilt."""
    root, ids = project
    invented = "f" * 64
    sql(
        root,
        f"UPDATE truth_items SET role = '' WHERE id = '{ids['fix']}'",
        "INSERT INTO truth_items VALUES ('" + invented + "', 'decision',"
        " '2030-01-01T00:00:00.000000Z', 'Deploy: by hand', 'no CI', '', 'd')",
        "DELETE FROM truth_marks WHERE cp = 1",
        f"DELETE FROM truth_superseded WHERE id = '{ids['redis']}'",
        "UPDATE truth_core SET state = json_set(state, '$.kinds.note', 1)",
    )
    forged = ok(root, "context")
    assert "Deploy: by hand" in decisions(forged) and "Cache: none" not in decisions(forged)
    assert "- no checkpoint yet" in forged and "Cache: Redis" in forged

    code, report = verify_json(root, env)
    assert code == 1
    found = {(f["check"], f["entry_id"]): f["detail"] for f in report["findings"]}
    assert found["truth-row", ids["fix"]] == "truth_items.role holds ''; the entries give 'd'"
    assert "no entry gives" in found["truth-row", invented]
    assert found["truth-row", ids["redis"]] == (
        f"truth_superseded says None; the entries give {ids['fix']!r}"
    )
    marks = [f for f in report["findings"] if f["detail"].startswith("truth_marks has no row")]
    assert len(marks) == 1 and "thread 'main'" in marks[0]["detail"]
    states = [f["detail"] for f in report["findings"] if f["check"] == "truth-state"]
    assert any(d.startswith('truth_core.kinds["note"] holds 1; the entries give 4') for d in states)
    assert report["findings"][-1]["check"] == "truth-rebuilt"

    context = ok(root, "context")
    assert "Deploy: by hand" not in context and "Cache: none" in decisions(context)
    assert "- no checkpoint yet" not in context and "Cache: Redis" not in decisions(context)
    assert verify_json(root, env)[0] == 0


def test_tables_that_do_not_read_are_rebuilt(project: tuple[Path, dict[str, str]]) -> None:
    """Text that is not UTF-8 in a derived row and a core that is not JSON: `context`
    cannot read them; `verify` says so, exits 1 and rebuilds them."""
    root, ids = project
    sql(root, f"UPDATE truth_items SET summary = CAST(x'ff41' AS TEXT) WHERE id = '{ids['pg']}'")
    code, report = verify_json(root, SERIAL)
    assert code == 1
    (row,) = [f for f in report["findings"] if f["check"] == "truth-row"]
    assert row["entry_id"] == ids["pg"]
    assert row["detail"] == (
        "truth_items.summary holds '\ufffdA' (text that is not UTF-8); "
        "the entry gives 'Database: PostgreSQL'"
    )
    assert "Database: PostgreSQL" in ok(root, "context")

    sql(root, "UPDATE truth_core SET state = '{'")
    assert lifeline(root, "context").returncode != 0  # what the edit does to a reader
    code, report = verify_json(root, PARALLEL)
    assert code == 1
    assert [f["check"] for f in report["findings"]] == ["truth-state", "truth-rebuilt"]
    assert report["findings"][0]["detail"].startswith("the truth tables do not read")
    assert "Database: PostgreSQL" in ok(root, "context")


async def test_mesh_verify_and_mcp_context(project: tuple[Path, dict[str, str]]) -> None:
    """The same through `lifeline-mesh verify` and the MCP `context` tool."""
    root, ids = project
    sql(root, f"UPDATE truth_items SET summary = 'Database: MongoDB' WHERE id = '{ids['pg']}'")
    async with mcp_client(root) as client:
        before = tool_text(await client.call_tool("context", {}))
        assert "Database: MongoDB" in before

        done = mesh(root, "verify", "--json", env=PARALLEL)
        assert done.returncode == 1, done.stderr
        (line,) = json.loads(done.stdout)["lines"]
        rows = [f for f in line["findings"] if f["check"] == "truth-row"]
        assert [f["subject"] for f in rows] == [ids["pg"]]
        assert rows[0]["severity"] == "fail"
        assert "the entry gives 'Database: PostgreSQL'" in rows[0]["detail"]
        text = mesh(root, "verify")
        assert text.returncode == 0 and "OK" in text.stdout  # rebuilt by the first run

        after = tool_text(await client.call_tool("context", {}))
        assert "MongoDB" not in after and "Database: PostgreSQL" in after
