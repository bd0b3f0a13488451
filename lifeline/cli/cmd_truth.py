"""Truth commands: context, recall, resume, checkpoint, correct, pin, unpin."""

from __future__ import annotations

import argparse

from lifeline.cli.common import (
    Attribution,
    Commands,
    add_attribution,
    add_json_option,
    attribution,
    home_of,
    line_of,
    open_line,
    print_json,
)
from lifeline.cli.common import positive_int as _positive
from lifeline.cli.threads import open_thread
from lifeline.entry import Entry, compute_id
from lifeline.errors import ConfigError, InvalidEntry, NotFound
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.port import Store
from lifeline.truth.budget import DEFAULT_BUDGET_CHARS, Budget
from lifeline.truth.formats import FORMATS, deliver
from lifeline.truth.parse import (
    BLOCKS,
    checkpoint_body,
    checkpoint_summary,
    pin_body,
    reword_body,
)
from lifeline.truth.recall import DEFAULT_FLOOR, recall
from lifeline.truth.service import build_context, read_shown, resume_of
from lifeline.truth.snapshot import truth_source
from lifeline.wording import one_line

__all__ = ["register"]


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"{value} is not a fraction of the best score; give a number from 0 to 1"
        )
    return value


def _register_reads(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser("context", parents=[parent], help="the current truth as budgeted markdown")
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--budget", type=_positive, help=f"limit in characters (default {DEFAULT_BUDGET_CHARS})"
    )
    size.add_argument("--budget-tokens", type=_positive, help="limit in estimated tokens")
    p.add_argument(
        "--tokenizer",
        choices=["estimate", "tiktoken"],
        default="estimate",
        help="how tokens are counted (tiktoken is optional)",
    )
    p.add_argument("--query", help="add a Relevant section: entries recalled for this text")
    p.add_argument("--thread", help="a sub-agent brief for one thread (name or open-entry id)")
    p.add_argument("--format", choices=FORMATS, default="markdown", help="delivery shape")
    p.add_argument("--recent", type=_positive, default=12, help="entries in Recent (default 12)")
    p.add_argument(
        "--mark-session",
        action="store_true",
        help="taken from lifeline-context's SessionStart hook, which passes it; nothing is"
        " marked here (there is no guard), the context is printed as without it",
    )
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("recall", parents=[parent], help="search the line; hits anchored by id")
    p.add_argument("query", metavar="QUERY", help="plain words; no search syntax needed")
    p.add_argument("-k", type=_positive, default=8, help="at most K hits (default 8)")
    p.add_argument(
        "--floor",
        type=_fraction,
        default=DEFAULT_FLOOR,
        help="abstention floor, a fraction of the best hit's score: weaker hits are not shown"
        f" (default {DEFAULT_FLOOR}; 0 shows every match)",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("resume", parents=[parent], help="where each thread stopped")
    p.add_argument("--thread", help="only this thread (its name, or its open entry's id)")
    add_json_option(p)
    p.set_defaults(func=cmd_resume)


def _register_writes(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser("checkpoint", parents=[parent], help="record where a thread stopped")
    p.add_argument("--thread", required=True, help="thread name, or the id of an open entry")
    p.add_argument("--summary", help="one line (default: the thread and its first items)")
    for block in BLOCKS:
        p.add_argument(
            f"--{block}",
            action="append",
            default=[],
            metavar="ITEM",
            help=f"a '{block}' item (repeatable)",
        )
    add_attribution(p)
    add_json_option(p, "print the stored entry as JSON")
    p.set_defaults(func=cmd_checkpoint)

    p = sub.add_parser("correct", parents=[parent], help="supersede an entry with a correction")
    p.add_argument("id", metavar="ID|PREFIX", help="the entry this corrects")
    p.add_argument("--summary", required=True, help="one line: what is true instead")
    p.add_argument("--body", default="", help="why the correction")
    p.add_argument(
        "--still-open",
        action="store_true",
        help="the entry is an open question: reword it and keep it open (default: a correction"
        " of an open question closes it)",
    )
    add_attribution(p)
    add_json_option(p, "print the stored entry as JSON")
    p.set_defaults(func=cmd_correct)

    for name, helptext in (("pin", "keep an entry in every context"), ("unpin", "undo a pin")):
        p = sub.add_parser(name, parents=[parent], help=helptext)
        p.add_argument("id", metavar="ID|PREFIX")
        p.add_argument(
            "--body",
            default="",
            help="why the entry stays in every context: the pin note's body is `pin: ID`,"
            " a blank line, then this (as lifeline-context wrote it)"
            if name == "pin"
            else "why the pin ends: the correction's body (default: `unpinned`, as"
            " lifeline-context wrote it)",
        )
        add_attribution(p)
        add_json_option(p, "print the stored entry as JSON")
        p.set_defaults(func=cmd_pin if name == "pin" else cmd_unpin)


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    _register_reads(sub, parent)
    _register_writes(sub, parent)


def _budget(args: argparse.Namespace) -> Budget:
    if args.budget_tokens is not None:
        return Budget(args.budget_tokens, "tokens", args.tokenizer)
    return Budget(args.budget or DEFAULT_BUDGET_CHARS, "chars")


async def cmd_context(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        ctx = await build_context(
            store,
            line=line_of(args),
            budget=_budget(args),
            query=args.query,
            thread=args.thread,
            recent=args.recent,
        )
    print(deliver(args.format, ctx), end="")
    return 0


async def cmd_recall(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        superseded = await truth_source(store).superseded()
        hits = await recall(store, superseded, args.query, k=args.k, floor=args.floor)
    if args.json:
        print_json(
            [
                {
                    "id": h.entry_id,
                    "score": h.score,
                    "superseded": h.superseded,
                    "summary": h.summary,
                    "excerpt": h.excerpt,
                }
                for h in hits
            ]
        )
        return 0
    if not hits:
        print(f"no entry shares a word with {one_line(repr(args.query), 80)}")
    for h in hits:
        mark = " [superseded]" if h.superseded else ""
        print(f"{h.entry_id[:12]}  {h.score:6.2f}{mark}  {one_line(h.summary)}")
    return 0


async def cmd_resume(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        rows = await resume_of(store)
    if args.thread is not None:
        rows = [r for r in rows if _names_thread(args.thread, r)]
    if args.json:
        print_json(rows)
        return 0
    if not rows and args.thread is not None:
        print(f"no checkpoint on thread {one_line(args.thread)!r}; `lifeline resume` lists them")
    elif not rows:
        print("no checkpoint yet; record one with `lifeline checkpoint --thread NAME --next ...`")
    for row in rows:
        label = one_line(str(row["label"]))
        print(f"thread {label}  ({str(row['checkpoint'])[:12]}, {str(row['ts'])[:16]})")
        blocks = row["blocks"]
        assert isinstance(blocks, dict)
        for block, items in blocks.items():
            for item in items:
                print(f"  {block}: {one_line(str(item))}")
    return 0


def _names_thread(given: str, row: dict[str, object]) -> bool:
    """Whether ``given`` names the thread of a `resume` row: its name, or (a thread opened
    by an open entry) that entry's id or a prefix of 8 hex digits or more."""
    words = " ".join(given.split())
    thread = str(row["thread"])
    if words == thread:
        return True
    hexed = len(words) >= 8 and all(c in "0123456789abcdef" for c in words)
    return hexed and thread != str(row["label"]) and thread.startswith(words)


async def _write(args: argparse.Namespace, store: Store, draft: Draft) -> int:
    home = home_of(args)
    await home.lines.require_intact(store, line_of(args))
    ledger = Ledger(store, hooks=load_append_hooks(home), limits=home.limits())
    entry, _new = await ledger.append(draft)
    _print_entry(args, entry)
    return 0


def _print_entry(args: argparse.Namespace, entry: Entry) -> None:
    if args.json:
        print_json(entry.to_dict())
    else:
        print(entry.id)


async def cmd_checkpoint(args: argparse.Namespace) -> int:
    thread = " ".join(args.thread.split())
    if not thread:
        raise ConfigError("--thread is empty; name the thread (or give an open entry's id)")
    blocks = {b: list(getattr(args, b)) for b in BLOCKS}
    if not any(i.strip() for items in blocks.values() for i in items):
        raise ConfigError("a checkpoint needs at least one item: --next, --done, --goal, ...")
    async with open_line(args) as store:
        thread, title = await open_thread(store, thread)
        summary = " ".join((args.summary or "").split())
        draft = Draft(
            kind="checkpoint",
            summary=summary or checkpoint_summary(title, blocks),
            body=checkpoint_body(thread, blocks),
            **attribution(args),
        )
        return await _write(args, store, draft)


async def cmd_correct(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        target = await store.resolve(args.id)
        draft = Draft(
            kind="correction",
            summary=args.summary,
            body=reword_body(args.body) if args.still_open else args.body,
            **attribution(args),
            parents=(target.id,),
        )
        return await _write(args, store, draft)


async def cmd_pin(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        target = await store.resolve(args.id)
        truth = (await read_shown(store)).truth  # what is superseded, not every item
        if truth.is_superseded(target.id):
            raise InvalidEntry(f"{target.id[:12]} is superseded; pin the entry that replaced it")
        in_force = set(truth.pin_notes.get(target.id, ()))
        draft = await _pin_note(store, target, in_force, attribution(args), args.body)
        return await _write(args, store, draft)


async def _pin_note(
    store: Store, target: Entry, in_force: set[str], by: Attribution, why: str
) -> Draft:
    """The pin note for ``target``. Ids leave out the time, so a pin of the same words as
    an earlier one that was unpinned since would be that superseded note again: the new
    note names the old one as a parent (again and again, on every pin after an unpin)."""
    parents: tuple[str, ...] = (target.id,)
    while True:
        draft = Draft(
            kind="note",
            summary=f"pin: {' '.join(target.summary.split())}"[:200],
            body=pin_body(target.id, why),
            **by,
            parents=parents,
        )
        note = compute_id(
            draft.kind, draft.author, draft.agent, draft.provider, draft.model,
            draft.summary, draft.body, parents,
        )  # fmt: skip
        if note in in_force or not await store.contains([note]):
            return draft  # pinned by this very note already, or a new note
        parents = (target.id, note)


async def cmd_unpin(args: argparse.Namespace) -> int:
    async with open_line(args) as store:
        target = await store.resolve(args.id)
        notes = (await read_shown(store)).truth.pin_notes.get(target.id)
        if not notes:
            raise NotFound(f"{target.id[:12]} is not pinned; `lifeline context` lists the pins")
        # The entry lifeline-context 0.6.1 records for the same command line (same id): a
        # correction of every pin note in force, named by the target's first 8 characters
        draft = Draft(
            kind="correction",
            summary=f"unpin: {target.id[:8]}",
            body=args.body.strip() or "unpinned",
            **attribution(args),
            parents=tuple(notes),
        )
        return await _write(args, store, draft)
