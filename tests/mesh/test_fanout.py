"""Bounded fan-out on a LAN (decision 0067): each node keeps at most six of the nodes it
discovers, both ends of every link agree, and the overlay stays connected with a small
diameter. Pure: the ring and the LAN view, no I/O."""

from __future__ import annotations

import secrets
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline_mesh.discovery.advert import PeerFound
from lifeline_mesh.peering.fanout import FANOUT_OFFSETS, LanView, neighbours
from lifeline_mesh.peering.schedule import Planner, SchedulePolicy
from lifeline_mesh.peering.table import PeerAddress, PeerTable


def _ids(n: int) -> list[str]:
    return [f"node-{secrets.token_hex(4)}" for _ in range(n)]


def _graph(ids: list[str]) -> dict[str, set[str]]:
    return {a: neighbours(a, [b for b in ids if b != a]) for a in ids}


def _diameter(graph: dict[str, set[str]]) -> int:
    worst = 0
    for start in graph:
        seen = {start: 0}
        queue = deque([start])
        while queue:
            at = queue.popleft()
            for nxt in graph[at]:
                if nxt not in seen:
                    seen[nxt] = seen[at] + 1
                    queue.append(nxt)
        assert len(seen) == len(graph), "the overlay is not connected"
        worst = max(worst, max(seen.values()))
    return worst


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=80))
def test_links_are_chosen_by_both_ends_and_bounded(n: int) -> None:
    graph = _graph(_ids(n))
    for a, kept in graph.items():
        assert len(kept) <= 2 * len(FANOUT_OFFSETS)
        for b in kept:
            assert a in graph[b], "a link one end keeps and the other does not"
    if n <= 2 * len(FANOUT_OFFSETS) + 1:
        assert all(len(kept) == n - 1 for kept in graph.values())


def test_connected_with_a_small_diameter_at_team_sizes() -> None:
    for n, most in ((5, 1), (10, 2), (30, 3), (50, 4)):
        graph = _graph(_ids(n))
        assert _diameter(graph) <= most, n
        assert max(len(k) for k in graph.values()) <= 6


def _found(node: str) -> PeerFound:
    return PeerFound(node, ("10.0.0.1",), 7420)


def test_the_lan_view_adds_and_drops_as_nodes_come_and_go() -> None:
    ids = _ids(30)
    view = LanView(ids[0])
    kept: set[str] = set()
    for other in ids[1:]:
        add, drop = view.found(_found(other))
        kept |= {f.node_id for f in add}
        kept -= set(drop)
    assert kept == view.kept == neighbours(ids[0], ids[1:])
    assert len(kept) == 6
    # A kept node announcing itself again is tried again; one not kept is not added.
    one = sorted(kept)[0]
    assert view.found(_found(one)) == ([_found(one)], [])
    other = next(i for i in ids[1:] if i not in kept)
    assert view.found(_found(other)) == ([], [])
    # A kept node leaving is dropped and another takes its place.
    add, drop = view.lost(one)
    assert one in drop
    assert view.kept == neighbours(ids[0], [i for i in ids[1:] if i != one])
    assert {f.node_id for f in add} == view.kept - (kept - {one})


def test_rows_taken_from_a_peer_count_as_held_by_it_only_when_contiguous() -> None:
    table = PeerTable()
    peer = table.add_static(PeerAddress("10.0.0.2", 7420))
    planner = Planner(table, SchedulePolicy(), lambda: 0.0)
    planner.took(peer.key, "ledger", (10, 12))
    assert peer.synced == {}  # what it held before is unknown: still unknown
    peer.synced["ledger"] = 10
    planner.took(peer.key, "ledger", (10, 12))
    assert peer.synced == {"ledger": 12}
    planner.took(peer.key, "ledger", (14, 15))  # a gap (rows 13-14 from elsewhere)
    assert peer.synced == {"ledger": 12}
    # The change those rows make here wakes no session back to the peer that sent them.
    assert planner.local_change(0.0, {"ledger": 12}) == []
