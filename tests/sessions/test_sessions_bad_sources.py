"""One odd transcript never stops the others (decision 0113).

Odd as real tools write them or as a damaged file is: a lone surrogate (Claude Code cuts a
string inside an emoji and writes ``"\\ud83d"``), a record or a Codex ``arguments`` JSON
text nested hundreds deep, fields of the wrong type. Beside real fixtures, through the real
``lifeline sessions ingest``, ``sessions watch`` and the session-end hook: every file is read,
its bad lines skipped and counted, and a source that still cannot be read is skipped with
one warning and counted, while the others go on.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lifeline.sessions.adapters import fields
from lifeline.sessions.adapters.claude import ClaudeAdapter, ClaudeParser
from lifeline.sessions.adapters.port import ParseState, SourceFile
from lifeline.sessions.ingest.service import ingest_sources, sources_in
from tests.support.sessions_support import FIXTURES, catalogue_of, open_ingester, run_cli, watching

CLAUDE = FIXTURES / "claude-code" / "marot__spotter__short.jsonl"
CODEX = FIXTURES / "codex" / "kvsankar__agent-history__real_sessions__codex__session-01.jsonl"
GEMINI = FIXTURES / "gemini" / "Mai0313__VibeCodingTracker__test_conversation_gemini.jsonl"
SURROGATE_ID = "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _surrogate(path: Path) -> Path:
    """A Claude Code session whose tool result ends in half an emoji, as Claude Code writes
    it: ASCII JSON with a lone ``\\ud83d``."""

    def rec(kind: str, uuid: str, content: Any, second: int) -> str:
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message |= {"id": f"msg_{uuid}", "model": "claude-sonnet-4-5", "type": "message"}
        return json.dumps(
            {
                "type": kind,
                "uuid": uuid,
                "sessionId": SURROGATE_ID,
                "cwd": "/home/alice/src/notes",
                "version": "2.1.173",
                "timestamp": f"2026-06-15T10:00:0{second}.000Z",
                "message": message,
            }
        )

    call = [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cat N"}}]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Release 2.0 \ud83d"}]
    return _write(
        path,
        [
            rec("user", "u1", "list the release notes please", 1),
            rec("assistant", "a1", call, 2),
            rec("user", "u2", result, 3),
            rec("assistant", "a2", [{"type": "text", "text": "Here they are."}], 4),
        ],
    )


def _deep(path: Path, sid: str, depth: int, *, in_arguments: bool) -> Path:
    """A Codex rollout with a call nested ``depth`` deep: in its ``arguments`` JSON text,
    or in the record itself."""

    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps(
            {"timestamp": "2025-11-17T21:30:29.000Z", "type": kind, "payload": payload}
        )

    nested = "[" * depth + '"token=Zx81kdk29dkQ"' + "]" * depth
    args = json.dumps(nested) if in_arguments else '{"x":' + nested + "}"
    call = (
        '{"timestamp":"2025-11-17T21:30:29.000Z","type":"response_item","payload":'
        f'{{"type":"function_call","name":"shell","arguments":{args},"call_id":"c1"}}}}'
    )
    return _write(
        path,
        [
            line(
                "session_meta", {"id": sid, "cwd": "/home/alice/src/api", "cli_version": "0.58.0"}
            ),
            line("event_msg", {"type": "user_message", "message": "please fix the failing build"}),
            call,
            line("event_msg", {"type": "user_message", "message": "and the deploy script too"}),
        ],
    )


def _mistyped_claude(target: Path) -> Path:
    """A copy of a real Claude Code transcript with fields of types Claude Code never writes
    (what a mutation fuzz of the fixtures found: each a TypeError or a ValidationError)."""
    records = _records(CLAUDE)
    records[0]["type"] = ["file-history-snapshot"]  # an unhashable type
    for rec in records:
        if rec.get("type") == "user":
            rec["timestamp"] = True
        elif rec.get("type") == "assistant":
            rec["message"]["content"] = 1e308  # not a list of blocks
    return _write(target, [json.dumps(r) for r in records])


def _mistyped_codex(target: Path, sid: str) -> Path:
    records = _records(CODEX)
    records[0]["payload"]["id"] = sid
    for rec in records:
        payload = rec["payload"]
        if payload.get("type") == "message" and payload.get("role") == "assistant":
            payload["type"] = ["message"]
        elif payload.get("type") == "token_count":
            payload["type"] = {"a": 1}
        elif payload.get("type") == "user_message":
            payload["images"] = 3
    reasoning = {"type": "reasoning", "summary": 7}
    records.append(
        {"timestamp": "2026-06-05T05:00:00Z", "type": "response_item", "payload": reasoning}
    )
    return _write(target, [json.dumps(r) for r in records])


def _mistyped_gemini(target: Path) -> Path:
    records = _records(GEMINI)
    records[0]["sessionId"] = "1ab84937-9fe7-4284-986a-33c832af0b6b"
    for rec in records:
        if rec.get("type") == "gemini":
            rec["thoughts"] = 3
            for call in rec.get("toolCalls") or []:
                call["status"] = {}
    records.append({"$rewindTo": ["x"]})
    return _write(target, [json.dumps(r) for r in records])


def _folder(base: Path) -> tuple[Path, set[str]]:
    """Real fixtures and odd files side by side; the native ids of the real ones."""
    (base / "chats").mkdir(parents=True)
    shutil.copyfile(CLAUDE, base / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl")
    shutil.copyfile(
        CODEX, base / "rollout-2026-06-05T04-58-20-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
    )
    shutil.copyfile(GEMINI, base / "chats" / "session-2026-04-23T12-52-0ab84937.jsonl")
    _surrogate(base / f"{SURROGATE_ID}.jsonl")
    _deep(
        base / "rollout-2025-11-17T21-30-28-019a93b9-f380-7600-98ff-940e6b996001.jsonl",
        "019a93b9-f380-7600-98ff-940e6b996001",
        260,
        in_arguments=True,
    )
    _deep(
        base / "rollout-2025-11-17T21-30-28-019a93b9-f380-7600-98ff-940e6b996002.jsonl",
        "019a93b9-f380-7600-98ff-940e6b996002",
        600,
        in_arguments=False,
    )
    _mistyped_claude(base / "9e0a1b2c-3d4e-4f5a-8b6c-7d8e9f0a1b2c.jsonl")
    _mistyped_codex(
        base / "rollout-2026-06-05T04-58-21-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c.jsonl",
        "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c",
    )
    _mistyped_gemini(base / "chats" / "session-2026-04-23T12-53-1ab84937.jsonl")
    real = {"55604662-cf2a-4331-851a-ec234028f8ca", "0ab84937-9fe7-4284-986a-33c832af0b6a"}
    return base, real


def test_odd_files_beside_real_ones_are_read_and_none_stops_the_others(tmp_path: Path) -> None:
    folder, real = _folder(tmp_path / "in")
    root = tmp_path / "p"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"] == 9 and report["sessions"] == 9 and report["failed"] == 0
    assert report["skipped"]["not-json"] == 1  # the record nested 600 deep
    assert "malformed" not in report["skipped"]  # the adapters took every wrong type
    rows = json.loads(run_cli(root, "sessions", "list", "--json").stdout)
    by_native = {row["native_id"]: row for row in rows}
    assert real <= set(by_native) and len(rows) == 9
    assert by_native["019a93b9-f380-7600-98ff-940e6b996002"]["turns"] == 2  # lines around it
    shown = run_cli(root, "sessions", "show", SURROGATE_ID, "--json")
    assert shown.returncode == 0, shown.stderr
    outputs = [i["output"] for i in json.loads(shown.stdout)["items"] if i["kind"] == "tool_result"]
    assert outputs == ["Release 2.0 \ufffd"]
    deep = run_cli(root, "sessions", "show", "019a93b9-f380-7600-98ff-940e6b996001", "--json")
    (call,) = [i for i in json.loads(deep.stdout)["items"] if i["kind"] == "tool_call"]
    assert isinstance(call["input"], str)  # too deep to decode: kept as the text it is
    assert "Zx81kdk29dkQ" not in deep.stdout and "[REDACTED:env-secret]" in call["input"]


async def test_a_source_that_fails_is_skipped_with_one_warning_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What no adapter check foresaw (here: a parser that raises) fails its file alone; the
    warning names the file and the error's type and place, never its message (it may quote
    the transcript)."""

    class Exploding(ClaudeAdapter):
        def parser(self, source: SourceFile, state: ParseState | None) -> ClaudeParser:
            raise RuntimeError("cannot take 'hunter2-in-the-transcript'")

    good = tmp_path / "in" / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    good.parent.mkdir()
    shutil.copyfile(CLAUDE, good)
    bad = _surrogate(tmp_path / "in" / f"{SURROGATE_ID}.jsonl")
    ((_, source),) = sources_in([bad])
    found = [(Exploding(), source), *sources_in([good])]
    with caplog.at_level(logging.WARNING, logger="lifeline.sessions.ingest.service"):
        async with open_ingester(tmp_path / "node") as ingester:
            report = await ingest_sources(ingester, found)
            sessions = [s.native_id for s in (await catalogue_of(ingester)).summaries()]
    assert report.failed == 1 and report.sessions == 1
    assert sessions == ["55604662-cf2a-4331-851a-ec234028f8ca"]
    (failure,) = report.failures
    assert (
        failure.startswith(f"{bad}: ")
        and "RuntimeError at lifeline/sessions/ingest/reading.py:" in failure
    )
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"skipped {bad}: ") and "hunter2" not in warning + failure


