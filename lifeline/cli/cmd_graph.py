"""`lifeline relate` and `graph`: typed relations between entries, and queries over them."""

from __future__ import annotations

import argparse
from typing import Any

from lifeline.cli.common import (
    Commands,
    add_attribution,
    add_json_option,
    attribution,
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
        "source", metavar="FROM", nargs="?", help="id or prefix of the entry the relation starts at"
    )
    p.add_argument(
        "rel", metavar="REL", nargs="?", choices=RELATION_TYPES, help=", ".join(RELATION_TYPES)
    )
    p.add_argument("target", metavar="TO", nargs="?", help="id or prefix of the entry it points to")
    # lifeline-context's form: --from ID --to ID [--rel REL] (default depends_on)
    p.add_argument("--from", dest="from_id", metavar="ID", help="FROM, as an option")
    p.add_argument("--to", dest="to_id", metavar="ID", help="TO, as an option")
    p.add_argument(
        "--rel",
        dest="rel_opt",
        choices=RELATION_TYPES,
        help="REL, as an option (default depends_on)",
    )
    add_attribution(p)
    add_json_option(p, "print the stored entry as JSON")
    p.set_defaults(func=cmd_relate)

    p = sub.add_parser(
        "graph", parents=[parent], help="the relations in force around an entry (structured)"
    )
    p.add_argument("id", metavar="ID|PREFIX", nargs="?")
    # lifeline-context's form: one of these instead of ID
    around = p.add_mutually_exclusive_group()
    around.add_argument("--of", metavar="ID", help="ID, every relation touching it")
    around.add_argument(
        "--depends-on", metavar="ID", help="what ID depends on (--rel depends_on --direction out)"
    )
    around.add_argument(
        "--dependents", metavar="ID", help="what depends on ID (--rel depends_on --direction in)"
    )
    p.add_argument("--rel", choices=RELATION_TYPES, help="only this relation")
    p.add_argument(
        "--direction",
        choices=["out", "in", "both"],
        help="out: what it points to (e.g. depends on); in: what points to it (default both)",
    )
    p.add_argument("--depth", type=_depth, default=1, help="hops to follow (0: all; default 1)")
    add_json_option(p)
    p.set_defaults(func=cmd_graph)


def _relation_named(args: argparse.Namespace) -> tuple[str, str, str]:
    """(FROM, REL, TO), from the three words or from lifeline-context's options."""
    words = (args.source, args.rel, args.target)
    options = (args.from_id, args.rel_opt, args.to_id)
    if any(w is not None for w in words) and any(o is not None for o in options):
        raise ConfigError("give FROM REL TO, or --from ID --to ID [--rel REL]; not both")
    if all(w is not None for w in words):
        return args.source, args.rel, args.target
    if args.from_id is not None and args.to_id is not None:
        return args.from_id, args.rel_opt or "depends_on", args.to_id
    raise ConfigError(
        "name the relation: `lifeline relate FROM REL TO` (REL: "
        f"{', '.join(RELATION_TYPES)}), or --from ID --to ID [--rel REL]"
    )


async def cmd_relate(args: argparse.Namespace) -> int:
    home = home_of(args)
    named, rel, aimed = _relation_named(args)
    async with open_line(args) as store:
        source, target = await store.resolve(named), await store.resolve(aimed)
        if source.kind == "relation" or target.kind == "relation":
            raise ConfigError("a relation joins two entries, not another relation")
        draft = Draft(
            kind="relation",
            summary=f"{rel}: {source.id[:8]} → {target.id[:8]}",
            body=relation_body(rel, source.id, target.id),
            **attribution(args),
            parents=(source.id, target.id),
        )
        ledger = Ledger(store, hooks=load_append_hooks(home), limits=home.limits())
        entry, _new = await ledger.append(draft)
    print_json(entry.to_dict()) if args.json else print(entry.id)
    return 0


def _around(args: argparse.Namespace) -> tuple[str, str | None, str]:
    """(ID, relation or None, direction) of a `graph` command line, either form."""
    forms: list[tuple[str | None, str | None, str]] = [
        (args.id, None, "both"),
        (args.of, None, "both"),
        (args.depends_on, "depends_on", "out"),
        (args.dependents, "depends_on", "in"),
    ]
    given = [(node, rel, way) for node, rel, way in forms if node is not None]
    if len(given) != 1:
        raise ConfigError("name one entry: ID, or one of --of, --depends-on, --dependents")
    node, rel, way = given[0]
    return node, args.rel or rel, args.direction or way


async def cmd_graph(args: argparse.Namespace) -> int:
    named, rel, direction = _around(args)
    async with open_line(args) as store:
        node = await store.resolve(named)
        truth = await truth_source(store).superseded()
        graph = Graph([e async for e in store.stream() if e.kind == "relation"], truth.by)
        found = graph.around(node.id, rel=rel, direction=direction, depth=args.depth)
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
