"""`lifeline-mesh migrate-store`: move a node's lines between SQLite and PostgreSQL."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lifeline.cli.common import print_json
from lifeline.cli.progress import progress_for
from lifeline.errors import ConfigError
from lifeline.lines import validate_line_name
from lifeline_mesh.hub.migrate import copy_line, describe, open_side

__all__ = ["register"]


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "migrate-store",
        parents=[parent],
        help="copy a node's lines and their evidence between SQLite and PostgreSQL",
        description="Copy every line of SRC (only LINE with --line) to DST, entries and "
        "signed evidence, and verify each copy (counts and fingerprints of entries, "
        "attestations and statements). SRC and DST are each a project root (its "
        ".lifeline/ line files) or a postgresql://USER@HOST/DATABASE URL. Resumable: run it "
        "again after an interruption; what is there already is kept. SRC is only read.",
    )
    p.add_argument("src", metavar="SRC", help="project root or postgresql:// URL to copy from")
    p.add_argument("dst", metavar="DST", help="project root or postgresql:// URL to copy to")
    p.add_argument("--line", default=None, metavar="LINE", help="copy only this line")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_migrate_store)


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
                if not args.json:
                    c = copies[-1]
                    print(
                        f"{name}: {c.entries:,} entries ({c.added:,} new), {c.attestations:,} "
                        f"attestations, {c.statements:,} statements in {describe(args.dst)}; "
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
