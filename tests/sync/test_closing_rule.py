"""Whether a session ends with a closing round, decided on each side alone (decisions 0059,
0126): in memory, for every pair of rules a node may run (no round, a round after entries
moved, a round after any items moved) and what a session moved, both sides decide alike,
so neither waits for frames the other never sends."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.recon.session_state import CLOSING_ANY_CAPABILITY, CLOSING_CAPABILITY
from lifeline_mesh.sync import closing
from lifeline_mesh.testing.pair import MemorySet, SessionPair
from tests.support.recon_helpers import blob_set, chain, entry_set

RULES = {
    "none": dataclasses.replace(SessionLimits(), closing_round=False),  # before 0059
    "entries": dataclasses.replace(SessionLimits(), closing_any=False),  # before 0126
    "any": SessionLimits(),
}
BASE = chain(20, "base")
MOVES = {
    "nothing": ((blob_set([b"s"]), entry_set(BASE)), (blob_set([b"s"]), entry_set(BASE))),
    "statements": ((blob_set([b"s", b"t"]), entry_set(BASE)), (blob_set([b"s"]), entry_set(BASE))),
    "entries": ((blob_set([b"s"]), entry_set(BASE)), (blob_set([b"s"]), entry_set(BASE[:15]))),
}


@dataclasses.dataclass(frozen=True)
class _Named:
    name: str


SETS = [_Named("statements"), _Named("entries")]


def _expected(initiator: str, responder: str, moved: str) -> bool:
    if "none" in (initiator, responder) or moved == "nothing":
        return False
    return moved == "entries" or (initiator, responder) == ("any", "any")


def _copy(sets: tuple[MemorySet, ...]) -> list[MemorySet]:
    """Fresh sets holding what ``sets`` hold (a session adds to them)."""
    out = []
    for s in sets:
        fresh = MemorySet(s.codec)
        fresh.items = dict(s.items)
        out.append(fresh)
    return out


@pytest.mark.parametrize(
    ("initiator", "responder", "moved"), list(itertools.product(RULES, RULES, MOVES))
)
def test_both_sides_decide_the_closing_round_alike(
    initiator: str, responder: str, moved: str
) -> None:
    a, b = MOVES[moved]
    pair = SessionPair(
        _copy(a),
        _copy(b),
        names=("statements", "entries"),
        limits=RULES[initiator],
        limits_b=RULES[responder],
    )
    result = pair.run()
    assert result.errors == [] and result.done == 2
    decided = [closing.wanted(pair.sessions[side], SETS) for side in "ab"]  # type: ignore[arg-type]
    assert decided == [_expected(initiator, responder, moved)] * 2


def test_a_responder_names_closing_any_alone_to_an_initiator_that_offered_it() -> None:
    """``closing-any`` implies ``closing``: a responder answering an initiator that offered
    it names it alone (9 bytes fewer each hello); to an older one it names both."""
    for initiator, names in (
        ("any", (CLOSING_ANY_CAPABILITY,)),
        ("entries", (CLOSING_CAPABILITY, CLOSING_ANY_CAPABILITY)),
    ):
        pair = SessionPair(
            [entry_set(BASE)], [entry_set(BASE)], limits=RULES[initiator], limits_b=RULES["any"]
        )
        pair.run()
        hello = pair.sessions["a"].peer_hello
        assert hello is not None
        offered = tuple(c for c in hello.capabilities if c.startswith("closing"))
        assert offered == names
