"""`lifeline render`, `ingest` and `import`: the markdown projection and foreign ledgers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import BinaryIO

from lifeline.cli.common import (
    Commands,
    add_json_option,
    creates_project,
    home_of,
    line_of,
    open_line,
    print_json,
)
from lifeline.cli.moved import hooks_left
from lifeline.cli.progress import progress_for
from lifeline.errors import ConfigError, InvalidEntry
from lifeline.fsutil import atomic_file
from lifeline.home import Home
from lifeline.lines import EXTERNAL_ANCHOR, validate_line_name
from lifeline.migration.importer import (
    ForeignLine,
    LinePlan,
    append_keeping_times,
    apply_plan,
    lc_sources,
    plan_import,
    read_lc_project,
)
from lifeline.migration.markdown import looks_like_lc_markdown, parse_lc_markdown
from lifeline.migration.stream import count_rows, import_databases
from lifeline.migration.view import LcView, LcViewWriter
from lifeline.projection.file import write_projection
from lifeline.projection.markdown import entry_block, header, is_projection, parse_document
from lifeline.store.port import RowProblem, Store
from lifeline.store.sqlite import SqliteStore
from lifeline.validate import HARD_LIMITS, check_admissible, over_limits
from lifeline.wording import count, one_line

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "render",
        parents=[parent],
        help="write the line's projection (LIFELINE.md); prints its path",
    )
    p.add_argument("--stdout", action="store_true", help="print the projection instead")
    p.add_argument(
        "--full",
        action="store_true",
        help="write the whole file, even where only new entries' blocks would be appended "
        "(the default when the file is exactly the previous render)",
    )
    p.add_argument(
        "--format",
        choices=["lifeline", "lifeline-context"],
        default="lifeline",
        help="lifeline (default, lossless) or lifeline-context: the LIFELINE.md that "
        "lifeline-context 0.6's migrate and pull read, for teams mid-migration",
    )
    p.set_defaults(func=cmd_render)

    p = sub.add_parser(
        "ingest",
        parents=[parent],
        help="read a projection (ours or lifeline-context's LIFELINE.md) into the line",
    )
    p.add_argument("file", metavar="FILE", type=Path, help="the markdown file to read")
    add_json_option(p, "machine-readable report")
    p.set_defaults(func=cmd_ingest)
    creates_project(p)

    p = sub.add_parser(
        "import", parents=[parent], help="import a ledger written by lifeline-context 0.6"
    )
    p.add_argument(
        "path",
        metavar="PATH",
        type=Path,
        help="its project root, a folder of its .db files (e.g. its .lifeline/), or one .db",
    )
    add_json_option(p, "machine-readable report")
    p.set_defaults(func=cmd_import)
    creates_project(p)


def _warn_rows(problems: list[RowProblem], line: str) -> None:
    if problems:
        print(
            f"lifeline: warning: {count(len(problems), 'undecodable row')} in line {line!r} "
            "left out (run `lifeline verify`)",
            file=sys.stderr,
        )


def _warn_left_out(view: LcView, line: str) -> None:
    if view.unwritable:
        first, why = next(iter(view.unwritable.items()))
        print(
            f"lifeline: warning: {count(len(view.unwritable), 'entry', 'entries')} of line "
            f"{line!r} cannot be written in lifeline-context's format (e.g. {first[:12]}: "
            f"{why}) and {'was' if len(view.unwritable) == 1 else 'were'} left out, with "
            f"{count(len(view.descendants), 'descendant')}; the default format keeps them",
            file=sys.stderr,
        )


async def cmd_render(args: argparse.Namespace) -> int:
    name = line_of(args)
    problems: list[RowProblem] = []
    files = home_of(args).lines.files
    if not args.stdout and args.format != "lifeline-context" and files is not None:
        # a line file: its render record kept beside it, so a render writes what changed
        async with files.open(name) as sqlite:
            path = await _render_file(args, sqlite, name, problems)
        _warn_rows(problems, name)
        print(path)
        return 0
    async with open_line(args) as store:
        with progress_for(args, f"rendering line {name}", await store.count()) as bar:
            if args.stdout:
                sys.stdout.flush()
                await _stream_view(
                    store, name, args.format, sys.stdout.buffer, bar.advance, problems
                )
                sys.stdout.buffer.flush()
                _warn_rows(problems, name)
                return 0
            # lifeline-context's format, or a hub's line (no file to keep a record beside):
            # written whole
            path = home_of(args).projection_path(name)
            with atomic_file(path) as out:
                await _stream_view(store, name, args.format, out, bar.advance, problems)
    _warn_rows(problems, name)
    print(path)
    return 0


async def _render_file(
    args: argparse.Namespace, store: SqliteStore, name: str, problems: list[RowProblem]
) -> Path:
    path = home_of(args).projection_path(name)
    with progress_for(args, f"rendering line {name}", await store.count()) as bar:
        done = await write_projection(store, name, path, problems, bar.advance, full=args.full)
    if getattr(args, "verbose", False):
        why = f" ({done.reason})" if done.reason else ""
        written = count(done.entries, "entry", "entries")
        print(f"{done.mode}: {written} written{why}", file=sys.stderr)
    return path


async def _stream_view(
    store: Store,
    name: str,
    form: str,
    out: BinaryIO,
    advance: Callable[[int], None],
    problems: list[RowProblem] | None = None,
) -> None:
    """Write the view to ``out`` block by block, as the store streams the entries."""
    problems = [] if problems is None else problems
    writer = LcViewWriter(name) if form == "lifeline-context" else None
    if writer is not None:
        out.write(writer.head().encode("utf-8"))
    else:
        out.write(header(name, await store.externals()).encode("utf-8"))
    block = writer.block if writer is not None else entry_block
    batch: list[str] = []
    async for entry in store.stream(problems=problems):
        batch.append(block(entry))
        if len(batch) == 500:
            out.write("".join(batch).encode("utf-8"))
            advance(len(batch))
            batch.clear()
    out.write("".join(batch).encode("utf-8"))
    advance(len(batch))
    if writer is not None:
        _warn_left_out(writer.view, name)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}; check the path") from exc
    except UnicodeDecodeError as exc:
        raise InvalidEntry(
            f"{path} is not UTF-8 text (byte {exc.start}); pass a LIFELINE.md"
        ) from exc


async def _stored_parents(store: Store, line: ForeignLine) -> set[str]:
    wanted = {p for e in line.entries for p in e.parents}
    return await store.contains(wanted) | (wanted & set(await store.externals()))


async def _in_other_lines(home: Home, name: str, ids: set[str]) -> dict[str, str]:
    """Where the ``ids`` missing from line ``name`` live among the project's other lines."""
    found: dict[str, str] = {}
    for other in home.line_names():
        if other == name or not ids - found.keys():
            continue
        async with home.open_line(other) as store:
            found.update(dict.fromkeys(await store.contains(ids - found.keys()), other))
    return found


