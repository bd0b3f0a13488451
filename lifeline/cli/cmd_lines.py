"""`lifeline promote` and `where`: entries across the lines of one project."""

from __future__ import annotations

import argparse

from lifeline.cli.common import Commands, add_json_option, home_of, line_of, open_line, print_json
from lifeline.entry import Entry
from lifeline.errors import ConfigError, NotFound
from lifeline.ledger import Ledger
from lifeline.lines import validate_line_name
from lifeline.plugins import load_append_hooks
from lifeline.promote import copies_in, promotion_draft
from lifeline.truth.snapshot import truth_source
from lifeline.wording import one_line

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "promote",
        parents=[parent],
        help="copy entries of this line into another as roots anchored to their origin",
    )
    p.add_argument("ids", metavar="ID|PREFIX", nargs="*", help="the entries to copy")
    p.add_argument("--to", required=True, metavar="LINE", help="the line that receives them")
    # lifeline-context's form: --from LINE --id ID,ID...
    p.add_argument("--from", dest="from_line", metavar="LINE", help="the source line (= --line)")
    p.add_argument(
        "--id", dest="id_list", metavar="IDS", help="comma-separated ids or prefixes (= ID ...)"
    )
    p.add_argument("--kind", help="instead of ids: every entry in force of this kind")
    add_json_option(p, "print the copies as JSON")
    p.set_defaults(func=cmd_promote)

    p = sub.add_parser("where", parents=[parent], help="which lines hold an entry (or a copy)")
    p.add_argument("id", metavar="ID|PREFIX")
    add_json_option(p)
    p.set_defaults(func=cmd_where)


def _lc_form(args: argparse.Namespace) -> None:
    """lifeline-context's ``--from LINE`` and ``--id IDS`` read into ``--line`` and the ids."""
    if args.from_line is not None:
        given = getattr(args, "line", None)  # the global option's default is no attribute
        if given is not None and given != args.from_line:
            raise ConfigError(f"--from {args.from_line} and --line {given}: give one")
        args.line = args.from_line
    if args.id_list is not None:
        args.ids = [*args.ids, *(i.strip() for i in args.id_list.split(",") if i.strip())]


async def _targets(args: argparse.Namespace) -> list[Entry]:
    if bool(args.ids) == bool(args.kind):
        raise ConfigError("name the entries to promote, or give --kind (not both)")
    async with open_line(args) as store:
        if args.ids:
            return [await store.resolve(i) for i in args.ids]
        gone = await truth_source(store).superseded()
        found = [
            e async for e in store.stream() if e.kind == args.kind and not gone.is_superseded(e.id)
        ]
    if not found:
        raise NotFound(f"no {args.kind!r} entry in force in line {line_of(args)!r}")
    return found


async def cmd_promote(args: argparse.Namespace) -> int:
    _lc_form(args)
    source, target = line_of(args), validate_line_name(args.to)
    if source == target:
        raise ConfigError(f"--to {target} is the line the entries come from; name another line")
    drafts = [promotion_draft(e, source) for e in await _targets(args)]
    home = home_of(args)
    copies: list[tuple[Entry, bool]] = []
    async with open_line(args, line=target, create=True) as store:
        ledger = Ledger(store, hooks=load_append_hooks(home), limits=home.limits())
        for draft in drafts:
            copies.append(await ledger.append(draft))
    if args.json:
        print_json([{**e.to_dict(), "new": new} for e, new in copies])
        return 0
    for entry, new in copies:
        print(f"{entry.id}  {'promoted' if new else 'already there'}  {one_line(entry.summary)}")
    return 0


async def _resolve_anywhere(args: argparse.Namespace, names: list[str]) -> str:
    for name in names:
        async with open_line(args, line=name) as store:
            try:
                return (await store.resolve(args.id)).id
            except NotFound:
                continue
    raise NotFound(f"no line under {home_of(args).root} holds an entry starting with {args.id!r}")


async def cmd_where(args: argparse.Namespace) -> int:
    names = home_of(args).line_names()
    full = await _resolve_anywhere(args, names)
    found: list[dict[str, str]] = []
    for name in names:
        async with open_line(args, line=name) as store:
            if await store.contains([full]):
                found.append({"line": name, "id": full, "as": "entry"})
            found += [{"line": name, "id": c, "as": "copy"} for c in await copies_in(store, full)]
    if args.json:
        print_json({"id": full, "found": found})
        return 0
    print(full)
    for row in found:
        what = "the entry" if row["as"] == "entry" else f"a promoted copy, {row['id']}"
        print(f"  {row['line']}: {what}")
    return 0
