"""Building the sections of a context from the truth (pure: entries are passed in)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lifeline.entry import Entry
from lifeline.truth.parse import BLOCKS, parse_checkpoint
from lifeline.truth.pieces import Piece, Policy, Section, clip, inline, short
from lifeline.truth.state import State
from lifeline.truth.views import Truth

__all__ = ["Hit", "Inputs", "PieceMemo", "Render", "build_sections"]

WHY_LEVELS = (300, 100, 0)
PIECES_KEPT = 50_000  # rendered items a PieceMemo holds before it starts again
PieceKey = tuple[str, str, int, str, str]  # id, tag, cap, summary, why


@dataclass(frozen=True, slots=True)
class Hit:
    """A recall hit, anchored to an entry that verified when it was read."""

    entry_id: str
    score: float
    superseded: bool
    summary: str
    excerpt: str


@dataclass(frozen=True, slots=True)
class Inputs:
    state: State
    truth: Truth
    entries: Mapping[str, Entry]  # fetched and verified: checkpoints, recent, pinned, members
    hits: Sequence[Hit] = ()
    thread: str | None = None
    recent: int = 12
    max_items: int = 1_000_000  # more than this many items cannot fit the budget anyway


@dataclass
class PieceMemo:
    """Tracked items as rendered, kept between assemblies of one line (a line's memo,
    :mod:`lifeline.truth.memo`, holds one), under everything their text is made of: id,
    tag, per-item cap, summary and why. Not under the id alone: the item comes from the
    truth tables, which can lie until `verify` rebuilds them."""

    levels: dict[PieceKey, tuple[str, ...]] = field(default_factory=dict)

    def keep(self, key: PieceKey, levels: tuple[str, ...]) -> None:
        if len(self.levels) >= PIECES_KEPT:
            self.levels.clear()
        self.levels[key] = levels


@dataclass(frozen=True, slots=True)
class Render:
    """How tracked items are made in one assembly: capped at ``cap`` characters, and kept
    in ``memo`` (if any) for the next one."""

    cap: int
    memo: PieceMemo | None = None


def _prune(ids: Sequence[str], keep: int, ends: bool) -> tuple[list[str], list[str]]:
    """(kept, omitted): what the section's policy would drop first, dropped up front."""
    if len(ids) <= keep:
        return list(ids), []
    if ends:
        head, tail = keep // 2, keep - keep // 2
        return [*ids[:head], *ids[len(ids) - tail :]], list(ids[head : len(ids) - tail])
    return list(ids[len(ids) - keep :]), list(ids[: len(ids) - keep])


def _with_why(head: str, why: str) -> tuple[str, ...]:
    levels = []
    for cut in WHY_LEVELS:
        levels.append(f"{head} — why: {clip(why, cut)}" if why and cut else head)
    return tuple(dict.fromkeys(levels))


def _item_piece(state: State, how: Render, entry_id: str, tag: str = "") -> Piece:
    _kind, _ts, summary, why, _thread = state.items[entry_id]
    key = (entry_id, tag, how.cap, summary, why)
    if how.memo is not None and (known := how.memo.levels.get(key)) is not None:
        return Piece(entry_id, known, capped=how.cap)
    head = f"- `{short(entry_id)}`{tag} {inline(summary)}"
    made = Piece(entry_id, _with_why(head, inline(why)))
    made.cap(how.cap)
    if how.memo is not None:
        how.memo.keep(key, made.levels)
    return made


def _decisions(inp: Inputs, how: Render, ids: Sequence[str]) -> Section:
    sec = Section(
        "decisions", "Decisions in force", Policy.ENDS, True, noun="decisions", one="decision"
    )
    ids, sec.omitted = _prune(ids, inp.max_items, ends=True)
    for i in ids:
        targets = inp.state.corrections.get(i, ())
        tag = f" (replaces {' '.join(f'`{short(t)}`' for t in targets)})" if targets else ""
        sec.pieces.append(_item_piece(inp.state, how, i, tag))
    sec.empty = "- none recorded"
    return sec