async def test_the_mutation_fuzz_of_the_fixtures_finds_no_exception(tmp_path: Path) -> None:
    """Values of every type, lone surrogates included, put at random places of real
    transcripts (seeded: the same files every run): each file is read, and no line needed
    the parser's last resort (``malformed``): the adapters check what they take."""
    values: list[Any] = [None, 1e308, -1, [], {}, "x", True, 10**30, "\ud800", [[[]]], {"a": None}]
    rnd = random.Random(113)
    folder = tmp_path / "fuzz"
    (folder / "chats").mkdir(parents=True)
    for n in range(40):
        for source in (CLAUDE, CODEX, GEMINI):
            records = _records(source)
            for _ in range(6):
                rec = rnd.choice(records)
                holder, key = _place(rec, rnd)
                holder[key] = rnd.choice(values)
            name = {
                CLAUDE: f"{n:08d}-0000-4000-8000-000000000000.jsonl",
                CODEX: f"rollout-2026-06-05T04-58-20-{n:08d}-0000-4000-8000-000000000000.jsonl",
                GEMINI: f"chats/session-2026-04-23T12-52-{n:08d}.jsonl",
            }[source]
            _write(folder / name, [json.dumps(r) for r in records])
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, sources_in([folder]))
    assert report.files == 120 and report.failed == 0, report.failures
    assert report.skipped["malformed"] == 0 and report.items > 1000


