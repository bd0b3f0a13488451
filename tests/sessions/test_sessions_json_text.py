"""Secrets inside JSON text held in a string never reach the line (decision 0113).

Codex writes a call's ``arguments`` (and older versions a call's ``output``) as JSON text
inside the JSON of its record; Cursor does the same with ``params``/``rawArgs`` and
``result``. There a quote is ``\\"`` and a letter may be ``\\u0070``: rules that need a plain
quote missed ``PGPASSWORD="…"``, and the adapter decoded the text after redaction into a
token nobody had redacted. The redactor now redacts what such a string holds, the corpus
of decision 0052 included; the quoted rules also take escaped quotes.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from lifeline.sessions.ingest.redact import Redactor
from tests.sessions.secret_corpus import secrets
from tests.support.agent_dbs import cursor_user_folder
from tests.support.sessions_support import run_cli, stored

SID = "019a93b9-f380-7600-98ff-940e6b99603d"
GH = "5EbuVm1wlhNWzEkFBGS766p8wdbjNb1pgYXm"
ENV_FILE = 'DB_PASSWORD="Qz7vXk29LmPw"\nSTRIPE_SECRET="Rt5yUi8oPa3s"\nAPI_TOKEN=\'Hj4kLm9nBv2c\'\n'
PLAIN = ["Wq3eRt6yUi9o", "Qz7vXk29LmPw", "Rt5yUi8oPa3s", "Hj4kLm9nBv2c", "ghp_" + GH, GH]
# (a command, what must not survive): each was kept whole inside `arguments`
COMMANDS = [
    ('mysql --password "S3cr3tPass9" db', "S3cr3tPass9"),
    ('docker login -p "S3cr3tPass9" reg', "S3cr3tPass9"),
    ('export DB_PASSWORD="S3cr3tPass9"', "S3cr3tPass9"),
    ('echo \'{"api_key": "S3cr3tPass9"}\' > c.json', "S3cr3tPass9"),
    ('client_secret = "S3cr3tPass9"', "S3cr3tPass9"),
    ('curl -d "{\\"password\\":\\"S3cr3tPass9\\"}" https://api.example.com', "S3cr3tPass9"),
]


def _needles(secret: str) -> list[bytes]:
    """The secret, its tail and each of its lines, as they would be stored: plain, escaped
    once (a string of the line's JSON) and twice (a string of a JSON text in one)."""
    found = [secret, secret[-10:], *(ln for ln in secret.splitlines() if len(ln) >= 10)]
    once = [json.dumps(n)[1:-1] for n in found]
    twice = [json.dumps(n)[1:-1] for n in once]
    return [n.encode() for n in dict.fromkeys(found + once + twice)]


def _rollout(path: Path, corpus: str) -> Path:
    """A Codex rollout as Codex writes it: calls' arguments and outputs as JSON text."""

    def line(kind: str, payload: dict[str, object]) -> str:
        record = {"timestamp": "2025-11-17T21:30:28.664Z", "type": kind, "payload": payload}
        return json.dumps(record, separators=(",", ":"))

    def call(call_id: str, command: str, output: str) -> list[str]:
        arguments = json.dumps({"command": ["bash", "-lc", command], "workdir": "/srv/app"})
        result = json.dumps({"output": output, "metadata": {"exit_code": 0}})
        return [
            line(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": arguments,
                    "call_id": call_id,
                },
            ),
            line(
                "response_item",
                {"type": "function_call_output", "call_id": call_id, "output": result},
            ),
        ]

    lines = [
        line("session_meta", {"id": SID, "cwd": "/srv/app", "cli_version": "0.58.0"}),
        line("event_msg", {"type": "user_message", "message": "set up the database"}),
        *call("c1", 'export PGPASSWORD="Wq3eRt6yUi9o" && psql -h db -U app', ENV_FILE),
        *call("c2", corpus, corpus),
        # written by hand as a model may: a letter of the token as a \\u escape
        line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "c3",
                "arguments": '{"command":["bash","-lc","echo gh\\u0070_' + GH + '"]}',
            },
        ),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_codex_calls_and_outputs_keep_no_secret_in_the_line_or_show(tmp_path: Path) -> None:
    corpus = secrets(5)
    joined = "\n".join(text for _, _, text in corpus)
    path = _rollout(tmp_path / f"rollout-2025-11-17T21-30-28-{SID}.jsonl", joined)
    root = tmp_path / "p"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", "--tool", "codex", str(path), "--json")
    assert done.returncode == 0, done.stderr
    shown = run_cli(root, "sessions", "show", SID)
    as_json = run_cli(root, "sessions", "show", SID, "--json")
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr
    blobs = {"line": stored(root), "show": shown.stdout.encode(), "json": as_json.stdout.encode()}
    secrets_kept = PLAIN + [secret for _, secret, _ in corpus]
    for secret in secrets_kept:
        for where, blob in blobs.items():
            assert not any(n in blob for n in _needles(secret)), (secret, where)
    assert 'export PGPASSWORD="[REDACTED:env-secret]"' in shown.stdout
    assert "echo [REDACTED:github-token]" in shown.stdout
    calls = [i for i in json.loads(as_json.stdout)["items"] if i["kind"] == "tool_call"]
    assert all(isinstance(c["input"], dict) for c in calls)  # still decoded by the adapter


