"""`lifeline-mesh init|id|verify` and the signing hook, run as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from tests.support.notary_corpus import CASES, build


def _run(module: str, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LIFELINE_AUTHOR": "alice"}
    cmd = [sys.executable, "-m", module, "--root", str(root), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


def _verify_json(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = _run("lifeline_mesh", root, "verify", "--json", *args)
    return done.returncode, json.loads(done.stdout)


def test_init_id_and_signed_writes(tmp_path: Path) -> None:
    assert _run("lifeline", tmp_path, "init").returncode == 0
    first = _run("lifeline", tmp_path, "log", "--kind", "note", "--summary", "before identity")
    assert first.returncode == 0, first.stderr
    created = _run("lifeline_mesh", tmp_path, "init")
    assert created.returncode == 0 and "created node identity" in created.stdout
    assert NodeHome(tmp_path).key_path.stat().st_mode & 0o777 == 0o600
    node_id = _run("lifeline_mesh", tmp_path, "id").stdout.strip()
    assert node_id in created.stdout
    assert NodeHome(tmp_path).key_path.read_text().strip() not in created.stdout + node_id
    again = _run("lifeline_mesh", tmp_path, "init")
    assert "already exists" in again.stdout and node_id in again.stdout
    second = _run("lifeline", tmp_path, "log", "--kind", "decision", "--summary", "signed")
    assert second.returncode == 0, second.stderr

    # The line's node signs what it writes: an entry without a signature fails by default
    # (decision 0048); written before the identity, it passes as a note when allowed.
    code, report = _verify_json(tmp_path)
    line = report["lines"][0]
    assert code == 1 and not report["ok"] and report["node_id"] == node_id
    assert (line["signed"], line["unsigned"]) == (1, 1)
    unsigned = [f for f in line["findings"] if f["check"] == "unsigned"]
    assert [f["subject"] for f in unsigned] == [first.stdout.strip()]
    assert unsigned[0]["severity"] == "fail" and "--allow-unsigned" in unsigned[0]["detail"]
    human = _run("lifeline_mesh", tmp_path, "verify")
    assert human.returncode == 1 and "--allow-unsigned" in human.stdout

    code, report = _verify_json(tmp_path, "--allow-unsigned")
    line = report["lines"][0]
    assert code == 0 and report["ok"]
    [note] = [f for f in line["findings"] if f["check"] == "unsigned"]
    assert note["severity"] == "note"
    human = _run("lifeline_mesh", tmp_path, "verify", "--allow-unsigned")
    assert human.returncode == 0 and human.stdout.startswith("OK")
    assert "--require-signed" in human.stdout
    code, report = _verify_json(tmp_path, "--require-signed", "--allow-unsigned")
    assert code == 1 and not report["ok"]


def test_id_without_identity_says_how_to_create_one(tmp_path: Path) -> None:
    done = _run("lifeline_mesh", tmp_path, "id")
    assert done.returncode == 2 and "lifeline-mesh init" in done.stderr


def test_bad_skew_is_a_clear_usage_error(tmp_path: Path) -> None:
    done = _run("lifeline_mesh", tmp_path, "verify", "--skew", "soon")
    assert done.returncode == 2 and "'soon' is not a number of seconds" in done.stderr


async def test_verify_names_several_forgeries_and_leads_with_them(tmp_path: Path) -> None:
    corpus = await build(tmp_path)
    expected: set[str] = set()
    async with await SqliteStore.open(corpus.path) as store:
        for name in ("ts-edited", "non-member-signature", "signature-copied", "truncated"):
            expected |= await CASES[name](corpus, store)
    code, report = _verify_json(tmp_path)
    checks = {f["check"] for f in report["lines"][0]["findings"] if f["severity"] == "fail"}
    assert code == 1 and checks == expected
    human = _run("lifeline_mesh", tmp_path, "verify", "--line", "ledger")
    assert human.returncode == 1
    assert human.stdout.startswith("FAILED:")
    for check in expected:
        assert check in human.stdout


async def test_skew_option_changes_the_verdict(tmp_path: Path) -> None:
    corpus = await build(tmp_path)
    async with await SqliteStore.open(corpus.path) as store:
        await CASES["future-dated"](corpus, store)  # claims 2 h after its first witness
    assert _verify_json(tmp_path)[0] == 1
    assert _verify_json(tmp_path, "--skew", "10000")[0] == 0


async def test_imported_lifeline_context_entries_are_unsigned_not_forged(
    tmp_path: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    lines = {name: [Entry.from_dict(row) for row in rows] for name, rows in lc_expected.items()}
    home = {e.id: name for name, entries in lines.items() for e in entries}
    Home(tmp_path).line_path("ledger").parent.mkdir(parents=True)
    for name, entries in lines.items():
        async with await SqliteStore.open(Home(tmp_path).line_path(name)) as store:
            for parent in {p for e in entries for p in e.parents if home[p] != name}:
                await store.declare_external(parent, home[parent])
            await store.append_many(entries)
    imported = lines["ledger"]
    assert _run("lifeline_mesh", tmp_path, "init").returncode == 0
    assert (
        _run("lifeline", tmp_path, "log", "--kind", "note", "--summary", "joined").returncode == 0
    )
    code, report = _verify_json(tmp_path, "--line", "ledger")
    assert code == 1  # a line its node signs: unsigned entries fail unless allowed
    code, report = _verify_json(tmp_path, "--line", "ledger", "--allow-unsigned")
    line = report["lines"][0]
    assert code == 0, line["findings"]
    assert (line["signed"], line["unsigned"]) == (1, len(imported))
    assert {(f["check"], f["severity"]) for f in line["findings"]} == {("unsigned", "note")}


def test_sign_unsigned_attests_custody_not_authorship(tmp_path: Path) -> None:
    assert _run("lifeline", tmp_path, "init").returncode == 0
    old = [
        _run("lifeline", tmp_path, "log", "--kind", "note", "--summary", f"old {k}").stdout.strip()
        for k in range(2)
    ]
    refused = _run("lifeline_mesh", tmp_path, "sign", "--unsigned")
    assert refused.returncode != 0 and "lifeline-mesh init" in refused.stderr  # no identity
    assert _run("lifeline_mesh", tmp_path, "init").returncode == 0
    _run("lifeline", tmp_path, "log", "--kind", "decision", "--summary", "signed")
    bare = _run("lifeline_mesh", tmp_path, "sign")
    assert bare.returncode == 2 and "--unsigned" in bare.stderr
    done = _run("lifeline_mesh", tmp_path, "sign", "--unsigned", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == {"ledger": 2}
    again = json.loads(_run("lifeline_mesh", tmp_path, "sign", "--unsigned", "--json").stdout)
    assert again["imported"] == {"ledger": 0}  # each entry is attested once

    code, report = _verify_json(tmp_path, "--require-signed")
    line = report["lines"][0]
    assert code == 0 and (line["signed"], line["imported"], line["unsigned"]) == (1, 2, 0)
    imported = sorted(f["subject"] for f in line["findings"] if f["check"] == "imported")
    assert imported == sorted(old)
    assert all("not authored" in f["detail"] for f in line["findings"])
    text = _run("lifeline_mesh", tmp_path, "verify").stdout
    assert "1 signed, 2 imported, 0 unsigned" in text
