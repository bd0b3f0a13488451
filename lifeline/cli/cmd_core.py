"""Core `lifeline` commands: log, show, history, lines, verify, recover."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from lifeline.audit.line import Finding, Report, verify_store
from lifeline.cli.common import (
    Commands,
    add_attribution,
    add_json_option,
    attribution,
    count_int,
    entry_text,
    external_checker,
    home_of,
    line_of,
    open_line,
    print_json,
)
from lifeline.cli.progress import progress_for
from lifeline.cli.stdin import read_stdin
from lifeline.cli.threads import log_on_thread
from lifeline.entry import ID_RE, KNOWN_KINDS, Entry
from lifeline.errors import ConfigError, StoreError
from lifeline.file_modes import loose_modes, loose_warning
from lifeline.integrity import recover_line
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.newest import newest
from lifeline.store.port import RowProblem, Store
from lifeline.store.shallow_status import shallow_note
from lifeline.store.sqlite_check import integrity_problems, repeated_ids
from lifeline.wording import count, noun, one_line

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser("log", parents=[parent], help="append an entry; prints its id")
    p.add_argument("--kind", required=True, help=f"one of: {', '.join(sorted(KNOWN_KINDS))}")
    p.add_argument("--summary", required=True, help="one line: what this entry records")
    body = p.add_mutually_exclusive_group()
    body.add_argument("--body", default="", help="the why, in full")
    body.add_argument("--body-file", help="read the body from PATH ('-' for stdin)")
    p.add_argument(
        "--parents",
        help="comma-separated ids or prefixes (default: the line's newest tips, at most 8); "
        "LINE:ID names a parent in another line",
    )
    p.add_argument(
        "--thread",
        metavar="NAME|OPEN-ID",
        help="record the entry on a thread: the body starts with `thread: NAME` (an open "
        "entry's id or prefix names its thread by the full id), and without --parents it "
        "follows the thread's newest entry, else that open entry, else the line's tips",
    )
    add_attribution(p)
    p.add_argument("--dedup-key", help="idempotency key: a retried write records once")
    add_json_option(p, "print the stored entry as JSON")
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("show", parents=[parent], help="one entry by id or unique prefix")
    p.add_argument("id", metavar="ID|PREFIX")
    add_json_option(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("history", parents=[parent], help="every entry, in the ledger's order")
    p.add_argument("--kind", help="only entries of this kind")
    p.add_argument("--limit", type=count_int, help="only the last N entries")
    form = p.add_mutually_exclusive_group()
    add_json_option(form, "one JSON array, written as it is read")
    form.add_argument("--jsonl", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("lines", parents=[parent], help="the lines of this project")
    add_json_option(p)
    p.set_defaults(func=cmd_lines)

    p = sub.add_parser(
        "verify",
        parents=[parent],
        help="check ids, parents, rows and the truth tables; exit 1 on any problem",
        description="Check every entry of the line (its id against its content, its parents, "
        "its row, its ts and height) and the truth tables `context` reads against the "
        "entries they derive from. Exit 0 when clean, 1 on any problem; an entry dated "
        "before its parent is a note (ts-before-parent), not a problem. Truth tables that "
        "differ are rebuilt from the entries (reported as truth-rebuilt); nothing else is "
        "written.",
    )
    add_json_option(p, "machine-readable report")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "recover",
        parents=[parent],
        help="rebuild a damaged line from what still reads (keeps the damaged file)",
        description="Copy every entry of the line that still reads (through SQLite, and by "
        "scanning the file's pages where SQLite cannot open or walk it), and whose id still "
        "matches its content, into a fresh file; the damaged one is kept as "
        "<line>.db.damaged-<time>. Then `lifeline-mesh sync PEER` (or ingest a LIFELINE.md) "
        "to get back what was lost (docs/user-guide.md, Recovering a damaged line).",
    )
    p.set_defaults(func=cmd_recover)


def _read_body(args: argparse.Namespace, cap: int) -> str:
    """The body from ``--body`` or ``--body-file``; a file is read to at most ``cap + 1``
    bytes, so ``/dev/zero`` or a huge file is refused at once, not read whole."""
    if args.body_file is None:
        return str(args.body)
    name = "standard input" if args.body_file == "-" else args.body_file
    try:
        if args.body_file == "-":
            raw = read_stdin(lambda: sys.stdin.buffer.read(cap + 1))
        else:
            with Path(args.body_file).open("rb") as fh:
                raw = fh.read(cap + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read --body-file {name}: {exc.strerror}") from exc
    if len(raw) > cap:
        raise ConfigError(
            f"--body-file {name} is larger than the body cap of {cap} bytes; shorten it, or "
            "raise limits.body_bytes in .lifeline/config.json"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"--body-file {name} is not UTF-8 text (byte {exc.start} is not); a body is "
            "text: convert it (e.g. iconv) or refer to the file by its path"
        ) from None
    if "\x00" in text:
        raise ConfigError(
            f"--body-file {name} holds NUL bytes (binary data); a body is text: refer to "
            "the file by its path instead"
        )
    return text


async def _resolve_parents(args: argparse.Namespace, store: Store) -> tuple[str, ...] | None:
    if args.parents is None:
        return None
    out: list[str] = []
    for item in filter(None, (p.strip() for p in args.parents.split(","))):
        if ":" in item:
            other, ref = item.split(":", 1)
            async with open_line(args, line=other) as foreign:
                entry = await foreign.resolve(ref)
            await store.declare_external(entry.id, other)
            out.append(entry.id)
        elif ID_RE.match(item):
            out.append(item)
        else:
            out.append((await store.resolve(item)).id)
    return tuple(out)


async def cmd_log(args: argparse.Namespace) -> int:
    limits = home_of(args).limits()
    body = _read_body(args, limits.body_bytes)
    async with open_line(args) as store:
        await home_of(args).lines.require_intact(store, line_of(args))
        parents = await _resolve_parents(args, store)
        if args.thread is not None:
            body, parents = await log_on_thread(store, args.thread, body, parents)
        draft = Draft(
            kind=args.kind,
            summary=args.summary,
            body=body,
            **attribution(args),
            parents=parents,
            dedup_key=args.dedup_key,
        )
        hooks = load_append_hooks(home_of(args))
        entry, _created = await Ledger(store, hooks=hooks, limits=limits).append(draft)
    if args.json:
        print_json(entry.to_dict())
    else:
        print(entry.id)
    return 0


async def cmd_show(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        entry = await store.resolve(args.id)
        children = await store.children(entry.id)
    if args.json:
        print_json(entry.to_dict() | {"children": children, "intact": entry.is_intact()})
    else:
        print(entry_text(entry))
        if not entry.is_intact():
            print("\nWARNING: this entry's id does not match its content (run `lifeline verify`)")
    return 0


async def cmd_history(args: argparse.Namespace) -> int:
    # Written as it is read (keyset pages from the store): memory does not grow with the line,
    # and `history | head` answers at once. `--limit N` reads the last N from the line's end.
    problems: list[RowProblem] = []
    out = _JsonArray() if args.json else _JsonLines() if args.jsonl else _TextRows()
    async with open_line(args) as store:
        if args.limit is None:
            async for e in store.stream(problems=problems):
                if args.kind is None or e.kind == args.kind:
                    out.write(e)
        else:
            for e in await newest(store, args.limit, args.kind, problems):
                out.write(e)
        note = await shallow_note(store, line_of(args))
    out.close()
    if note is not None:  # the older part is not here, and that is no damage
        print(f"lifeline: {note}", file=sys.stderr)
    if problems:  # one warning per command, however many rows are bad
        print(
            f"lifeline: warning: {count(len(problems), 'undecodable row')} skipped in line "
            f"{line_of(args)!r} (first: row {problems[0].rowid}, {problems[0].reason}); "
            "run `lifeline verify`",
            file=sys.stderr,
        )
    return 0


class _TextRows:
    """One line per entry: short id, time, kind, summary."""

    def write(self, e: Entry) -> None:
        sys.stdout.write(
            f"{e.id[:12]}  {e.ts[:19]}  {one_line(e.kind):<10}  {one_line(e.summary)}\n"
        )

    def close(self) -> None:
        pass


class _JsonLines(_TextRows):
    """One compact JSON object per line (``--jsonl``)."""

    def write(self, e: Entry) -> None:
        sys.stdout.write(json.dumps(e.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")


class _JsonArray(_TextRows):
    """The bytes ``print_json`` writes for the whole list, written one entry at a time."""

    def __init__(self) -> None:
        self._first = True

    def write(self, e: Entry) -> None:
        item = json.dumps(e.to_dict(), ensure_ascii=False, indent=2, sort_keys=True)
        # Only structural newlines are raw in JSON text (a string's are escaped); not
        # textwrap.indent, whose line split also breaks at U+2028, U+0085 and the like.
        sys.stdout.write(("[\n  " if self._first else ",\n  ") + item.replace("\n", "\n  "))
        self._first = False

    def close(self) -> None:
        sys.stdout.write("[]\n" if self._first else "\n]\n")


async def cmd_lines(args: argparse.Namespace) -> int:
    home = home_of(args)
    counts: dict[str, int] = {}
    for name in home.line_names():
        async with home.open_line(name) as store:
            counts[name] = await store.count()
    loose = loose_modes(home)
    if loose:
        print(loose_warning(home, loose), file=sys.stderr)
    if args.json:
        print_json([{"line": name, "entries": n} for name, n in counts.items()])
    elif not counts:
        print(f"no lines under {home.root}; create one with `lifeline init`")
    else:
        for name, n in counts.items():
            print(f"{name:<20} {n:>8} {noun(n, 'entry', 'entries')}")
    return 0


async def cmd_verify(args: argparse.Namespace) -> int:
    name = line_of(args)

    external_exists = external_checker(args)

    async with open_line(args) as store:
        # SQLite's quick check reads the whole file on a thread of its own (SQLite releases
        # the GIL) while the rows are checked
        # (a hub's line is in a database server: no file to check)
        home = home_of(args)
        path = home.line_path(name) if home.lines.url is None else None
        checking = asyncio.ensure_future(
            asyncio.to_thread(integrity_problems, path) if path else asyncio.sleep(0, [])
        )
        try:
            with progress_for(args, f"verifying line {name}", await store.count()) as bar:
                report = await verify_store(
                    store, name, external_exists=external_exists, advance=bar.advance
                )
        except StoreError as exc:
            damage = await checking
            if not damage:
                raise
            report = Report(line=name)
            damage.append(str(exc))
        else:
            damage = await checking
    report.findings[:0] = [
        Finding("sqlite-integrity", "-", f"{problem[:200]}; run `lifeline recover`")
        for problem in damage
    ]
    if args.json:
        write_report_json(report, sys.stdout)
    else:
        _print_report(report)
    return 0 if report.ok else 1


def write_report_json(report: Report, out: TextIO) -> None:
    """The bytes ``print_json(report.to_dict())`` writes, one finding at a time."""
    out.write(f'{{\n  "anchors": {report.anchors},\n  "entries": {report.entries},\n')
    _write_findings("findings", report.findings, out)
    line = json.dumps(report.line, ensure_ascii=False)
    ok = "true" if report.ok else "false"
    out.write(f'  "line": {line},\n')
    _write_findings("notes", report.notes, out)
    out.write(f'  "ok": {ok},\n  "shallow": {report.shallow}\n}}\n')


def _write_findings(key: str, findings: list[Finding], out: TextIO) -> None:
    if not findings:
        out.write(f'  "{key}": [],\n')
        return
    lead = f'  "{key}": [\n    '
    for finding in findings:
        item = json.dumps(asdict(finding), ensure_ascii=False, indent=2, sort_keys=True)
        out.write(lead + item.replace("\n", "\n    "))  # structural newlines only
        lead = ",\n    "
    out.write("\n  ],\n")


def _print_report(report: Report) -> None:
    if report.ok:
        anchored = (
            f" ({count(report.anchors, 'parent link')} to external anchors)"
            if report.anchors
            else ""
        )
        print(
            f"line {report.line!r}: {count(report.entries, 'entry', 'entries')}, all ids and "
            f"parents verify{anchored}"
        )
    else:
        print(
            f"line {report.line!r}: {count(len(report.findings), 'problem')} in "
            f"{count(report.entries, 'entry', 'entries')}"
        )
        for f in report.findings:
            print(f"  {f.check:<17} {one_line(f.entry_id[:12])}  {one_line(f.detail)}")
    for f in report.notes:
        print(f"  note: {f.check} {one_line(f.entry_id[:12])}  {one_line(f.detail)}")
    _print_shallow(report)


def _print_shallow(report: Report) -> None:
    if report.shallow:
        print(
            f"  shallow: {count(report.shallow, 'parent link')} "
            f"{'leads' if report.shallow == 1 else 'lead'} to older history that is not "
            "here (a shallow sync); `lifeline-mesh serve` deepens the line in the background, "
            "a full `lifeline-mesh sync PEER` at once"
        )


# rows a rebuild leaves out (a height: writes again)
_ALTERED = ("id-mismatch", "corrupt-row", "invalid-text", "invalid-ts")


async def _altered(args: argparse.Namespace, name: str) -> list[Finding]:
    """The rows of an intact file that `verify` finds altered or undecodable: a peer refuses
    each (decision 0111), and only a rebuild drops them, so a sync brings the intact copy."""
    async with open_line(args) as store:
        with progress_for(args, f"checking line {name}", await store.count()) as bar:
            report = await verify_store(store, name, advance=bar.advance, rebuild=False)
    return [f for f in report.findings if f.check in _ALTERED]


def _no_longer(n: int) -> str:
    if n == 1:
        return (
            "no longer matches its id, does not decode, or holds a ts or a height no writer stores"
        )
    return "no longer match their ids, do not decode, or hold a ts or a height no writer stores"


async def cmd_recover(args: argparse.Namespace) -> int:
    name = line_of(args)
    home = home_of(args)
    if home.lines.url is not None:  # a hub process root: the line is in its database
        raise ConfigError(
            f"line {name!r} is kept in the hub's database, not in a line file: `recover` "
            "rebuilds line files. On a hub, `lifeline-mesh verify` names a damaged row and "
            "a backup restores it (docs/hub.md, Backup and restore)"
        )
    path = home.line_path(name, must_exist=True)
    damage = integrity_problems(path)
    if not damage:
        altered = await _altered(args, name)
        repeated = repeated_ids(path)
        if repeated:
            print(
                f"line {name!r} holds entry ids in two rows (first: {repeated[0][:12]}); "
                "rebuilding the line with each entry once (decision 0147)",
                file=sys.stderr,
            )
        elif not altered:
            print(
                f"line {name!r} passes SQLite's integrity check and every entry matches its "
                "id; nothing to recover"
            )
            return 0
        else:
            first = altered[0]
            print(
                f"line {name!r} passes SQLite's integrity check, but "
                f"{count(len(altered), 'entry', 'entries')} {_no_longer(len(altered))} (first: "
                f"{first.entry_id[:12]}, {first.detail}); rebuilding the line without them, "
                "heights computed again (decision 0111)",
                file=sys.stderr,
            )
    done = await recover_line(path)
    scanned = (
        f"; {done.scanned} of the entries read came from a scan of its pages, where SQLite "
        "could not read them"
    ) * bool(done.scanned)
    print(
        f"recovered line {name!r}: kept {count(done.kept, 'entry', 'entries')} whose "
        f"{'id verifies' if done.kept == 1 else 'ids verify'}; "
        f"{count(done.unreadable, 'row')} lost (unreadable, or their ids or times altered), "
        f"{done.orphans} left out for a lost parent{scanned}; the damaged file is kept as "
        f"{done.damaged}"
    )
    print(
        "get the rest back: `lifeline-mesh sync PEER` with a node that shares the line "
        "(it also brings back the signatures and attestations, which recovery does not copy), "
        f"or `lifeline --line {name} ingest` a LIFELINE file written before the damage",
        file=sys.stderr,
    )
    return 0