@pytest.mark.parametrize(("command", "secret"), COMMANDS)
def test_each_command_form_is_redacted_inside_arguments(command: str, secret: str) -> None:
    redactor = Redactor()
    arguments = json.dumps({"command": ["bash", "-lc", command]})
    out = redactor.value({"payload": {"arguments": arguments}})["payload"]["arguments"]
    assert secret not in out and "[REDACTED:" in out
    assert json.loads(out)["command"][:2] == ["bash", "-lc"]  # still JSON text
    for escaped in (command.replace('"', '\\"'), json.dumps(command)):  # escaped, not decoded
        assert secret not in Redactor().text(escaped), escaped


def test_json_text_without_secrets_is_kept_byte_for_byte() -> None:
    """Only a JSON text that held a secret is written again (compact); any other stays as
    the tool wrote it, spaces and escapes included."""
    text = '{"command": ["bash", "-lc", "rg -n \\u0074oken_count src"], "timeout": 10}'
    record = {"payload": {"arguments": text, "input_tokens": 3}}
    assert Redactor().record(json.dumps(record).encode(), record) is record
    assert Redactor().value(record) is record


def test_cursor_params_and_results_keep_no_secret(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "acme-api"
    project.mkdir()
    user = cursor_user_folder(
        home / ".config" / "Cursor" / "User", {"8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e": project}
    )
    key = "bubbleId:e1a7d2c4-8b36-4f0a-9d5e-2c7b9a1f4e60:9a1e-a1"
    with closing(sqlite3.connect(user / "globalStorage" / "state.vscdb")) as db:
        row = db.execute("SELECT value FROM cursorDiskKV WHERE key = ?", (key,)).fetchone()
        bubble = json.loads(row[0])
        tool = bubble["toolFormerData"]
        tool["params"] = json.dumps({"command": 'export PGPASSWORD="Wq3eRt6yUi9o" && psql'})
        tool["result"] = json.dumps({"output": ENV_FILE, "exitCode": 0, "rejected": False})
        db.execute("UPDATE cursorDiskKV SET value = ? WHERE key = ?", (json.dumps(bubble), key))
        db.commit()
    root = tmp_path / "p"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", "--all", "--tool", "cursor", "--json", home=home)
    assert done.returncode == 0 and json.loads(done.stdout)["failures"] == [], done.stderr
    line = stored(root)
    for secret in PLAIN[:4]:
        assert not any(n in line for n in _needles(secret)), secret
    assert b'PGPASSWORD=\\"[REDACTED:env-secret]\\"' in line