def _pinned(inp: Inputs, how: Render) -> Section:
    sec = Section("pinned", "Pinned", Policy.KEEP, True, noun="pins", one="pin")
    for i in inp.truth.pinned:
        if i in inp.state.items:
            sec.pieces.append(_item_piece(inp.state, how, i))
        elif i in inp.entries:
            e = inp.entries[i]
            head = f"- `{short(i)}` {inline(e.summary)}"
            sec.pieces.append(Piece(i, _with_why(head, inline(e.body))))
    return sec


def _open(inp: Inputs, how: Render, ids: Sequence[str]) -> Section:
    sec = Section(
        "open",
        "Open",
        Policy.NEWEST,
        True,
        noun="open items",
        one="open item",
        empty="- nothing open",
    )
    ids, sec.omitted = _prune(ids, inp.max_items, ends=False)
    sec.pieces = [_item_piece(inp.state, how, i) for i in ids]
    return sec


def _thread_label(inp: Inputs, thread: str) -> str:
    item = inp.state.items.get(thread)
    return f"{inline(item[2])} (`{short(thread)}`)" if item else inline(thread)


def _resume_piece(inp: Inputs, thread: str, cid: str) -> Piece | None:
    entry = inp.entries.get(cid)
    if entry is None:
        return None
    blocks = parse_checkpoint(entry.body).blocks
    head = f"- `{short(cid)}` thread {_thread_label(inp, thread)}, {entry.ts[:16]}"
    full = [head] + [f"  - {b}: {inline(x)}" for b in BLOCKS for x in blocks.get(b, ())]
    brief = [head] + [
        f"  - {b}: {clip(inline(x), 80)}" for b in ("next", "blocked") for x in blocks.get(b, ())
    ]
    return Piece(cid, tuple(dict.fromkeys(["\n".join(full), "\n".join(brief), head])))


def _resume(inp: Inputs, threads: Sequence[str]) -> Section:
    sec = Section("resume", "Resume", Policy.NEWEST, False, noun="checkpoints", one="checkpoint")
    live = [(t, inp.truth.resume[t]) for t in threads if t in inp.truth.resume]
    live.sort(key=lambda tc: (inp.entries[tc[1]].ts if tc[1] in inp.entries else "", tc[1]))
    for thread, cid in live:
        piece = _resume_piece(inp, thread, cid)
        if piece is not None:
            sec.pieces.append(piece)
    sec.empty = "- no checkpoint yet"
    return sec


def _relevant(inp: Inputs) -> Section:
    sec = Section("relevant", "Relevant", Policy.BEST, False, noun="hits", one="hit")
    for hit in inp.hits:
        mark = " [superseded]" if hit.superseded else ""
        head = f"- `{short(hit.entry_id)}`{mark} {inline(hit.summary)} (score {hit.score:.2f})"
        sec.pieces.append(Piece(hit.entry_id, _with_why(head, inline(hit.excerpt))))
    sec.empty = "- no match strong enough"
    return sec


def _recent(inp: Inputs, ids: Sequence[str]) -> Section:
    sec = Section("recent", "Recent", Policy.NEWEST, False, noun="entries", one="entry")
    for i in ids:
        e = inp.entries.get(i)
        if e is None:
            continue
        mark = " [superseded]" if inp.truth.is_superseded(i) else ""
        line = f"- `{short(i)}` {e.ts[:16]} {inline(e.kind)}{mark}: {inline(e.summary)}"
        sec.pieces.append(Piece(i, (line,)))
    return sec


def build_sections(
    inp: Inputs, recent_ids: Sequence[str], query: bool, how: Render
) -> list[Section]:
    """The sections in output order (stable ones first); tracked items made as ``how``
    says (the other pieces are capped by the caller)."""
    truth, state = inp.truth, inp.state
    pinned = set(truth.pinned)
    if inp.thread is None:
        decisions = [d for d in truth.decisions if d not in pinned]
        opens, threads = truth.open, list(truth.resume)
        out = [_pinned(inp, how), _decisions(inp, how, decisions), _open(inp, how, opens)]
    else:
        decisions = [d for d in truth.decisions if state.items[d][4] == inp.thread]
        opens = [o for o in truth.open if o == inp.thread or state.items[o][4] == inp.thread]
        threads = [inp.thread]
        out = [_decisions(inp, how, decisions), _open(inp, how, opens)]
    out.append(_resume(inp, threads))
    if query:
        out.append(_relevant(inp))
    out.append(_recent(inp, recent_ids))
    return out