def _read_ingest(path: Path, text: str, name: str) -> tuple[ForeignLine, dict[str, str], bool]:
    """Parse the file (before anything is opened): entries, declared externals, ours?"""
    if is_projection(text):
        document = parse_document(text)
        for entry in document.entries:
            check_admissible(entry, HARD_LIMITS)
        return ForeignLine(name, path, document.entries), dict(document.externals), True
    if looks_like_lc_markdown(text):
        foreign = ForeignLine(name, path, lossy=True)
        foreign.entries, foreign.rejected = parse_lc_markdown(text)
        return foreign, {}, False
    raise InvalidEntry(
        f"{path} is neither a lifeline projection nor a lifeline-context LIFELINE.md; "
        "write one with `lifeline render`"
    )


async def _ingest_plan(
    home: Home, store: Store, foreign: ForeignLine, declared: dict[str, str], ours: bool
) -> LinePlan:
    own = {e.id for e in foreign.entries}
    missing = {p for e in foreign.entries for p in e.parents} - own - declared.keys()
    missing -= await _stored_parents(store, foreign)
    declared.update(await _in_other_lines(home, foreign.name, missing))
    for parent, other in declared.items():
        await store.declare_external(parent, other)
    limits = home.limits()
    if ours:  # all-or-nothing: append_many refuses the whole batch on a gap
        plan = LinePlan(foreign.name, foreign.source, foreign.entries, declared, [])
        plan.over_caps = [e.id for e in foreign.entries if over_limits(e, limits) is not None]
        return plan
    # lossy foreign text: keep what reproduces, anchor the parents that do not
    stored = {foreign.name: await _stored_parents(store, foreign)}
    (plan,) = plan_import([foreign], stored, limits)
    for anchor in plan.anchors:
        await store.declare_external(anchor, EXTERNAL_ANCHOR)
    plan.externals = declared
    return plan


