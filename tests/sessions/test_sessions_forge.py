"""Forge (forgecode) conversations from ``.forge.db``: the upstream schema and the zstd
build's, statuses, working folder, token counts, incremental passes, redaction."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path

from lifeline.sessions.ingest.ingester import Ingester
from lifeline.sessions.ingest.service import default_sources, ingest_sources, sources_in
from lifeline.sessions.model import FileEdit, Prompt, Session, SessionStatus, Tool, ToolCall
from lifeline.sessions.scope import scope_for
from tests.support.agent_dbs import forge_db, forge_rows, set_forge_context
from tests.support.sessions_support import catalogue_of, open_ingester

HELLO = "d0e2b1f5-6405-4e52-9c1e-6410279de630"
SUMMARY = "ff7e318b-017e-4db0-b9b4-23e4e2b27391"
SECRET = "ghp_" + "R8mZk2Lq7VwXy4Tn9Pb3Hc6Jd1Fs5Ga0Ue2Q"


async def _sessions(ingester: Ingester) -> dict[str, Session]:
    cat = await catalogue_of(ingester)
    return {s.native_id: await cat.session(s.id) for s in cat.summaries()}


async def _ids(ingester: Ingester, kinds: tuple[str, ...]) -> set[str]:
    return {e.id async for e in ingester.store.stream() if e.kind in kinds}


async def test_conversations_with_status_folder_prompts_edits_and_tokens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    forge_db(home / ".forge", forge_rows())
    found = default_sources(tools=[Tool.FORGE], env={}, home=home)
    assert sorted(s.key for _, s in found) == sorted([HELLO, SUMMARY, "conv-001"])  # no tombstone
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, found)
        sessions = await _sessions(ingester)
    assert report.failures == [] and report.sessions == 3
    hello = sessions[HELLO]
    assert hello.tool is Tool.FORGE and hello.status.status == SessionStatus.COMPLETE
    # the prompt is what the user typed (raw_content), not forge's <task> wrapping of it
    assert [i.text for i in hello.items if isinstance(i, Prompt)] == ["Hello!"]
    assert hello.facts.cwd == "/Volumes/Bran/code-forge-workspace/reviews"  # System prompt
    assert hello.facts.started == "2025-12-11T04:10:54.404499Z"
    summary = sessions[SUMMARY]
    assert summary.facts.title == "Add Tests for Summary Module" and summary.turns == 2
    edits = [i for i in summary.items if isinstance(i, FileEdit)]
    assert edits and all(e.tool_name == "patch" for e in edits)
    assert edits[0].path.endswith("crates/forge_domain/src/compact/summary.rs")
    calls = summary.tool_calls()
    assert len(calls) == sum(isinstance(i, ToolCall) for i in summary.items) > 40
    assert all(pair.result is not None for pair in calls)  # every call has its result
    # token counts as recorded per entry; they add up to the row's own metrics
    agents = sessions["conv-001"]
    assert agents.usage == {"input": 360, "output": 55, "cache_read": 85}
    assert agents.facts.cwd == "~/dev/projects/agentsview"


async def test_a_pass_reads_only_the_conversations_that_changed(tmp_path: Path) -> None:
    db = forge_db(tmp_path / "forge", forge_rows())
    async with open_ingester(tmp_path / "node") as ingester:
        first = await ingest_sources(ingester, sources_in([db]))
        assert first.sessions == 3
        again = await ingest_sources(ingester, sources_in([db]))
        assert again.unchanged == 3 and again.sessions == 0 and again.lines == 0
        # forge saves one conversation again: the user asked something, no reply yet
        row = next(r for r in forge_rows() if r["conversation_id"] == HELLO)
        context = copy.deepcopy(row["context"])
        asked = {"role": "User", "content": "<task>Now?</task>", "raw_content": {"Text": "Now?"}}
        context["messages"].append({"message": {"text": asked}})
        set_forge_context(db, HELLO, context, "2025-12-11 05:00:00.000001")
        third = await ingest_sources(ingester, sources_in([db]))
        assert third.sessions == 1 and third.unchanged == 2
        assert third.lines == len(context["messages"])  # that conversation, replayed
        hello = (await _sessions(ingester))[HELLO]
    assert hello.status.status == SessionStatus.CRASHED
    assert hello.status.reason == "the last prompt got no reply"
    assert [i.text for i in hello.items if isinstance(i, Prompt)] == ["Hello!", "Now?"]


async def test_the_zstd_build_gives_the_same_sessions(tmp_path: Path) -> None:
    rows = forge_rows()
    rows[0]["cwd"] = "/home/dev/acme-api"  # the zstd build records the folder in a column
    plain = forge_db(tmp_path / "plain", forge_rows())
    packed = forge_db(tmp_path / "packed", rows, compressed=True)
    with sqlite3.connect(packed) as conn:  # as that build writes them: no JSON in `context`
        plain_json = conn.execute("SELECT count(*) FROM conversations WHERE context IS NOT NULL")
        stored = conn.execute(
            "SELECT count(*), sum(is_compressed) FROM conversations WHERE context_zstd NOT NULL"
        ).fetchone()
        assert plain_json.fetchone() == (0,) and stored == (3, 3)
    kinds = ("session", "session-part")
    async with open_ingester(tmp_path / "a") as ingester:
        await ingest_sources(ingester, sources_in([plain]))
        plain_ids = await _ids(ingester, kinds)
    found = default_sources(env={"FORGE_CONFIG": str(packed.parent)}, home=tmp_path / "nohome")
    async with open_ingester(tmp_path / "b") as ingester:
        report = await ingest_sources(ingester, found)
        packed_ids = await _ids(ingester, kinds)
        sessions = await _sessions(ingester)
    assert report.sessions == 3 and report.failures == []
    assert packed_ids == plain_ids  # content addressed: the storage format changes nothing
    assert sessions[rows[0]["conversation_id"]].scope.startswith("path:")
    assert sessions[rows[0]["conversation_id"]].facts.cwd == "~/acme-api"


async def test_secrets_are_redacted_and_a_broken_context_is_skipped(tmp_path: Path) -> None:
    rows = forge_rows()[2:]
    context = rows[0]["context"]
    typed = f"Deploy with the token {SECRET} please"
    context["messages"][1]["message"]["text"]["raw_content"] = {"Text": typed}
    db = forge_db(tmp_path / "forge", rows, compressed=True)
    with sqlite3.connect(db) as conn:  # a row whose blob is not zstd at all
        conn.execute(
            "INSERT INTO conversations (conversation_id, workspace_id, created_at, context_zstd,"
            " is_compressed) VALUES ('broken', 7, '2026-05-03 00:00:00', x'00ff00ff', 1)"
        )
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, sources_in([db]))
        bodies = [e.body async for e in ingester.store.stream()]
        sessions = await _sessions(ingester)
    assert report.failures == [] and report.redactions["github-token"] >= 1
    assert not any(SECRET in body for body in bodies)
    prompt = next(i for i in sessions["conv-001"].items if isinstance(i, Prompt))
    assert "[REDACTED:github-token]" in prompt.text
    broken = sessions["broken"]
    assert broken.skipped == {"context_zstd cannot be decompressed (ZstdError)": 1}
    assert broken.turns == 0 and broken.items == ()


async def test_the_project_filter_reads_the_folder_from_the_system_prompt(tmp_path: Path) -> None:
    """Without ``--all`` only this project's conversations: their folder is the System
    prompt's ``<current_working_directory>`` (peeked at, plain or compressed)."""
    project = tmp_path / "acme api"  # a space: the folder as forge writes it, JSON-escaped
    project.mkdir()
    rows = forge_rows()
    system = rows[2]["context"]["messages"][0]["message"]["text"]
    system["content"] = system["content"].replace("/home/mj/dev/projects/agentsview", str(project))
    for packed in (False, True):
        db = forge_db(tmp_path / f"forge-{packed}", rows, compressed=packed)
        async with open_ingester(tmp_path / f"node-{packed}") as ingester:
            ingester.project_root = project
            mine = scope_for(str(project), None)
            report = await ingest_sources(ingester, sources_in([db]), scope=mine)
            sessions = await _sessions(ingester)
        assert report.sessions == 1 and report.out_of_scope == 2, packed
        assert sessions["conv-001"].scope == mine
