"""Sizing a bundle to a budget: clip texts first, then drop facts group by group.

Order of sacrifice (docs/sessions.md, "Budget"):

0. (JSON) the sources' full detail: whole session ids and sha256, native ids — what the
   markdown shows is kept;
1. every fact's text is clipped to :data:`CAPS` characters, level by level;
2. then whole facts go, group by group, in :data:`DROP_ORDER` — from the intent history's
   middle (the goal and the latest request stay), the oldest files, finished todos… to the
   outstanding work last;
3. then the Provenance table (the facts keep their ``P`` numbers' absence explained).

Acceptance, the goal, the latest request and the do-not-touch list are never dropped.
Every omission is recorded on its group and rendered as ``[omitted N to fit the budget: …]``.
If even that does not fit, Acceptance says ``scope_sized: no``.
"""

from __future__ import annotations

from collections.abc import Callable

from lifeline.sessions.bundles.bundle import Bundle, Fact, Omission, SliceKind

__all__ = ["CAPS", "DROP_ORDER", "fit_bundle"]

CAPS = (1200, 400, 160, 80)
# (slice, group, which end goes first: "old" | "middle" | "new")
DROP_ORDER: tuple[tuple[SliceKind, str, str], ...] = (
    (SliceKind.INTENT, "history", "middle"),
    (SliceKind.CONTEXT, "files", "old"),
    (SliceKind.WORKLOG, "done", "old"),
    (SliceKind.DEDUP, "other_topics", "new"),
    (SliceKind.ACCEPTANCE, "status", "old"),
    (SliceKind.WORKLOG, "edits", "old"),
    (SliceKind.WORKLOG, "edits_failed", "old"),
    (SliceKind.WORKLOG, "last_reply", "old"),
    (SliceKind.DEDUP, "manifest", "middle"),
    (SliceKind.CONTRACT, "rules_files", "old"),
    (SliceKind.CONTRACT, "success_criteria", "new"),
    (SliceKind.CONTRACT, "rules", "new"),
    (SliceKind.WORKLOG, "edits_unchecked", "old"),
    (SliceKind.WORKLOG, "last_failure", "old"),
    (SliceKind.WORKLOG, "errors", "old"),
    (SliceKind.CONTRACT, "decisions", "old"),
    (SliceKind.CONTRACT, "refused", "old"),
    (SliceKind.WORKLOG, "edits_unconfirmed", "old"),
    (SliceKind.WORKLOG, "unanswered_calls", "old"),
    (SliceKind.WORKLOG, "queued_input", "old"),
    (SliceKind.WORKLOG, "outstanding", "old"),
)
_LISTED = 5  # omitted facts named in the marker; the rest are counted


def _victim(facts: list[Fact], end: str) -> int:
    if end == "old":
        return 0
    if end == "new":
        return len(facts) - 1
    return len(facts) // 2


def _omit(bundle: Bundle, kind: SliceKind, group: str, fact: Fact) -> None:
    gone = bundle.slices[kind].omitted.setdefault(group, Omission())
    gone.count += 1
    if len(gone.what) < _LISTED:
        flat = " ".join(fact.text.split())
        gone.what.append(
            flat if len(flat) <= 40 else "…" + flat[-39:] if "/" in flat else flat[:39] + "…"
        )


_SOURCE_LINE = "- P000: claude session 0123456789ab lines 1000-1000 sha256 0123456789abcdef\n"


def _freed(fact: Fact, cap: int, measure: Callable[[str], int]) -> int:
    """What dropping ``fact`` frees at most: its line and one provenance line per source
    (a source other facts cite stays, so this may overstate). The fitter scales it by what
    the previous batch really freed, so batches converge in a few renders; a batch may
    then drop a fact or two more than the exact minimum."""
    line = f"- [{fact.label}] {fact.flat[: cap or None]} [P000]\n"
    return measure(line + _SOURCE_LINE * len(fact.src))


def _over_at_any_cap(bundle: Bundle, measure: Callable[[str], int]) -> bool:
    """Whether the facts' texts alone, clipped to the tightest cap, are over the budget:
    every rendering holds at least those, so the renders before dropping are skipped."""
    tightest = CAPS[-1] - 1
    return measure("\n".join(f.flat[:tightest] for f in bundle.facts())) > bundle.budget


def fit_bundle(
    bundle: Bundle, render: Callable[[Bundle], str], measure: Callable[[str], int]
) -> str:
    """Shrink ``bundle`` in place until ``render`` measures within its budget; the text."""
    limit = bundle.budget
    if _over_at_any_cap(bundle, measure):  # the steps before dropping facts cannot fit:
        bundle.full_sources, bundle.cap = False, CAPS[-1]  # skip their renders
        text = render(bundle)
    else:
        text = render(bundle)
        if measure(text) <= limit:
            return _sized(bundle, render, text, fits=True)
        if bundle.full_sources:  # JSON's extra detail goes before any of the content
            bundle.full_sources = False
            text = render(bundle)
            if measure(text) <= limit:
                return _sized(bundle, render, text, fits=True)
        bundle.cap = CAPS[-1]  # when even the tightest clip is not enough, the levels
        text = render(bundle)  # between are skipped: the walk would end here as well
    if measure(text) <= limit:
        for cap in CAPS:
            bundle.cap = cap
            text = render(bundle)
            if measure(text) <= limit:
                return _sized(bundle, render, text, fits=True)
    for kind, group, end in DROP_ORDER:
        facts = bundle.slices[kind].groups.get(group, [])
        scale = 1.0  # what a batch really freed per unit estimated, learnt batch by batch
        size = measure(text)
        while facts and size > limit:
            estimated = 0.0
            while facts and estimated * scale < size - limit:  # re-measured after each batch
                gone = facts.pop(_victim(facts, end))
                _omit(bundle, kind, group, gone)
                estimated += _freed(gone, bundle.cap, measure)
            text = render(bundle)
            freed, size = size - measure(text), measure(text)
            scale = min(1.0, max(0.05, freed / estimated)) if estimated else 1.0
        if measure(text) <= limit:
            return _sized(bundle, render, text, fits=True)
    if measure(text) > limit:
        bundle.provenance_dropped = len(bundle.sources())
        text = render(bundle)
    return _sized(bundle, render, text, fits=measure(text) <= limit)


def _sized(bundle: Bundle, render: Callable[[Bundle], str], text: str, fits: bool) -> str:
    acceptance = bundle.slices[SliceKind.ACCEPTANCE].fields
    if acceptance.get("scope_sized") == fits:
        return text
    acceptance["scope_sized"] = fits
    return render(bundle)