async def cmd_ingest(args: argparse.Namespace) -> int:
    name = line_of(args)
    foreign, declared, ours = _read_ingest(args.file, _read_text(args.file), name)
    # where each entry is in our format's file, for the report ("-" in the other format)
    numbers = {e.id: str(n) for n, e in enumerate(foreign.entries, 1)} if ours else None
    async with open_line(args, create=True) as store:
        await home_of(args).lines.require_intact(store, name)
        plan = await _ingest_plan(home_of(args), store, foreign, declared, ours)
        plan.entries, plan.added = await append_keeping_times(
            store, plan.entries, plan.rejected, numbers
        )
    _report([plan], args.json, verb="ingested")
    return 1 if plan.rejected else 0


def _report(plans: list[LinePlan], as_json: bool, *, verb: str) -> None:
    if as_json:
        print_json([p.to_dict() for p in plans])
        return
    for p in plans:
        size = count(p.size, "entry", "entries")
        print(f"{verb} {size} ({p.added} new) into line {p.name!r} from {p.source}")
        for parent, other in sorted(p.externals.items()):
            print(f"  cross-line parent {parent[:12]} -> line {other!r}")
        if p.anchors:
            print(
                f"  {count(len(p.anchors), 'parent')} could not be reproduced from the markdown "
                f"and {'is' if len(p.anchors) == 1 else 'are'} declared external anchors "
                f"(e.g. {p.anchors[0][:12]}); their children are kept"
            )
        if p.over_caps:
            print(
                f"  {count(len(p.over_caps), 'entry', 'entries')} "
                f"{'exceeds' if len(p.over_caps) == 1 else 'exceed'} this project's size caps "
                f"(e.g. {p.over_caps[0][:12]}); kept as history — peers with the same caps "
                "refuse them, see docs/configuration.md"
            )
        for r in p.rejected:
            why = one_line(f"#{r.number} {r.entry_id[:12]}: {r.reason}")
            print(f"  not imported: {why}", file=sys.stderr)


async def cmd_import(args: argparse.Namespace) -> int:
    home = home_of(args)

    def opener(name: str) -> AbstractAsyncContextManager[Store]:
        return home.open_line(name, create=True)

    dbs, _mds = lc_sources(args.path)
    for db in dbs:
        target = home.line_path(validate_line_name(db.stem))
        if target.exists() and target.resolve() == db.resolve():
            raise ConfigError(
                f"{db} is both the source and the target of the import; "
                "run the import from another project folder (--root)"
            )
    if dbs:  # streamed: memory does not grow with the ledger
        with progress_for(args, "importing", count_rows(dbs)) as bar:
            done = [p async for p in import_databases(dbs, opener, home.limits(), bar.advance)]
    else:  # its LIFELINE*.md files: small, read whole (some entries cannot reproduce)
        lines = read_lc_project(args.path)
        stored: dict[str, set[str]] = {}
        for line in lines:
            if home.line_path(line.name).exists():
                async with home.open_line(line.name) as store:
                    stored[line.name] = await _stored_parents(store, line)
        plans = plan_import(lines, stored, home.limits())
        done = [p async for p in apply_plan(plans, opener)]
    _report(done, args.json, verb="imported")
    left = hooks_left(home.root)
    if left:  # on stderr: --json output stays one document
        print("lifeline-context's setup still points at it here:", file=sys.stderr)
        for what in left:
            print(f"  - {what}", file=sys.stderr)
    return 1 if any(p.rejected for p in done) else 0
