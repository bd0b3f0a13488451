"""`lifeline relate` and `graph`: relations in lifeline-context's shape, in force only,
queried by relation, direction and depth."""

from __future__ import annotations

import json
from pathlib import Path

from lifeline.entry import Entry
from lifeline.truth.graph import Graph, relation_body, relation_of
from tests.support.clirun import lifeline


def _ok(root: Path, *args: str) -> str:
    done = lifeline(root, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_relation_shape_and_parsing() -> None:
    a, b = "a" * 64, "b" * 64
    body = relation_body("depends_on", a, b)
    assert body == f"rel: depends_on\nfrom: {a}\nto: {b}"  # lifeline-context's shape
    rel = Entry.create(
        ts="2026-01-01T00:00:00Z", kind="relation", summary="s", body=body, parents=(a, b)
    )
    edge = relation_of(rel)
    assert edge is not None and (edge.rel, edge.source, edge.target) == ("depends_on", a, b)
    stray = Entry.create(
        ts="2026-01-01T00:00:00Z", kind="relation", summary="s", body=body, parents=(a,)
    )
    assert relation_of(stray) is None  # its ends must be its parents
    assert Graph([rel], {rel.id: "x"}).edges == []  # superseded: gone


def test_relate_and_query(tmp_path: Path) -> None:
    _ok(tmp_path, "init")
    db = _ok(tmp_path, "log", "--kind", "service", "--summary", "postgres").strip()
    api = _ok(tmp_path, "log", "--kind", "api", "--summary", "payments API").strip()
    tests = _ok(tmp_path, "log", "--kind", "test", "--summary", "payments contract tests").strip()
    dep = json.loads(_ok(tmp_path, "relate", api[:10], "depends_on", db[:10], "--json"))
    assert dep["summary"] == f"depends_on: {api[:8]} → {db[:8]}"
    assert dep["parents"] == sorted([api, db])
    _ok(tmp_path, "relate", tests, "tests_covers", api)
    around = json.loads(_ok(tmp_path, "graph", api, "--json"))
    assert [(e["direction"], e["rel"], e["other"]) for e in around["edges"]] == [
        ("out", "depends_on", db),
        ("in", "tests_covers", tests),
    ]
    far = json.loads(_ok(tmp_path, "graph", db, "--direction", "in", "--depth", "0", "--json"))
    assert [(e["hop"], e["other"]) for e in far["edges"]] == [(1, api), (2, tests)]
    only = json.loads(
        _ok(
            tmp_path,
            "graph",
            db,
            "--direction",
            "in",
            "--depth",
            "0",
            "--rel",
            "depends_on",
            "--json",
        )
    )
    assert [e["other"] for e in only["edges"]] == [api]
    assert "depends_on → " in _ok(tmp_path, "graph", api)
    _ok(tmp_path, "correct", dep["id"], "--summary", "no longer depends on postgres")
    after = json.loads(_ok(tmp_path, "graph", api, "--json"))
    assert [e["rel"] for e in after["edges"]] == ["tests_covers"]
    bad = lifeline(tmp_path, "relate", api, "owns", db)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
