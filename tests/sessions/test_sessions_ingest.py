"""Ingesting the real transcripts: statuses, subagents, compaction, content addressing,
incremental reads of growing files, files rewritten in place, bad lines."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

from lifeline.sessions.ingest.ingester import Ingester
from lifeline.sessions.ingest.service import default_sources, ingest_sources, sources_in
from lifeline.sessions.model import (
    Compaction,
    Context,
    Image,
    Interrupt,
    Opaque,
    Prompt,
    Session,
    SessionStatus,
    SubagentLink,
    Todos,
    ToolCall,
    ToolResult,
    Usage,
)
from lifeline.sessions.pack import Caps
from tests.support.sessions_support import FIXTURES, catalogue_of, lay_out_home, open_ingester

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"


async def _all(ingester: Ingester) -> dict[str, Session]:
    cat = await catalogue_of(ingester)
    return {s.native_id: await cat.session(s.id) for s in cat.summaries()}


async def _ids(ingester: Ingester) -> set[str]:
    return {e.id async for e in ingester.store.stream()}


async def test_every_fixture_is_ingested_with_its_status(tmp_path: Path) -> None:
    home = lay_out_home(tmp_path / "home")
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, default_sources(env={}, home=home))
        sessions = await _all(ingester)
    assert report.failures == []
    assert report.files == 22 and report.empty == 1  # the never-used 2.0 session is 0 bytes
    status = {k: s.status.status for k, s in sessions.items()}
    assert status["tool_heavy"] == SessionStatus.INTERRUPTED  # ends on [Request interrupted…]
    assert status[SPOTTER] == SessionStatus.COMPLETE
    assert status["019a93b9-f380-7600-98ff-940e6b99603c"] == SessionStatus.CRASHED  # codex 0.58
    codex = sessions["019a93b9-f380-7600-98ff-940e6b99603c"]
    assert codex.status.reason == "the last prompt got no reply"
    assert codex.scope == "git:github.com/acidicsoil/chatbot-ui:"  # from session_meta.git
    assert status["0ab84937-9fe7-4284-986a-33c832af0b6a"] == SessionStatus.INTERRUPTED  # gemini
    assert all(s.turns >= 0 for s in sessions.values())


async def test_claude_details_compaction_subagents_usage_todos(tmp_path: Path) -> None:
    home = lay_out_home(tmp_path / "home")
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, default_sources(env={}, home=home))
        sessions = await _all(ingester)
    main = sessions[SPOTTER]
    assert any(isinstance(i, Compaction) and i.trigger == "auto" for i in main.items)
    summaries = [i for i in main.items if isinstance(i, Context) and i.subtype == "compact-summary"]
    assert len(summaries) == 1
    # 2.1.x layout: the subagent file is its own session, naming its parent
    child = sessions["agent-a881341"]
    assert child.facts.parent_session == SPOTTER and child.facts.agent_id == "a881341"
    assert child.turns == 1  # the Task prompt is the subagent's one real prompt
    links = [i for i in main.items if isinstance(i, SubagentLink) and i.agent_id == "a881341"]
    assert links and links[0].call_id
    # 2.0.x layout: a top-level agent-<id>.jsonl beside the parent, same sessionId
    legacy = sessions["agent-c8d9b115"]
    assert legacy.facts.parent_session == "a7da6a22-facc-4fcd-8bab-f83c87862004"
    # 1.0.x layout: sidechain lines inline in the main file keep their agent
    inline = sessions["fe5e1c67-53e7-4862-81ae-d0e013e3270b"]
    assert sum(1 for i in inline.items if i.agent is not None) > 300
    # usage counted once per API response (message.id + requestId)
    usage = [i for i in main.items if isinstance(i, Usage)]
    ids = [i.prov.native_ids for i in usage if i.prov]
    assert len(usage) < sum(1 for i in main.items if isinstance(i, ToolCall)) + 300
    assert len(ids) == len(usage)
    image = sessions["4379d1bf-ccb1-414e-a856-9791b73f3af2"]
    pics = [i for i in image.items if isinstance(i, Image)]
    assert pics and pics[0].bytes > 1000 and pics[0].sha256
    assert all(p.images >= 0 for p in image.items if isinstance(p, Prompt))
    heavy = sessions["tool_heavy"]
    assert isinstance([i for i in heavy.items if i.agent is None][-1], Interrupt)
    assert any(isinstance(i, Todos) for s in sessions.values() for i in s.items)


async def test_tool_calls_pair_with_results_and_provenance_points_at_lines(tmp_path: Path) -> None:
    src = FIXTURES / "claude-code" / "marot__spotter__short.jsonl"
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, sources_in([src]))
        (session,) = (await _all(ingester)).values()
    pairs = session.tool_calls()
    assert pairs and all(p.result is not None for p in pairs)
    raw = src.read_bytes().splitlines(keepends=True)
    for item in session.items:
        assert item.prov is not None
        first, last = item.prov.lines
        assert hashlib.sha256(b"".join(raw[first - 1 : last])).hexdigest() == item.prov.sha256


async def test_two_machines_ingesting_one_file_write_the_same_ids(tmp_path: Path) -> None:
    """Different homes, different paths, different times: the same entries."""
    ids = []
    for name in ("laptop-a", "laptop-b"):
        home = lay_out_home(tmp_path / name / "home")
        async with open_ingester(tmp_path / name / "node") as ingester:
            await ingest_sources(ingester, default_sources(env={}, home=home))
            ids.append(await _ids(ingester))
    assert ids[0] == ids[1] and len(ids[0]) > 60


async def test_reingesting_an_unchanged_tree_writes_nothing(tmp_path: Path) -> None:
    home = lay_out_home(tmp_path / "home")
    found = default_sources(env={}, home=home)
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, found)
        before = await ingester.store.count()
        again = await ingest_sources(ingester, found)
        assert again.unchanged == 22 and again.sessions == 0 and again.entries == 0
        assert await ingester.store.count() == before


async def test_a_growing_file_ends_with_the_same_entries_as_one_read(tmp_path: Path) -> None:
    """Appending in uneven chunks (some mid-line) and ingesting after each: the parts are
    the ones a single read of the whole file writes (packing is prefix-stable)."""
    full = (FIXTURES / "claude-code" / f"marot__spotter__{SPOTTER}.jsonl").read_bytes()
    caps = Caps(part_bytes=16_000)
    whole_dir, grown_dir = tmp_path / "whole", tmp_path / "grown"
    target = whole_dir / "p" / f"{SPOTTER}.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes(full)
    async with open_ingester(whole_dir / "node", caps=caps) as ingester:
        await ingest_sources(ingester, sources_in([target]))
        (expected,) = (await _all(ingester)).values()
    live = grown_dir / "p" / f"{SPOTTER}.jsonl"
    live.parent.mkdir(parents=True)
    cuts = [0, 1000, 1001, 250_000, 250_777, 1_200_000, 2_000_000, len(full)]
    async with open_ingester(grown_dir / "node", caps=caps) as ingester:
        for start, end in itertools.pairwise(cuts):
            with live.open("ab") as out:
                out.write(full[start:end])
            report = await ingest_sources(ingester, sources_in([live]))
            assert report.failures == []
        (grown,) = (await _all(ingester)).values()
        record = ingester.sources.get("claude", str(live.resolve()))
    assert grown.items == expected.items
    assert grown.status == expected.status and grown.turns == expected.turns
    assert record is not None and record.offset == len(full)


async def test_a_half_written_last_line_is_not_consumed_and_is_reported(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude-code" / "marot__spotter__short.jsonl").read_bytes().splitlines(True)
    path = tmp_path / "p" / "s.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, sources_in([path]))
        (cut,) = (await _all(ingester)).values()
        assert cut.status.status in (SessionStatus.CRASHED, SessionStatus.LIVE)
        assert "cut off (40 bytes" in cut.status.reason
        path.write_bytes(b"".join(lines))
        await ingest_sources(ingester, sources_in([path]))
        (done,) = (await _all(ingester)).values()
    assert "cut off" not in done.status.reason
    assert len(done.items) > len(cut.items)


async def test_bad_lines_are_skipped_and_unknown_records_kept(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude-code" / "marot__spotter__short.jsonl").read_bytes().splitlines(True)
    path = tmp_path / "p" / "s.jsonl"
    path.parent.mkdir()
    odd = json.dumps({"type": "hologram", "uuid": "x-1", "payload": {"a": 1}}).encode() + b"\n"
    path.write_bytes(lines[0] + b"{not json\n" + b"[1, 2]\n" + odd + b"".join(lines[1:]))
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, sources_in([path]))
        (session,) = (await _all(ingester)).values()
        summaries = [e.summary async for e in ingester.store.stream()]
    assert report.skipped["not-json"] == 1 and report.skipped["not-an-object"] == 1
    assert report.opaque == {"hologram": 1}
    assert session.opaque == {"hologram": 1}
    kept = [i for i in session.items if isinstance(i, Opaque)]
    assert kept[0].record_type == "hologram" and kept[0].raw["payload"] == {"a": 1}
    assert session.turns == 1
    assert any(", 1 turn — " in s for s in summaries), summaries  # not "1 turns"


async def test_a_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude-code" / "marot__spotter__short.jsonl").read_bytes().splitlines(True)
    path = tmp_path / "p" / "s.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(lines))
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, sources_in([path]))
        # same first line, then other content, and longer than before: not an append
        other = [lines[0], *reversed(lines[1:]), *lines[1:]]
        path.write_bytes(b"".join(other))
        ((adapter, source),) = sources_in([path])
        result = await ingester.ingest(adapter, source)
        (session,) = (await _all(ingester)).values()
    assert result.outcome == "rewritten"
    assert len(session.items) > 0
    assert session.items[-1].prov is not None
    assert session.items[-1].prov.lines[1] == len(other)


async def test_large_tool_output_is_cut_with_its_hash(tmp_path: Path) -> None:
    from tests.support.sessions_support import claude_line, write_jsonl

    big = "line of output\n" * 20_000
    path = write_jsonl(
        tmp_path / "p" / "s.jsonl",
        [
            claude_line("user", "u1", "run it"),
            claude_line(
                "assistant",
                "a1",
                [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "yes"}}],
                stop_reason="tool_use",
            ),
            claude_line(
                "user", "u2", [{"type": "tool_result", "tool_use_id": "t1", "content": big}]
            ),
            claude_line(
                "assistant", "a2", [{"type": "text", "text": "done"}], stop_reason="end_turn"
            ),
        ],
    )
    async with open_ingester(tmp_path / "node", caps=Caps(tool_output=1000)) as ingester:
        await ingest_sources(ingester, sources_in([path]))
        (session,) = (await _all(ingester)).values()
        bodies = [len(e.body.encode()) async for e in ingester.store.stream()]
    (result,) = [i for i in session.items if isinstance(i, ToolResult)]
    digest = hashlib.sha256(big.encode()).hexdigest()
    assert result.output.startswith("line of output") and len(result.output) < 1200
    assert f"{len(big)} characters in all, sha256 {digest}" in result.output
    assert session.truncated == 1 and max(bodies) < 64_000
    assert session.status.status in (SessionStatus.COMPLETE, SessionStatus.LIVE)


async def test_a_long_session_stays_a_few_entries(tmp_path: Path) -> None:
    """5,000 turns: parts of ~48 KB, not one entry per turn; each under the body cap."""
    from tests.support.sessions_support import claude_line, write_jsonl

    records = []
    for n in range(5_000):
        records.append(claude_line("user", f"u{n}", f"step {n}: carry on with the refactor"))
        records.append(
            claude_line(
                "assistant", f"a{n}", [{"type": "text", "text": f"did {n}"}], stop_reason="end_turn"
            )
        )
    path = write_jsonl(tmp_path / "p" / "long.jsonl", records)
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, sources_in([path]))
        count = await ingester.store.count()
        (session,) = (await _all(ingester)).values()
    assert report.turns == 5_000 and session.turns == 5_000
    assert count < 100  # header + ~60 parts + status
    assert sum(isinstance(i, Prompt) for i in session.items) == 5_000


def test_fixtures_are_byte_exact_copies() -> None:
    """Every transcript is the file its source wrote: SHA256SUMS holds the digests of the
    originals, taken when they were copied (PROVENANCE.md)."""
    sums = {}
    for line in (FIXTURES / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name] = digest
    held = {p.relative_to(FIXTURES).as_posix(): p for p in FIXTURES.rglob("*.jsonl")}
    assert sorted(held) == sorted(sums)
    for name, path in held.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[name], name


async def test_gemini_legacy_json_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    chats = tmp_path / "home" / ".gemini" / "tmp" / "abc" / "chats"
    chats.mkdir(parents=True)
    doc = {
        "sessionId": "3f1c9b2e-8a7d-4e6f-9b1a-2c3d4e5f6a7b",
        "projectHash": "abc",
        "startTime": "2026-06-15T10:00:00Z",
        "lastUpdated": "2026-06-15T10:00:01Z",
        "messages": [
            {
                "id": "m1",
                "type": "user",
                "content": "Add rate limiting",
                "timestamp": "2026-06-15T10:00:01Z",
            }
        ],
    }
    path = chats / "session-2026-06-15T10-00-3f1c9b2e.json"
    path.write_text(json.dumps(doc))  # one document, no newline: the legacy form
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, default_sources(env={}, home=tmp_path / "home"))
        (first,) = (await _all(ingester)).values()
        doc["messages"].append(
            {"id": "m2", "type": "gemini", "content": "Done.", "timestamp": "2026-06-15T10:00:05Z"}
        )
        path.write_text(json.dumps(doc))
        report = await ingest_sources(ingester, default_sources(env={}, home=tmp_path / "home"))
        (second,) = (await _all(ingester)).values()
    assert first.native_id == second.native_id == "3f1c9b2e-8a7d-4e6f-9b1a-2c3d4e5f6a7b"
    assert first.id == second.id  # one session, read again whole
    assert first.status.reason == "the last prompt got no reply"
    assert second.status.reason == "the last prompt was answered" and report.sessions == 1


async def test_codex_thread_names_and_archived_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    src = FIXTURES / "codex" / "kvsankar__agent-history__real_sessions__codex__session-01.jsonl"
    native = json.loads(src.read_bytes().splitlines()[0])["payload"]["id"]
    archived = home / ".codex" / "archived_sessions" / f"rollout-2026-06-05T04-58-20-{native}.jsonl"
    archived.parent.mkdir(parents=True)
    archived.write_bytes(src.read_bytes())
    (home / ".codex" / "session_index.jsonl").write_text(
        json.dumps({"id": native, "thread_name": "old name", "updated_at": "1"})
        + "\n"
        + json.dumps({"id": native, "thread_name": "Release checklist", "updated_at": "2"})
        + "\n"
    )
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, default_sources(env={}, home=home))
        (session,) = (await _all(ingester)).values()
    assert session.facts.title == "Release checklist" and session.facts.title_user_set
    assert session.status.status in (SessionStatus.COMPLETE, SessionStatus.LIVE)


async def test_a_big_file_read_in_slices_equals_one_read(tmp_path: Path) -> None:
    """The read budget bounds memory; the entries are those of a single pass."""
    src = FIXTURES / "claude-code" / f"marot__spotter__{SPOTTER}.jsonl"
    sessions = []
    for budget in (1 << 30, 150_000):
        async with open_ingester(tmp_path / str(budget), caps=Caps(part_bytes=16_000)) as ing:
            ing.read_budget = budget
            report = await ingest_sources(ing, sources_in([src]))
            (session,) = (await _all(ing)).values()
            sessions.append((session, report))
    (one, one_report), (sliced, sliced_report) = sessions
    assert sliced.items == one.items and sliced.status == one.status
    assert sliced_report.turns == one_report.turns == one.turns
    assert sliced_report.skipped == one_report.skipped


async def test_reading_in_worker_processes_writes_the_same_entries(tmp_path: Path) -> None:
    """``ingest --all`` over much reads files in two processes (decision 0068): the line
    it writes is the one a single process writes, entry for entry."""
    home = lay_out_home(tmp_path / "home")
    found = default_sources(env={}, home=home)
    async with open_ingester(tmp_path / "one") as ingester:
        alone = await ingest_sources(ingester, found, workers=1)
        expected = await _ids(ingester)
    async with open_ingester(tmp_path / "two") as ingester:
        shared = await ingest_sources(ingester, found, workers=2)
        assert await _ids(ingester) == expected
        again = await ingest_sources(ingester, found, workers=2)
    assert shared.as_json() == alone.as_json() and shared.failures == []
    assert again.unchanged == again.files == alone.files and again.entries == 0


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_killed_ingest_leaves_no_reader_behind(tmp_path: Path) -> None:
    """``ingest --all`` over 40 MB reads in worker processes; SIGKILL the ingest (it cannot
    tell them) and every process it started is gone within seconds."""
    import os
    import signal
    import subprocess
    import sys
    import time

    spotter = next(FIXTURES.glob(f"claude-code/*{SPOTTER}.jsonl"))
    project = tmp_path / "home" / ".claude" / "projects" / "-p"
    project.mkdir(parents=True)
    size = 0
    for n in range(40 * 1024 * 1024 // spotter.stat().st_size + 1):
        target = project / f"{n:08d}-ae70-4798-800f-63464d01a85d.jsonl"
        target.write_bytes(spotter.read_bytes())
        size += target.stat().st_size
    node = tmp_path / "node"
    node.mkdir()
    command = [sys.executable, "-m", "lifeline", "--root", str(node), "sessions", "ingest"]
    proc = subprocess.Popen(
        [*command, "--all", "--json", str(tmp_path / "home")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        started: set[int] = set()
        while len(started) < 3 and proc.poll() is None and time.monotonic() < deadline:
            started = _descendants(proc.pid)  # the fork server and its two readers
            time.sleep(0.1)
        assert len(started) >= 3, "the ingest finished before its readers were seen"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in started if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
