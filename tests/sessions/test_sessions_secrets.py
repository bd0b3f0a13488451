"""Secrets never reach the line (decision 0052): 81 made-up secrets of documented vendor formats
spliced into a copy of a real Claude Code transcript go through the real `lifeline sessions
ingest`; none of them, nor its tail, is in any byte of the line's files, the continuation
bundle, the OKF export or `show`. Code that only looks like a secret stays as it is. The
markers keep nothing of the secret: the same transcript with other secrets of the same
formats gives the same entries."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from lifeline.sessions.ingest.redact import Redactor
from lifeline.sessions.ingest.ruleset import RuleSet, _document, builtin_rules
from tests.sessions.secret_corpus import LOOK_ALIKES, secrets
from tests.support.sessions_support import FIXTURES, run_cli, stored

SOURCE = FIXTURES / "claude-code" / "marot__spotter__short.jsonl"
NAME = "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"


def _needles(secret: str) -> list[str]:
    """What must not be found: the secret, its tail, each of its lines."""
    found = [secret, secret[-10:]]
    found += [line for line in secret.splitlines() if len(line) >= 10]
    return found


def _splice(path: Path, seed: int) -> list[tuple[str, str, str]]:
    """A copy of a real transcript with the corpus in a prompt, a tool call's command, a
    tool result and an unknown record; the look-alikes in the first reply."""
    corpus = secrets(seed)
    joined = "\n".join(text for _, _, text in corpus)
    records = [json.loads(line) for line in SOURCE.read_text().splitlines()]
    prompt = next(r for r in records if r.get("type") == "user")
    prompt["message"]["content"] = "please deploy with these:\n" + joined
    reply = next(r for r in records if r.get("type") == "assistant")
    reply["message"]["content"][0]["text"] = "\n".join(LOOK_ALIKES)
    call = next(
        b
        for r in records
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    )
    call["input"] = {"command": joined, "description": "deploy"}
    result = next(
        b
        for r in records
        if r.get("type") == "user" and isinstance(r["message"]["content"], list)
        for b in r["message"]["content"]
        if b.get("type") == "tool_result"
    )
    result["content"] = [{"type": "text", "text": joined}]
    records.append({"type": "novel-record", "uuid": "n1", "payload": {"env": joined}})
    path.parent.mkdir(parents=True, exist_ok=True)
    # as Claude Code writes it: compact, non-ASCII as is (no \\u escapes)
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    )
    return corpus


def test_the_corpus_has_60_formats_and_each_is_redacted_in_place() -> None:
    corpus = secrets(1)
    assert len({name for name, _, _ in corpus}) >= 60
    for name, secret, text in corpus:
        redactor = Redactor()
        out = redactor.text(text)
        assert redactor.counts, name
        for needle in _needles(secret):
            assert needle not in out, (name, out)
        assert re.search(r"\[REDACTED:[a-z0-9-]+\]", out), name


def test_the_probe_on_raw_lines_misses_no_format() -> None:
    """A record is redacted string by string only when one scan of its raw line, escapes
    undone, finds something: that scan must find every format, however the line is written."""
    for name, secret, text in secrets(3):
        for record in (
            {"message": {"content": text}},
            {"input": {"command": "cd /srv && " + text, "description": "é"}},
            {"a": [1, {"b": text + "\tü"}], "text": "x"},
        ):
            for raw in (
                json.dumps(record, ensure_ascii=False, separators=(",", ":")),
                json.dumps(record, ensure_ascii=False, indent=1),
                json.dumps(record),  # \\u escapes: the record is walked instead
            ):
                out = Redactor().record(raw.encode(), json.loads(raw))
                dumped = json.dumps(out)
                for needle in _needles(secret):
                    assert json.dumps(needle)[1:-1] not in dumped, (name, raw[:80])


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_code_that_looks_like_a_secret_stays(text: str) -> None:
    redactor = Redactor()
    assert redactor.text(text) == text
    assert redactor.value({"text": text, "command": text}) == {"text": text, "command": text}


def test_every_rule_of_both_files_compiles_and_has_its_keywords() -> None:
    rules = builtin_rules()
    assert len(rules.rules) >= 200  # gitleaks' rules less the path-scoped and generic ones
    for rule in rules.rules:
        assert rule.regex is not None, rule.id
        assert all(k == k.lower() for k in rule.keywords), rule.id
    ids = {rule.id for rule in rules.rules}
    assert {"slack-webhook-url", "age-secret-key", "password-flag", "env-secret"} <= ids


def _ingest(tmp_path: Path, seed: int) -> tuple[Path, Path, list[tuple[str, str, str]]]:
    home = tmp_path / f"home{seed}"
    path = home / ".claude" / "projects" / "-home-marco-projects-spotter" / NAME
    corpus = _splice(path, seed)
    root = tmp_path / f"p{seed}"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", str(path), "--json", home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sum(report["redactions"].values()) >= 4 * len(corpus)  # four places, each format
    return root, home, corpus


def test_no_secret_reaches_the_line_the_bundle_the_export_or_show(tmp_path: Path) -> None:
    root, home, corpus = _ingest(tmp_path, 1)
    listed = json.loads(run_cli(root, "sessions", "list", "--json", home=home).stdout)
    (session,) = [row["id"] for row in listed]
    shown = run_cli(root, "sessions", "show", session, home=home)
    bundle = run_cli(root, "sessions", "resume", session, "--format", "json", home=home)
    assert shown.returncode == 0 and bundle.returncode in (0, 3), bundle.stderr
    out = tmp_path / "okf"
    exported = run_cli(root, "sessions", "export", "--okf", str(out), home=home)
    assert exported.returncode == 0, exported.stderr
    okf = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    blobs = {
        "line": stored(root),
        "show": shown.stdout.encode(),
        "bundle": bundle.stdout.encode(),
        "okf": okf,
    }
    assert b"[REDACTED:" in blobs["line"] and b"[REDACTED:" in blobs["show"]
    for name, secret, _ in corpus:
        for needle in _needles(secret):
            forms = {needle.encode(), json.dumps(needle)[1:-1].encode()}
            for where, blob in blobs.items():
                assert not any(form in blob for form in forms), (name, where)
    for text in LOOK_ALIKES:  # kept, in the stored reply and in show
        assert json.dumps(text)[1:-1].encode() in blobs["line"], text
        assert text in shown.stdout, text


def test_markers_keep_nothing_other_secrets_give_the_same_entries(tmp_path: Path) -> None:
    one, _, first = _ingest(tmp_path, 1)
    two, _, second = _ingest(tmp_path, 2)
    assert {s for _, s, _ in first}.isdisjoint({s for _, s, _ in second})
    rows = []
    for root in (one, two):
        with closing(sqlite3.connect(root / ".lifeline" / "sessions.db")) as db:
            rows.append(sorted(r[0] for r in db.execute("SELECT id FROM entries")))
    assert len(rows[0]) >= 3 and rows[0] == rows[1]


def test_the_alternation_of_the_picked_rules_drops_no_finding() -> None:
    """Decision 0080: once a set of rules has been picked often, one scan of their regexes'
    alternation stands before the scan of each rule. It may only skip texts where no rule
    of the set matches: every probe and every span list is the one each rule gives on its
    own, for every corpus format (alone, in a JSON line's view, beside look-alikes) and for
    the look-alikes, however many times a set is picked."""
    rules = RuleSet.load([_document("lifeline.toml"), _document("gitleaks.toml")])
    corpus = secrets(7)
    texts = [text for _, _, text in corpus] + list(LOOK_ALIKES)
    texts += [f'{{"input_tokens": 12, "text": "{t}"}}' for t in texts]
    texts += ["\n".join(t for _, _, t in corpus[i : i + 3]) for i in range(0, len(corpus), 3)]
    gated = 0
    for text in texts:
        raw = text.encode()
        low = raw.lower()
        fresh = RuleSet(rules.rules, rules.common)  # each rule scans on its own: a rare set
        probed, spans = fresh.probe(raw, low), fresh.spans(raw, low)
        for _ in range(20):  # past the count after which the set's alternation is compiled
            assert rules.probe(raw, low) == probed, text
            assert rules.spans(raw, low) == spans, text
        gated += len(rules.picked(low)) > 1
    assert gated > 20  # many texts pick several rules: the alternation is what ran
