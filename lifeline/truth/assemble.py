"""Context assembly: the truth as budgeted markdown, split into a stable prefix and a tail.

Pure: the caller passes the state, the entries to quote (already fetched and verified) and
the recall hits. The stable prefix (identity, warnings, pins, decisions, open) changes only
when the truth does, so provider prompt caches keep it; the volatile tail holds resume,
relevant, recent and the footer.
"""

from __future__ import annotations

from dataclasses import dataclass

from lifeline.truth.budget import Budget
from lifeline.truth.fit import fit
from lifeline.truth.pieces import Section, inline, short
from lifeline.truth.sections import Inputs, PieceMemo, Render, build_sections
from lifeline.wording import count

__all__ = ["TIPS_SHOWN", "Context", "assemble", "needed_ids", "recent_ids"]

MARKER_IDS = 40  # bad ids listed by name in the integrity warning
TIPS_SHOWN = 4  # tips named in the footer; "…" says there are more


@dataclass(frozen=True, slots=True)
class Context:
    stable: str
    volatile: str
    omitted: tuple[str, ...]
    size: int
    unit: str

    @property
    def text(self) -> str:
        return self.stable + self.volatile


def recent_ids(inp: Inputs) -> list[str]:
    """Oldest-first ids for the Recent section."""
    marks = inp.state.threads.get(inp.thread, []) if inp.thread is not None else inp.state.recent
    return [i for _ts, i in marks[-inp.recent :]]


def needed_ids(inp: Inputs) -> set[str]:
    """Entries the assembly quotes beyond the state: checkpoints, recent, pinned non-items."""
    wanted = set(recent_ids(inp))
    wanted.update(inp.truth.resume.values())
    wanted.update(p for p in inp.truth.pinned if p not in inp.state.items)
    return wanted


def _marker(section: Section) -> str:
    ids = section.omitted
    # The budget fit renders many times: take the first few ids, not a sort of them all.
    named = section.first_omitted()
    listed = ": " + " ".join(f"`{short(i)}`" for i in named) if named else ""
    more = f" and {len(ids) - len(named)} more" if named and len(ids) > len(named) else ""
    return (
        f"- [omitted {count(len(ids), section.one, section.noun)} to fit the budget{listed}{more}; "
        "`lifeline show ID` prints one]"
    )


def _render_section(section: Section) -> str:
    lines = [f"## {section.title}", ""]
    body = [p.text for p in section.pieces]
    if section.omitted:
        at = len(body) // 2 if section.key == "decisions" else 0
        body.insert(at, _marker(section))
    if not body and section.empty:
        body = [section.empty]
    if not body:
        return ""
    return "\n".join(lines + body) + "\n\n"


def _header(inp: Inputs, line: str) -> str:
    title = f"# Context — {inline(line)}"
    if inp.thread is not None:
        title = f"# Brief — thread {inline(inp.thread)} — {inline(line)}"
    out = [title, ""]
    ident = inp.truth.identity
    if ident is not None:
        _k, _ts, summary, why, _t = inp.state.items[ident]
        out += ["## Identity", "", f"- `{short(ident)}` {inline(summary)}"]
        if why:
            out.append(f"- why: {inline(why)}")
        out.append("")
    bad = inp.state.integrity
    if bad:
        out += ["## Integrity warning", ""]
        out.append(
            f"- {count(len(bad), 'entry', 'entries')} "
            + (
                "does not match its id and was"
                if len(bad) == 1
                else "do not match their ids and were"
            )
            + " left out of the truth: "
            + " ".join(f"`{short(i)}`" for i in sorted(bad)[:MARKER_IDS])
            + "; run `lifeline verify`"
        )
        out.append("")
    return "\n".join(out) + "\n"


def _footer(inp: Inputs, tips: list[str]) -> str:
    s = inp.state
    who = ", ".join(f"{inline(k)} ({v})" for k, v in sorted(s.contributors.items()))
    tip_text = " ".join(f"`{short(t)}`" for t in tips[:TIPS_SHOWN])
    tip_text += " …" if len(tips) > TIPS_SHOWN else ""
    return (
        f"---\n{count(s.count, 'entry', 'entries')} · head `{s.head}` · tips {tip_text or '-'}\n"
        f"contributors: {who or '-'}\n"
    )


def assemble(
    inp: Inputs,
    *,
    line: str,
    budget: Budget,
    tips: list[str],
    query: bool,
    pieces: PieceMemo | None = None,
) -> Context:
    """Render the context for ``inp`` within ``budget``; tracked items already rendered
    for the same line are taken from ``pieces`` (and new ones kept there). ``tips``: the
    line's first tips, at least ``TIPS_SHOWN + 1`` of them when there are more."""
    how = Render(budget.item_cap_chars, pieces)
    sections = build_sections(inp, recent_ids(inp), query, how)
    for section in sections:
        for piece in section.pieces:
            piece.cap(budget.item_cap_chars)
    head, foot = _header(inp, line), _footer(inp, tips)
    # The fit renders many times, changing one section at a time: a section whose pieces,
    # omissions, listed ids and level are as at its last render is not rendered again.
    done: dict[int, tuple[tuple[int, int, int, int], str]] = {}

    def rendered(section: Section) -> str:
        level = section.pieces[0].level if section.pieces else -1
        shape = (len(section.pieces), len(section.omitted), section.listed, level)
        kept = done.get(id(section))
        if kept is not None and kept[0] == shape:
            return kept[1]
        text = _render_section(section)
        done[id(section)] = (shape, text)
        return text

    def render(secs: list[Section]) -> str:
        return head + "".join(rendered(s) for s in secs) + foot

    measure = budget.measure()
    fit(sections, render, measure, budget.limit)
    stable = head + "".join(rendered(s) for s in sections if s.stable)
    volatile = "".join(rendered(s) for s in sections if not s.stable) + foot
    omitted = tuple(i for s in sections for i in s.omitted)
    return Context(stable, volatile, omitted, measure(stable + volatile), budget.unit)
