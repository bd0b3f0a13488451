"""Typed relations between entries, and structured queries over them. Pure.

A relation is an entry of kind ``relation`` whose parents are its two ends and whose body
says which way it points — the shape lifeline-context 0.6.1 wrote, so its relations import
as they were and ours read back there with the same ids::

    rel: depends_on
    from: <64-hex id>
    to: <64-hex id>

Relations in force only: a relation superseded by a correction is gone, as a decision is.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from lifeline.entry import Entry

__all__ = ["RELATION_TYPES", "Edge", "Graph", "relation_body", "relation_of"]

RELATION_TYPES = ("depends_on", "implements", "tests_covers", "supersedes")
_BODY = re.compile(r"^rel: (\w+)\nfrom: ([0-9a-f]{64})\nto: ([0-9a-f]{64})$")


@dataclass(frozen=True, slots=True)
class Edge:
    rel: str
    source: str
    target: str
    relation_id: str


def relation_body(rel: str, source: str, target: str) -> str:
    if rel not in RELATION_TYPES:
        raise ValueError(f"unknown relation {rel!r}; use one of: {', '.join(RELATION_TYPES)}")
    return f"rel: {rel}\nfrom: {source}\nto: {target}"


def relation_of(entry: Entry) -> Edge | None:
    """The edge a relation entry declares (its ends must be its parents), or None."""
    if entry.kind != "relation":
        return None
    found = _BODY.match(entry.body)
    if not found or found.group(1) not in RELATION_TYPES:
        return None
    rel, source, target = found.groups()
    if {source, target} != set(entry.parents):
        return None
    return Edge(rel, source, target, entry.id)


class Graph:
    """The relations in force of one line."""

    def __init__(self, relations: Iterable[Entry], superseded: set[str] | dict[str, str]) -> None:
        self.edges = [
            edge
            for entry in relations
            if entry.id not in superseded and (edge := relation_of(entry)) is not None
        ]

    def around(
        self, node: str, *, rel: str | None = None, direction: str = "both", depth: int = 1
    ) -> list[tuple[int, str, Edge]]:
        """Edges reached from ``node`` within ``depth`` hops (0: no limit), breadth first:
        ``(hop, "out" | "in", edge)``; each edge once, in a deterministic order."""
        out_of: dict[str, list[Edge]] = {}
        into: dict[str, list[Edge]] = {}
        for edge in sorted(self.edges, key=lambda e: (e.rel, e.source, e.target, e.relation_id)):
            if rel is None or edge.rel == rel:
                out_of.setdefault(edge.source, []).append(edge)
                into.setdefault(edge.target, []).append(edge)
        found: list[tuple[int, str, Edge]] = []
        seen_nodes, seen_edges = {node}, set()
        queue = deque([(node, 0)])
        while queue:
            at, hop = queue.popleft()
            if depth and hop >= depth:
                continue
            steps = []
            if direction in ("out", "both"):
                steps += [("out", e, e.target) for e in out_of.get(at, [])]
            if direction in ("in", "both"):
                steps += [("in", e, e.source) for e in into.get(at, [])]
            for way, edge, nxt in steps:
                if edge.relation_id in seen_edges:
                    continue
                seen_edges.add(edge.relation_id)
                found.append((hop + 1, way, edge))
                if nxt not in seen_nodes:
                    seen_nodes.add(nxt)
                    queue.append((nxt, hop + 1))
        return found
