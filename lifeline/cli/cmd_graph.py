"""`lifeline relate` and `graph`: typed relations between entries, and queries over them."""

from __future__ import annotations

import argparse
from typing import Any

from lifeline.cli.common import (
    Commands,
    add_json_option,
    default_author,
    home_of,
    open_line,
    print_json,
)
from lifeline.errors import ConfigError
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.truth.graph import RELATION_TYPES, Graph, relation_body
from lifeline.truth.snapshot import truth_source
from lifeline.wording import one_line

__all__ = ["register"]


def _depth(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 (no limit) or more")
    return value


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "relate", parents=[parent], help="record a typed relation between two entries"
    )
    p.add_argument(
        "source", metavar="FROM", help="id or prefix of the entry the relation starts at"
    )
    p.add_argument("rel", metavar="REL", choices=RELATION_TYPES, help=", ".join(RELATION_TYPES))
    p.add_argument("target", metavar="TO", help="id or prefix of the entry it points to")
    add_json_option(p, "print the stored entry as JSON")
    p.set_defaults(func=cmd_relate)

    p = sub.add_parser(
        "graph", parents=[parent], help="the relations in force around an entry (structured)"
    )
    p.add_argument("id", metavar="ID|PREFIX")
    p.add_argument("--rel", choices=RELATION_TYPES, help="only this relation")
    p.add_argument(
        "--direction",
        choices=["out", "in", "both"],
        default="both",
        help="out: what it points to (e.g. depends on); in: what points to it (default both)",
    )
    p.add_argument("--depth", type=_depth, default=1, help="hops to follow (0: all; default 1)")
    add_json_option(p)
    p.set_defaults(func=cmd_graph)


async def cmd_relate(args: argparse.Namespace) -> int:
    home = home_of(args)
    async with open_line(args) as store:
        source, target = await store.resolve(args.source), await store.resolve(args.target)
        if source.kind == "relation" or target.kind == "relation":
            raise ConfigError("a relation joins two entries, not another relation")
        draft = Draft(
            kind="relation",
            summary=f"{args.rel}: {source.id[:8]} → {target.id[:8]}",
            body=relation_body(args.rel, source.id, target.id),
            author=default_author(),
            parents=(source.id, target.id),
        )
        ledger = Ledger(store, hooks=load_append_hooks(home), limits=home.limits())
        entry, _new = await ledger.append(draft)
    print_json(entry.to_dict()) if args.json else print(entry.id)
    return 0


async def cmd_graph(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        node = await store.resolve(args.id)
        truth = await truth_source(store).superseded()
        graph = Graph([e async for e in store.stream() if e.kind == "relation"], truth.by)
        found = graph.around(node.id, rel=args.rel, direction=args.direction, depth=args.depth)
        ends = {
            e.id: e
            for e in await store.get_many({x for _h, _w, g in found for x in (g.source, g.target)})
        }
    rows: list[dict[str, Any]] = []
    for hop, way, edge in found:
        other = edge.target if way == "out" else edge.source
        rows.append(
            {
                "hop": hop,
                "direction": way,
                "rel": edge.rel,
                "from": edge.source,
                "to": edge.target,
                "relation": edge.relation_id,
                "other": other,
                "other_summary": ends[other].summary if other in ends else None,
                "other_superseded": truth.is_superseded(other),
            }
        )
    if args.json:
        print_json({"id": node.id, "summary": node.summary, "edges": rows})
        return 0
    _print_rows(node.id, node.summary, rows)
    return 0


def _print_rows(node_id: str, summary: str, rows: list[dict[str, Any]]) -> None:
    print(f"{node_id[:12]}  {one_line(summary)}")
    if not rows:
        print("  (no relation in force)")
    for row in rows:
        arrow = f"{row['rel']} →" if row["direction"] == "out" else f"← {row['rel']}"
        mark = " [superseded]" if row["other_superseded"] else ""
        pad = "  " * row["hop"]
        print(f"{pad}{arrow} {row['other'][:12]}{mark}  {one_line(row['other_summary'] or '?')}")
