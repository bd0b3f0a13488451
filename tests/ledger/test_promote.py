"""`lifeline promote` and `where`: copies anchored to their origin, the same id
lifeline-context's promote gave, idempotent; where finds an entry and its copies."""

from __future__ import annotations

import json
from pathlib import Path

from lifeline.promote import origin_of
from tests.support.clirun import lifeline

RESEARCH = "49bc1aa4e93b4610afafe9c2794e24987422709c62617d4a003bd1195b2808d0"
PROMOTED_BY_LC = "6063ab410829ecc1ae79194e5a24d1731736d834a5078e418007ddcf0495fdfa"


def _ok(root: Path, *args: str) -> str:
    done = lifeline(root, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_copy_has_the_id_lifeline_context_gave_it(tmp_path: Path, lc_fixture: Path) -> None:
    _ok(tmp_path, "import", str(lc_fixture))
    out = json.loads(
        _ok(tmp_path, "--line", "research", "promote", RESEARCH[:10], "--to", "ledger", "--json")
    )
    assert [(c["id"], c["new"]) for c in out] == [(PROMOTED_BY_LC, False)]  # already imported
    assert origin_of(out[0]["body"]) == ("research", RESEARCH) and out[0]["parents"] == []
    where = json.loads(_ok(tmp_path, "where", RESEARCH[:8], "--json"))
    assert where["found"] == [
        {"line": "ledger", "id": PROMOTED_BY_LC, "as": "copy"},
        {"line": "research", "id": RESEARCH, "as": "entry"},
    ]
    text = _ok(tmp_path, "where", PROMOTED_BY_LC[:12])
    assert text.splitlines() == [PROMOTED_BY_LC, "  ledger: the entry"]


def test_promote_by_kind_is_idempotent_and_refuses_what_makes_no_sense(tmp_path: Path) -> None:
    _ok(tmp_path, "--line", "spike", "init")
    first = _ok(
        tmp_path, "--line", "spike", "log", "--kind", "decision", "--summary", "Use A", "--json"
    )
    a = json.loads(first)["id"]
    _ok(tmp_path, "--line", "spike", "log", "--kind", "decision", "--summary", "Use B")
    fix = json.loads(_ok(tmp_path, "--line", "spike", "correct", a, "--summary", "Use C", "--json"))
    _ok(tmp_path, "--line", "spike", "log", "--kind", "note", "--summary", "aside")
    once = _ok(tmp_path, "--line", "spike", "promote", "--kind", "decision", "--to", "ledger")
    assert [line.split("  ")[1:] for line in once.splitlines()] == [["promoted", "Use B"]]
    again = _ok(tmp_path, "--line", "spike", "promote", "--kind", "decision", "--to", "ledger")
    assert "already there" in again
    for args, says in [
        (["promote", fix["id"], "--to", "ledger"], "is a correction"),
        (["promote", a, "--to", "spike"], "is the line the entries come from"),
        (["promote", a, "--kind", "note", "--to", "ledger"], "not both"),
        (["promote", "--kind", "fix", "--to", "ledger"], "no 'fix' entry in force"),
    ]:
        refused = lifeline(tmp_path, "--line", "spike", *args)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    missing = lifeline(tmp_path, "where", "abcdef12")
    assert missing.returncode == 2 and "no line under" in missing.stderr
