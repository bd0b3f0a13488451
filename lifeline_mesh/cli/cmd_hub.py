"""`lifeline-mesh hub init` (a root as a process of a hub node kept in PostgreSQL) and
`lifeline-mesh migrate-store` (move a node's lines between SQLite and PostgreSQL)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from lifeline.cli.common import creates_project, home_of, print_json
from lifeline.cli.progress import progress_for
from lifeline.errors import ConfigError
from lifeline.lines import validate_line_name
from lifeline.store.postgres import is_postgres_url
from lifeline.wording import noun
from lifeline_mesh.home.mesh_state import NODE_KEY
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.hub.migrate import Side, copy_line, describe, open_side
from lifeline_mesh.hub.state_init import init_hub

__all__ = ["hub_home", "register", "store_url"]


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    register_hub(sub, parent)
    p = sub.add_parser(
        "migrate-store",
        parents=[parent],
        help="copy a node's lines and their evidence between SQLite and PostgreSQL",
        description="Copy every line of SRC (only LINE with --line) to DST, entries and "
        "signed evidence, and verify each copy (counts and fingerprints of entries, "
        "attestations and statements). SRC and DST are each a project root (its "
        ".lifeline/ line files) or a postgresql://USER@HOST/DATABASE URL. Resumable: run it "
        "again after an interruption; what is there already is kept. SRC is only read. "
        "A line copied into PostgreSQL is then made ready to read (its truth tables and "
        "recall index), so the hub's first context and recall do not wait for them.",
    )
    p.add_argument("src", metavar="SRC", help="project root or postgresql:// URL to copy from")
    p.add_argument("dst", metavar="DST", help="project root or postgresql:// URL to copy to")
    p.add_argument("--line", default=None, metavar="LINE", help="copy only this line")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_migrate_store)
    creates_project(p)


async def cmd_migrate_store(args: argparse.Namespace) -> int:
    if args.src == args.dst:
        raise ConfigError("SRC and DST are the same; give two different stores")
    src = await open_side(args.src, source=True)
    try:
        dst = await open_side(args.dst, source=False)
        try:
            names = [validate_line_name(args.line)] if args.line else await src.lines()
            if not names:
                raise ConfigError(f"{describe(args.src)} holds no line to copy")
            copies = []
            for name in names:
                with progress_for(args, f"copying {name}") as shown:
                    copies.append(await copy_line(src, dst, name, shown.advance))
                await _ready_for_reads(args, dst, name)
                if not args.json:
                    c = copies[-1]
                    print(
                        f"{name}: {c.entries:,} {noun(c.entries, 'entry', 'entries')} "
                        f"({c.added:,} new), {c.attestations:,} "
                        f"{noun(c.attestations, 'attestation')}, {c.statements:,} "
                        f"{noun(c.statements, 'statement')} in {describe(args.dst)}; "
                        "verified"
                    )
                    sys.stdout.flush()
        finally:
            await dst.close()
    finally:
        await src.close()
    if args.json:
        print_json([c.to_dict() for c in copies])
    return 0


async def _ready_for_reads(args: argparse.Namespace, dst: Side, name: str) -> None:
    """The copied line's truth tables and recall index, built now (with their progress)
    rather than by the first `context` and `recall` on the hub."""
    from lifeline.truth.progress import set_fold_progress

    with progress_for(args, f"making {name} ready to read") as bar:
        set_fold_progress(bar.update if bar.enabled else None)
        try:
            await dst.ready_for_reads(name)
        finally:
            set_fold_progress(None)


def register_hub(sub: Any, parent: argparse.ArgumentParser) -> None:
    hub = sub.add_parser(
        "hub",
        parents=[parent],
        help="make this root a process of a hub node kept in PostgreSQL",
        description="A hub node keeps its lines, identity and membership in a PostgreSQL "
        "database; each hub process's root holds only which database and its TLS "
        "credentials (docs/hub.md).",
    )
    actions = hub.add_subparsers(dest="hub_action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "init",
        parents=[parent],
        help="make this root a process of the hub node in --store (made there if new)",
        description="Make --root (an empty folder) a process of the hub node in the "
        "database: the first run on a database creates the node there (its signing key; "
        "with --new-mesh a mesh, its CA key in the database too) or moves a laptop node "
        "in with --from; later runs, on other roots, add processes of that same node. Each "
        "root gets .lifeline/mesh/hub.json (the URL, 0600) and its TLS credentials, issued "
        "from the CA key in the database. Run `serve` on the root afterwards.",
    )
    p.add_argument(
        "--store",
        required=True,
        type=store_url,
        metavar="URL",
        help="the hub's database: postgresql://USER@HOST[:PORT]/DATABASE",
    )
    p.add_argument(
        "--new-mesh", metavar="NAME", help="also create a mesh with the hub as its CA holder"
    )
    p.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="ROOT",
        help="move this laptop node's identity, membership, invites and MCP tokens into the "
        "database (what the database lacks; its node key must be the same node's)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_hub_init)
    creates_project(p)


def store_url(value: str) -> str:
    if not is_postgres_url(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a PostgreSQL URL; give postgresql://USER@HOST[:PORT]/DATABASE"
        )
    return value


async def cmd_hub_init(args: argparse.Namespace) -> int:
    if args.new_mesh and args.source:
        raise ConfigError("--new-mesh and --from exclude each other: a node is in one mesh")
    home = NodeHome.of(home_of(args))
    source = None
    if args.source is not None:
        if not args.source.is_dir():
            raise ConfigError(f"--from {args.source} is not a directory; pass the laptop's root")
        source = NodeHome(args.source.resolve())
    report = await asyncio.to_thread(
        init_hub, home, args.store, new_mesh=args.new_mesh, source=source
    )
    if args.json:
        print_json(report.to_dict())
        return 0
    how = "created hub node" if report.created else "hub node"
    print(f"{how} {report.node_id} in {describe(args.store)}; {home.root} is one of its processes")
    if report.imported:
        print(f"moved into the database: {', '.join(report.imported)}")
    if report.kept:
        print(f"already in the database, kept: {', '.join(report.kept)}")
    if report.mesh_id:
        print(f"mesh {report.mesh_id}; TLS credentials {report.tls}")
    return 0


def hub_home(home: NodeHome, given: str | None) -> NodeHome:
    """The home `serve` runs on: the root's hub (``hub init``: its lines are already in that
    database), else its lines in ``--store``; refuses a --store whose database already holds
    a hub node this root is not a process of (it would serve as a node of its own)."""
    bound = home.lines.url
    if bound is not None:
        if given is not None and given != bound:
            raise ConfigError(
                f"{home.root} is a process of the hub in {describe(bound)}, not "
                f"{describe(given)}; drop --store or use another --root"
            )
        return home
    if given is None:
        return home
    from lifeline.store.pg_lines import PgLines
    from lifeline_mesh.home.pg_state import PgState

    if PgState.for_url(given).read(NODE_KEY) is not None:
        raise ConfigError(
            f"{describe(given)} holds a hub node; make this root one of its processes "
            f"first: `lifeline-mesh --root {home.root} hub init --store URL`"
        )
    # Lines in the database, the node's documents in its files (no hub node there)
    return NodeHome(home.root, PgLines(given), home.documents)
