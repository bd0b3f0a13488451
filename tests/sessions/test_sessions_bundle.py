"""Continuation bundles from the real transcript fixtures: deterministic, fitted to a
budget with every omission named, merged by scope and topic, and honest when not ready."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lifeline.errors import NotFound
from lifeline.sessions.bundles.bundle import SliceKind
from lifeline.sessions.bundles.merge import groups_of, slug
from lifeline.sessions.bundles.resume import BundleRequest, NotReady, build_bundle
from lifeline.sessions.bundles.unfinished import unfinished
from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.ingest.service import ingest_sources, sources_in
from lifeline.truth.budget import Budget, estimate_tokens
from tests.support.sessions_support import (
    claude_line,
    codex_line,
    lay_out_home,
    open_ingester,
    write_jsonl,
)

CODEX_CRASHED = "019a93b9-f380-7600-98ff-940e6b99603c"
SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
NEVER_USED = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
SAME_FIRST_LINE = (
    "71c9afe9-d9cc-4583-86b3-e62ba682b83a",
    "b45ad5d8-81fb-4bcb-baba-19d9f503d731",
    "cbc0f75b-b36d-4efd-a7da-ac800ea30eb6",
)


async def _catalogue(root: Path, paths: list[Path]) -> Catalogue:
    async with open_ingester(root) as ingester:
        await ingest_sources(ingester, sources_in(paths))
    from lifeline.store.sqlite import SqliteStore

    store = await SqliteStore.open(root / "sessions.db", create=False)
    return await Catalogue(store).load()


def _home_files(home: Path) -> list[Path]:
    lay_out_home(home)
    return sorted(p for p in home.rglob("*") if p.suffix in (".jsonl", ".json"))


@pytest.fixture
async def fixtures(tmp_path: Path) -> Catalogue:
    catalogue = await _catalogue(tmp_path / "line", _home_files(tmp_path / "home"))
    yield catalogue  # type: ignore[misc]
    await catalogue.store.close()


async def test_same_sessions_give_byte_identical_bundles_whatever_the_ingest_order(
    tmp_path: Path, fixtures: Catalogue
) -> None:
    files = list(reversed(_home_files(tmp_path / "home2")))
    other = await _catalogue(tmp_path / "other", files)
    try:
        for ref in (SPOTTER, CODEX_CRASHED):
            for fmt in ("md", "json"):
                req = BundleRequest(ref=ref, format=fmt, budget=Budget(3000, "tokens"))
                _, one = await build_bundle(fixtures, req)
                _, two = await build_bundle(other, req)
                _, again = await build_bundle(fixtures, req)
                assert one == two == again
    finally:
        await other.store.close()


async def test_a_crashed_codex_session_carries_its_outstanding_work(fixtures: Catalogue) -> None:
    _, text = await build_bundle(fixtures, BundleRequest(ref=CODEX_CRASHED, format="json"))
    data = json.loads(text)
    assert [s["kind"] for s in data["slices"]] == [k.value for k in SliceKind]
    acceptance = data["slices"][0]["fields"]
    assert acceptance["ready"] is True and acceptance["user_turns"] == 1
    worklog = next(s for s in data["slices"] if s["kind"] == "worklog")["groups"]
    assert {f["label"] for f in worklog["outstanding"]} == {"in_progress", "pending"}
    assert worklog["queued_input"][0]["label"] == "unanswered"
    intent = next(s for s in data["slices"] if s["kind"] == "intent")["groups"]
    assert intent["goal"][0]["text"].startswith("finish up the users work")
    sources = next(s for s in data["slices"] if s["kind"] == "provenance")["sources"]
    for ref in intent["goal"][0]["src"] + worklog["outstanding"][0]["src"]:
        assert sources[ref]["tool"] == "codex" and len(sources[ref]["sha256"]) == 64
    for piece in data["slices"]:  # every slice's estimate is that of its own markdown
        assert piece["tokens"] > 0
    assert data["tokens"] == estimate_tokens(
        (await build_bundle(fixtures, BundleRequest(ref=CODEX_CRASHED)))[1]
    )


@pytest.mark.parametrize(("limit", "unit"), [(200, "tokens"), (800, "tokens"), (3000, "chars")])
async def test_a_bundle_fits_its_budget_and_names_what_it_dropped(
    fixtures: Catalogue, limit: int, unit: str
) -> None:
    budget = Budget(limit, unit)
    whole, full = await build_bundle(fixtures, BundleRequest(ref=SPOTTER))
    bundle, text = await build_bundle(fixtures, BundleRequest(ref=SPOTTER, budget=budget))
    assert budget.measure()(full) > limit  # the case needs shrinking
    fits = budget.measure()(text) <= limit
    assert bundle.slices[SliceKind.ACCEPTANCE].fields["scope_sized"] is fits
    if limit >= 800:
        assert fits
    assert "[omitted " in text and "to fit the budget" in text
    intent = bundle.slices[SliceKind.INTENT].groups
    assert intent["goal"][0].text == "Implement spotter-gqc" and intent["latest"]
    dropped = sum(o.count for s in bundle.slices.values() for o in s.omitted.values())
    kept = len(bundle.facts())
    assert kept + dropped == len(whole.facts())  # nothing disappears without a count


async def test_not_ready_is_an_answer_with_the_reason(fixtures: Catalogue) -> None:
    with pytest.raises(NotReady) as caught:
        await build_bundle(fixtures, BundleRequest(ref=NEVER_USED))
    assert "no real user turn" in str(caught.value)
    assert caught.value.bundle is not None and not caught.value.bundle.ready
    assert caught.value.text.startswith("## Acceptance") and "- ready: no" in caught.value.text
    assert "## Intent" not in caught.value.text  # never an invented bundle
    with pytest.raises(NotReady, match="no sessions in scope"):
        await build_bundle(fixtures, BundleRequest(scope="path:/nowhere"))
    with pytest.raises(NotFound, match="no session"):
        await build_bundle(fixtures, BundleRequest(ref="ffffffff"))


async def test_three_sessions_sharing_a_first_line_are_three_topics(fixtures: Catalogue) -> None:
    sessions = [s for s in fixtures.summaries() if s.native_id in SAME_FIRST_LINE]
    assert len(sessions) == 3 and len({s.scope for s in sessions}) == 1
    groups = [g for g in groups_of(sessions)]
    assert len(groups) == 3  # the shared line is an injected caveat, not what was asked
    bundle, _ = await build_bundle(fixtures, BundleRequest(scope=sessions[0].scope))
    dedup = bundle.slices[SliceKind.DEDUP]
    assert len(dedup.groups["other_topics"]) == 3  # a fourth session shares the folder


def _pair(home: Path, prompt: str) -> list[Path]:
    cwd = "/srv/checkouts/acme-api"
    claude = write_jsonl(
        home / "c" / "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl",
        [
            claude_line("user", "u1", prompt, cwd=cwd),
            claude_line("user", "u2", "Never touch migrations/0001_init.sql.", cwd=cwd),
            claude_line(
                "assistant",
                "a1",
                [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}],
                cwd=cwd,
            ),
        ],
    )
    codex = write_jsonl(
        home / "x" / "rollout-2026-06-16T10-00-00-7f3c2a10-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl",
        [
            codex_line(
                "session_meta",
                {"id": "7f3c2a10-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "cwd": cwd, "cli_version": "0.58.0"},
            ),
            codex_line("event_msg", {"type": "user_message", "message": prompt}),
            codex_line("event_msg", {"type": "user_message", "message": "Tests must pass."}),
        ],
    )
    return [claude, codex]


async def test_sessions_of_one_scope_and_topic_fold_into_one_bundle(tmp_path: Path) -> None:
    paths = _pair(tmp_path / "t", "Add rate limiting to /login.")
    catalogue = await _catalogue(tmp_path / "line", paths)
    try:
        ids = sorted(catalogue.sessions)
        assert (
            len(ids) == 2 and slug("Add rate limiting to /login.") == "add-rate-limiting-to-login"
        )
        bundle, _ = await build_bundle(catalogue, BundleRequest(ref=ids[0]))
        manifest = bundle.slices[SliceKind.DEDUP].groups["manifest"]
        assert sorted(f.text.split()[0] for f in manifest) == ids
        assert bundle.slices[SliceKind.ACCEPTANCE].fields["user_turns"] == 4
        contract = bundle.slices[SliceKind.CONTRACT].groups
        assert [f.text for f in contract["do_not_touch"]] == ["migrations/0001_init.sql"]
        assert [f.text for f in contract["success_criteria"]] == ["Tests must pass."]
        worklog = bundle.slices[SliceKind.WORKLOG].groups
        assert [f.text for f in worklog["unanswered_calls"]] == ["Bash(pytest)"]
        intent = bundle.slices[SliceKind.INTENT].groups
        assert intent["goal"][0].text == "Add rate limiting to /login."  # said twice, once here
        assert [f.text for f in intent["history"]] == ["Tests must pass."]
        assert intent["latest"][0].text == "Never touch migrations/0001_init.sql."
        same, _ = await build_bundle(catalogue, BundleRequest(ref=ids[1]))
        assert same.key == bundle.key

        alone, _ = await build_bundle(catalogue, BundleRequest(ref=ids[0], exclude=(ids[1],)))
        assert len(alone.slices[SliceKind.DEDUP].groups["manifest"]) == 1
        assert alone.slices[SliceKind.DEDUP].fields["excluded"] == [ids[1]]
        assert alone.key == bundle.key  # reversible: the same key, one member fewer
        with pytest.raises(NotFound, match="ambiguous"):  # both native ids start so
            await build_bundle(catalogue, BundleRequest(ref="7f3c2a10"))
    finally:
        await catalogue.store.close()


async def test_unfinished_lists_lost_work_newest_first(fixtures: Catalogue) -> None:
    found = await unfinished(fixtures)
    states = {u.session.native_id: u.state for u in found}
    assert states[CODEX_CRASHED] == "crashed"
    assert NEVER_USED not in states and SPOTTER not in states
    assert set(states.values()) <= {"crashed", "interrupted", "abandoned"}
    times = [u.session.facts.last_activity or "" for u in found]
    assert times == sorted(times, reverse=True)
    codex = next(u for u in found if u.session.native_id == CODEX_CRASHED)
    assert len(codex.outstanding["outstanding"]) == 2
    assert all(not u.session.facts.agent_id for u in found)