def _place(rec: Any, rnd: random.Random) -> tuple[Any, Any]:
    """A random member or element of ``rec``, as (its container, its key)."""
    places: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            places.append((node, key))
            if isinstance(value, dict | list):
                walk(value)

    walk(rec)
    return rnd.choice(places)


def test_watch_reads_past_odd_files_and_warns_once_of_one_it_cannot_read(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "p"
    root.mkdir()
    projects = home / ".claude" / "projects" / "-p"
    projects.mkdir(parents=True)
    live = projects / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    shutil.copyfile(CLAUDE, live)
    _surrogate(projects / f"{SURROGATE_ID}.jsonl")
    (projects / "a-folder-named-like-a-transcript.jsonl").mkdir()  # cannot be read
    codex = home / ".codex" / "sessions" / "2025" / "11" / "17"
    _deep(
        codex / "rollout-2025-11-17T21-30-28-019a93b9-f380-7600-98ff-940e6b996001.jsonl",
        "019a93b9-f380-7600-98ff-940e6b996001",
        260,
        in_arguments=True,
    )
    _deep(
        codex / "rollout-2025-11-17T21-30-28-019a93b9-f380-7600-98ff-940e6b996002.jsonl",
        "019a93b9-f380-7600-98ff-940e6b996002",
        600,
        in_arguments=False,
    )
    with watching(root, home) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("watching every project")
        first = sorted(proc.stdout.readline().split()[0] for _ in range(5))
        assert first == ["failed", "read", "read", "read", "read"], first
        for n in (1, 2):  # two more passes at least: the file that failed is not tried again
            said = {"role": "user", "content": f"one more thing, number {n}"}
            with live.open("a") as out:
                out.write(json.dumps({"type": "user", "uuid": f"x{n}", "message": said}) + "\n")
            line = proc.stdout.readline()
            assert line.startswith("resumed") and "+1 turn," in line, line
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "stopped"
        assert proc.wait(timeout=30) == 0
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr
    assert stderr.count("a-folder-named-like-a-transcript.jsonl: cannot read it") == 1, stderr
    rows = json.loads(run_cli(root, "sessions", "list", "--json").stdout)
    assert len(rows) == 4


def test_the_session_end_hook_ingests_a_transcript_with_half_an_emoji(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".lifeline").mkdir(parents=True)
    transcript = _surrogate(tmp_path / "t" / f"{SURROGATE_ID}.jsonl")
    event = {"session_id": SURROGATE_ID, "transcript_path": str(transcript), "cwd": str(project)}
    ended = subprocess.run(
        [
            sys.executable,
            "-m",
            "lifeline",
            "hooks",
            "run",
            "session-end",
            "--client",
            "claude-code",
        ],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(tmp_path / "home")},
    )
    assert ended.returncode == 0 and json.loads(ended.stdout) == {}, ended.stderr
    assert ended.stderr == ""
    rows = json.loads(run_cli(project, "sessions", "list", "--json").stdout)
    assert [r["facts"]["first_prompt"] for r in rows] == ["list the release notes please"]


def test_json_is_parsed_to_a_bounded_depth_with_lone_surrogates_mended() -> None:
    parse_json, json_text, depth = fields.parse_json, fields.json_text, fields.MAX_DEPTH
    assert parse_json("[" * depth + "]" * depth) is not None
    for text in ("[" * 65 + "]" * 65, "[{" * 40 + "1" + "}]" * 40, "[" * 100_000):
        with pytest.raises(ValueError):
            parse_json(text)
    brackets = '["' + "[{" * 500 + '"]'  # in a string: not nesting
    assert parse_json(brackets) == ["[{" * 500]
    mended = parse_json(b'{"\\udc00k": ["Release \\ud83d", "\\ud83d\\ude00"]}')
    assert mended == {"\ufffdk": ["Release \ufffd", "\U0001f600"]}
    assert json.dumps(mended, ensure_ascii=False).encode("utf-8")  # UTF-8 can hold it
    assert json_text('{"command": ["ls"]}') == {"command": ["ls"]}
    for not_json_text in ('"quoted"', "12", "[Request interrupted by user]", "{" * 70 + "}" * 70):
        assert json_text(not_json_text) is None
