"""Relays over a tree per origin (decision 0083): a peer that takes a tree's rows from
another is left out of that tree, and asks for every tree again when a call of its own
ends. The feed's side, without a network: what each Watch call's subscriber is sent."""

from __future__ import annotations

import functools

from lifeline_mesh.peering.changes import MAX_PRUNED_TREES, ChangeFeed
from lifeline_mesh.transport.announce import ChangeItems, tree_of

LINE = "ledger"
TREE_A, TREE_B = tree_of("node-a"), tree_of("node-b")


def _rows(n: int, tree: bytes, source: str | None = None) -> ChangeItems:
    return ChangeItems(LINE, (b"att%d" % n,), (b"entry%d" % n,), source=source, tree=tree)


async def _sent(sub: object) -> dict[str, ChangeItems]:
    """What ``sub`` is sent next, each line's runs taken together."""
    assert await sub.next(0.01) is not None  # type: ignore[attr-defined]
    runs: dict[str, list[ChangeItems]] = sub.take_items()  # type: ignore[attr-defined]
    return {line: functools.reduce(ChangeItems.then, changes) for line, changes in runs.items()}


async def test_a_pruned_tree_is_not_sent_to_that_watcher_until_it_grafts() -> None:
    feed = ChangeFeed(lambda: [LINE])
    with (
        feed.subscribe(items=True, node="node-c") as c,
        feed.subscribe(items=True, node="node-d") as d,
    ):
        feed.publish([LINE], _rows(1, TREE_A, source="node-a"))
        assert (await _sent(c))[LINE].entries == (b"entry1",)
        # c took a's rows from another peer first: it asks us to leave it out of a's tree
        feed.pruned("node-c", [TREE_A])
        feed.publish([LINE], _rows(2, TREE_A, source="node-a"))
        assert await c.next(0.01) == set()  # not even a plain announcement: no sync
        assert (await _sent(d))[LINE].entries == (b"entry1", b"entry2")
        # other trees still reach it, and so do rows whose tree is not known
        feed.publish([LINE], _rows(3, TREE_B))
        assert (await _sent(c))[LINE].tree == TREE_B
        feed.publish([LINE], _rows(4, b""))
        assert (await _sent(c))[LINE].entries == (b"entry4",)
        # a call of c's ended: it asks for every tree again
        feed.pruned("node-c", [], graft=True)
        feed.publish([LINE], _rows(5, TREE_A, source="node-a"))
        assert (await _sent(c))[LINE].entries == (b"entry5",)
        assert feed.relays["pruned"] == 1


async def test_merged_changes_of_two_trees_belong_to_neither() -> None:
    feed = ChangeFeed(lambda: [LINE])
    with feed.subscribe(items=True, node="node-c") as c:
        feed.publish([LINE], _rows(1, TREE_B))
        feed.publish([LINE], _rows(2, TREE_A))
        merged = (await _sent(c))[LINE]
        assert merged.entries == (b"entry1", b"entry2") and merged.tree == b""
        feed.pruned("node-c", [TREE_A])
        feed.publish([LINE], _rows(3, TREE_B))
        feed.publish([LINE], _rows(4, TREE_A))  # left out: c gets the first change only
        assert (await _sent(c))[LINE].entries == (b"entry3",)


async def test_prune_and_graft_requests_go_to_the_peer_s_own_call() -> None:
    feed = ChangeFeed(lambda: [LINE])
    with (
        feed.subscribe(items=True, node="node-b") as b,
        feed.subscribe(items=True, node="node-c") as c,
        feed.subscribe(items=True) as anonymous,
    ):
        assert feed.prune("node-b", TREE_A)
        assert not feed.prune("node-x", TREE_A)  # x does not watch us: nobody to ask
        assert await b.next(0.01) == set()  # woken for the request alone
        assert b.take_control() == ((TREE_A,), False)
        assert c.take_control() == ((), False)
        assert b.take_control() == ((), False)  # asked once
        feed.prune("node-b", TREE_B)
        feed.graft()  # a graft supersedes the prunes asked before it
        assert b.take_control() == ((), True)
        assert c.take_control() == ((), True)
        assert anonymous.take_control() == ((), False)
        assert feed.relays == {"prunes asked": 2, "grafts asked": 1, "pruned": 0}


def test_a_tree_is_named_by_its_origin() -> None:
    assert len(TREE_A) == 8 and TREE_A != TREE_B
    assert tree_of("node-a") == TREE_A
    assert tree_of(None) == b""


def test_a_watcher_cannot_grow_its_pruned_trees_without_bound() -> None:
    feed = ChangeFeed(lambda: [LINE])
    with feed.subscribe(items=True, node="node-r") as rogue:
        for n in range(3):
            feed.pruned("node-r", [tree_of(f"made-up-{n}-{k}") for k in range(2000)])
        assert len(rogue.pruned) == MAX_PRUNED_TREES
        feed.pruned("node-r", [], graft=True)
        assert rogue.pruned == set()
