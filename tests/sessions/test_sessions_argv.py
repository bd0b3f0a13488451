"""A secret in an argv never reaches the line (decision 0118).

Codex's shell tool takes its ``command`` as an argv (``["bash", "-lc", "…"]``, or the
program itself: ``["mysql", "--password", "X"]``), ``local_shell_call`` its
``action.command``, an MCP tool its ``args``. There a flag and its value are two JSON
strings, and the rules written for a command line (``--password X``, ``docker login -p X``,
``curl -u user:pw``) saw neither with the other: each such value was stored whole. So were
cookies given to curl with ``-b`` / ``--cookie``, in an argv or a command string.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lifeline.sessions.ingest.redact import Redactor
from tests.support.sessions_support import claude_line, run_cli, stored, write_jsonl

SID = "019a93b9-f380-7600-98ff-940e6b99603e"
CLAUDE_SID = "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f"
# (argv, the secret it holds, the marker it must get): each was stored whole
ARGVS = [
    (["mysql", "-h", "db", "--password", "Hunter2xyz9", "app"], "Hunter2xyz9", "password-flag"),
    (["mysql", "-uroot", "-pQw8rTy5uIo"], "Qw8rTy5uIo", "password-flag"),
    (
        ["docker", "login", "-u", "me", "-p", "Dk7eRt5yUi3o", "reg.io"],
        "Dk7eRt5yUi3o",
        "password-flag",
    ),
    (["docker", "login", "--password", "Dk7eRt5yUi3o"], "Dk7eRt5yUi3o", "password-flag"),
    (["sshpass", "-p", "Ss4hPa5sWq1z", "ssh", "deploy@web1"], "Ss4hPa5sWq1z", "password-flag"),
    (["gh-release", "--token", "Tk9yZx3wVu7t", "v1.2"], "Tk9yZx3wVu7t", "password-flag"),
    (["deploy", "--api-key", "Ak5eYq8zLm2n"], "Ak5eYq8zLm2n", "password-flag"),
    (["vault", "write", "--secret", "Vs6cRt4eWq8p"], "Vs6cRt4eWq8p", "password-flag"),
    (["deploy", "--access-token", "At2kSd7fGh4j"], "At2kSd7fGh4j", "password-flag"),
    (["psql-admin", "--db-password", "correct horse 9battery"], "horse 9battery", "password-flag"),
    (
        ["curl", "-u", "admin:Cu8rLp4wQz6x", "https://api.example.com"],
        "Cu8rLp4wQz6x",
        "curl-auth-user",
    ),
    (
        ["curl", "--user", "admin:Cu8r Lp4!wQz", "https://api.example.com"],
        "Cu8r Lp4!wQz",
        "curl-auth-user",
    ),
    (
        ["curl", "--cookie", "session=Ck3oKi9eSx1d", "https://app.example.com"],
        "Ck3oKi9eSx1d",
        "cookie",
    ),
    (
        ["curl", "-s", "-b", "sid=Ck3oKi9eSx1d; theme=dark", "https://x.io"],
        "Ck3oKi9eSx1d",
        "cookie",
    ),
    (["login", "-u", "me", "-p", "Mc5pLo8kIj2u"], "Mc5pLo8kIj2u", "password-flag"),  # args only
]
# command strings: a cookie given to curl by flag
COOKIE_COMMANDS = [
    ("curl --cookie 'session=Ck3oKi9eSx1d' https://app.example.com/me", "Ck3oKi9eSx1d"),
    ('curl --cookie "session=Ck3oKi9eSx1d; theme=dark" https://x.io', "Ck3oKi9eSx1d"),
    ("curl -sS -b 'sid=Ck3oKi9eSx1d' https://app.example.com/me", "Ck3oKi9eSx1d"),
    ("curl -b sid=Ck3oKi9eSx1d https://app.example.com/me", "Ck3oKi9eSx1d"),
    ("curl https://x.io -b 'a=1; sid=Ck3oKi9eSx1d'", "Ck3oKi9eSx1d"),
    ("wget --cookie=sid=Ck3oKi9eSx1d https://x.io", "Ck3oKi9eSx1d"),
    ('curl -b \\"sid=Ck3oKi9eSx1d\\" https://x.io', "Ck3oKi9eSx1d"),  # quotes escaped
]
# argvs and commands that hold no secret: they stay as they are
KEPT_ARGVS = [
    ["bash", "-lc", 'rg -n "ollama" -n'],
    ["git", "checkout", "-b", "feature/login-page"],
    ["git", "checkout", "-b", "fix/cookie=handling"],
    ["curl", "-sS", "-b", "cookies.txt", "-c", "cookies.txt", "https://example.com/login"],
    ["curl", "-u", "$USER:$PASS", "https://api.example.com"],
    ["curl", "--cookie", "session=$SESSION", "https://app.example.com"],
    ["mysql", "-p", "appdb"],  # -p then a space: mysql asks for the password, appdb is a db
    ["docker", "login", "--password-stdin", "-u", "octo", "ghcr.io"],
    ["deploy", "--token", "${DEPLOY_TOKEN}"],
    ["pytest", "-k", "token and not slow", "--password-file", "tests/pw.txt"],
    ["sort", "-b", "-k", "2", "sessions.txt"],
    ["llm", "--max-tokens", "4096", "--secret-name", "prod-db", "--password-file", "pw.txt"],
]
KEPT_COMMANDS = [
    "llm --max-tokens 4096 --secret-name prod-db --password-file pw.txt --bypass abc123",
    'deploy --token "$(cat ~/.deploy-token)"',
    "curl -sS -b cookies.txt -c cookies.txt https://example.com/login",
    "curl --cookie-jar jar.txt https://example.com",
    "git checkout -b fix/cookie=handling",
    'curl -b "$COOKIE" https://example.com',
]


def _forms(secret: str) -> list[bytes]:
    """The secret as it could be stored: plain, escaped once and twice (a JSON text)."""
    once = json.dumps(secret)[1:-1]
    return [secret.encode(), once.encode(), json.dumps(once)[1:-1].encode()]


@pytest.mark.parametrize(("argv", "secret", "kind"), ARGVS)
def test_a_value_after_a_secret_flag_in_an_argv_is_redacted(
    argv: list[str], secret: str, kind: str
) -> None:
    for record in (
        {"message": {"content": [{"type": "tool_use", "input": {"args": argv}}]}},
        {"payload": {"type": "local_shell_call", "action": {"command": argv}}},
        {"payload": {"arguments": json.dumps({"command": argv, "workdir": "/srv/app"})}},
    ):
        for raw in (
            json.dumps(record, separators=(",", ":")),  # as Claude Code and Codex write lines
            json.dumps(record),
        ):
            redactor = Redactor()
            out = json.dumps(redactor.record(raw.encode(), json.loads(raw)))
            assert not any(form in out.encode() for form in _forms(secret)), (argv, raw)
            assert redactor.counts == {kind: 1}, (argv, redactor.counts)
    out_argv = Redactor().value({"command": argv})["command"]
    assert len(out_argv) == len(argv)
    assert [a for a in out_argv if "[REDACTED:" not in a] == [a for a in argv if secret not in a]


def test_a_redacted_argv_keeps_its_strings_and_marks_only_the_value() -> None:
    out = Redactor().value({"command": ["curl", "-u", "admin:Cu8r Lp4!wQz", "https://x.io"]})
    assert out["command"] == ["curl", "-u", "[REDACTED:curl-auth-user]", "https://x.io"]
    out = Redactor().value({"args": ["docker", "login", "-p", "Dk7eRt5yUi3o", "reg.io"]})
    assert out["args"] == ["docker", "login", "-p", "[REDACTED:password-flag]", "reg.io"]
    out = Redactor().value({"args": ["curl", "-b", "a=1; sid=Ck3oKi9eSx1d", "https://x.io"]})
    assert out["args"] == ["curl", "-b", "a=[REDACTED:cookie]", "https://x.io"]


@pytest.mark.parametrize(("command", "secret"), COOKIE_COMMANDS)
def test_a_cookie_given_to_curl_by_flag_is_redacted(command: str, secret: str) -> None:
    redactor = Redactor()
    out = redactor.text(command)
    assert secret not in out and "=[REDACTED:cookie]" in out, out
    assert redactor.counts == {"cookie": 1}


@pytest.mark.parametrize(
    ("command", "secret"),
    [
        ("deploy --access-token At2kSd7fGh4j --env prod", "At2kSd7fGh4j"),
        ("app migrate --db-password=Db4pWd9sQx2z", "Db4pWd9sQx2z"),
        ("psql-admin --password 'correct horse 9battery'", "horse 9battery"),
    ],
)
def test_a_secret_flag_with_a_prefix_or_a_quoted_phrase_is_redacted(
    command: str, secret: str
) -> None:
    redactor = Redactor()
    assert secret not in redactor.text(command)
    assert redactor.counts == {"password-flag": 1}


@pytest.mark.parametrize("argv", KEPT_ARGVS)
def test_an_argv_without_a_secret_stays(argv: list[str]) -> None:
    record = {"payload": {"action": {"command": argv}, "input_tokens": 3}}
    raw = json.dumps(record, separators=(",", ":")).encode()
    assert Redactor().record(raw, record) == record
    arguments = {"payload": {"arguments": json.dumps({"command": argv})}}
    redactor = Redactor()
    assert redactor.value(arguments) == arguments and not redactor.counts


@pytest.mark.parametrize("command", KEPT_COMMANDS)
def test_a_command_without_a_cookie_value_stays(command: str) -> None:
    assert Redactor().text(command) == command


def _codex_rollout(path: Path) -> Path:
    """A Codex rollout whose shell calls give argvs: in ``arguments`` (JSON text) as the
    ``shell`` tool writes them, and as ``local_shell_call``'s ``action``."""

    def line(kind: str, payload: dict[str, object]) -> dict[str, object]:
        return {"timestamp": "2025-11-17T21:30:28.664Z", "type": kind, "payload": payload}

    records = [
        line("session_meta", {"id": SID, "cwd": "/srv/app", "cli_version": "0.58.0"}),
        line("event_msg", {"type": "user_message", "message": "log in and check the app"}),
    ]
    argvs = [argv for argv, _, _ in ARGVS] + KEPT_ARGVS
    argvs += [["bash", "-lc", command] for command, _ in COOKIE_COMMANDS[:5]]
    for n, argv in enumerate(argvs):
        arguments = json.dumps({"command": argv, "workdir": "/srv/app"}, separators=(",", ":"))
        call = {"type": "function_call", "name": "shell", "arguments": arguments}
        records.append(line("response_item", {**call, "call_id": f"c{n}"}))
        output = {"type": "function_call_output", "call_id": f"c{n}"}
        records.append(line("response_item", {**output, "output": '{"output":"ok"}'}))
    action = {"type": "exec", "command": ["docker", "login", "-p", "Lc1sHe2lLq3w", "reg.io"]}
    records.append(
        line(
            "response_item",
            {"type": "local_shell_call", "call_id": "l1", "status": "completed", "action": action},
        )
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def _ingest_and_show(root: Path, path: Path, session: str, *tool: str) -> dict[str, bytes]:
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", *tool, str(path), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["failures"] == [], done.stderr
    shown = run_cli(root, "sessions", "show", session)
    as_json = run_cli(root, "sessions", "show", session, "--json")
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr
    return {"line": stored(root), "show": shown.stdout.encode(), "json": as_json.stdout.encode()}


def test_codex_argv_calls_keep_no_secret_in_the_line_or_show(tmp_path: Path) -> None:
    path = _codex_rollout(tmp_path / f"rollout-2025-11-17T21-30-28-{SID}.jsonl")
    blobs = _ingest_and_show(tmp_path / "p", path, SID, "--tool", "codex")
    secrets = [s for _, s, _ in ARGVS] + [s for _, s in COOKIE_COMMANDS] + ["Lc1sHe2lLq3w"]
    for secret in secrets:
        for where, blob in blobs.items():
            assert not any(form in blob for form in _forms(secret)), (secret, where)
    assert b"[REDACTED:password-flag]" in blobs["line"] and b"=[REDACTED:cookie]" in blobs["line"]
    shown = blobs["show"].decode()
    for marker in ("password-flag", "curl-auth-user", "cookie"):
        assert f"[REDACTED:{marker}]" in shown, marker
    calls = [i for i in json.loads(blobs["json"])["items"] if i["kind"] == "tool_call"]
    commands = [c["input"]["command"] for c in calls if isinstance(c["input"], dict)]
    assert commands[0] == ["mysql", "-h", "db", "--password", "[REDACTED:password-flag]", "app"]
    for argv in KEPT_ARGVS:  # what holds no secret is stored as the tool wrote it
        assert argv in commands, argv


def test_an_mcp_call_with_args_keeps_no_secret(tmp_path: Path) -> None:
    """A Claude Code tool call whose input holds an argv as a JSON array on the line."""
    args = ["login", "-u", "octo", "-p", "Mc5pLo8kIj2u", "ghcr.io"]
    use = {"type": "tool_use", "id": "toolu_1", "name": "mcp__docker__run"}
    records = [
        claude_line("user", "u1", "log in to the registry"),
        claude_line("assistant", "a1", [{**use, "input": {"command": "docker", "args": args}}]),
        claude_line(
            "assistant",
            "a2",
            [{**use, "id": "toolu_2", "input": {"args": ["curl", "-b", "sid=Ck3oKi9eSx1d", "x"]}}],
        ),
    ]
    path = write_jsonl(tmp_path / "home" / f"{CLAUDE_SID}.jsonl", records)
    blobs = _ingest_and_show(tmp_path / "p", path, CLAUDE_SID, "--tool", "claude")
    for secret in ("Mc5pLo8kIj2u", "Ck3oKi9eSx1d"):
        for where, blob in blobs.items():
            assert not any(form in blob for form in _forms(secret)), (secret, where)
    assert b'"-p", "[REDACTED:password-flag]"' in blobs["line"].replace(b'","', b'", "')
    assert b"sid=[REDACTED:cookie]" in blobs["line"]
