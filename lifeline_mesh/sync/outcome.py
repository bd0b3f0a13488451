"""What a node's sessions did, said the same way by `lifeline-mesh sync` and `serve`: the
items they refused alone, and a scheduled sync's one-line summary.

Both directions (decisions 0111, 0112): what this side refused of the items the peer sent
(an entry whose id does not match its content, a signature that does not verify, an entry
dated before its parent, a rolled-back state), and what the peer said, in its closing turn,
it refused of the items this side sent. Each is one line naming the line, the peer, how
many, the first reason and what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from lifeline.errors import PermissionDenied
from lifeline.wording import count, one_line
from lifeline_mesh.sync.driver import SyncReport

__all__ = ["refusal_warnings", "reported_if_refused", "scheduled_summary"]

log = logging.getLogger(__name__)


@contextmanager
def reported_if_refused(
    reports: list[SyncReport], line: str, role: str, *, go_on: bool
) -> Iterator[None]:
    """Around one line's sync in a loop over lines: a refusal of that line (the peer does
    not share it, or this node may not use it) is, with ``go_on``, appended to ``reports``
    as that line's ``error`` report and the next lines sync; without, it is raised."""
    try:
        yield
    except PermissionDenied as exc:
        if not go_on:
            raise
        reports.append(SyncReport(line, role, error=str(exc)))


def scheduled_summary(reports: Sequence[SyncReport], peer: str) -> str:
    """One scheduled sync with ``peer`` (one report per line) in a line; its refusals
    logged as warnings. A line the peer refused (its report's ``error``) is named as not
    synced; when it refused every line, that is raised: the sync failed (logged, retried
    later)."""
    if reports and all(r.error is not None for r in reports):
        raise PermissionDenied(str(reports[0].error))
    for report in reports:
        for warning in refusal_warnings(report, peer).values():
            log.warning("%s", warning)
    return "; ".join(_summary(r) for r in reports)


def _summary(r: SyncReport) -> str:
    if r.error is not None:
        return f"{r.line}: not synced ({r.error})"
    return (
        f"{r.line}: sent {r.entries_sent}, received {r.entries_received} "
        f"({r.entries_added} new), {r.bytes_sent}/{r.bytes_received} bytes out/in"
        + (
            f", refused {r.refused} of its items, it refused {r.refused_there} of ours "
            "(the log names them)"
            if r.refused or r.refused_there
            else ""
        )
    )


_HERE = (
    "line {line!r}: refused {n} from {peer} ({first}); the rest is stored, and entries that "
    "descend from a refused one wait for an intact copy. That node holds a damaged or "
    "altered copy, or an item the notary's rules refuse: `lifeline-mesh verify` there "
    "names it"
)
_THERE = (
    "line {line!r}: {peer} refused {n} this node sent ({first}); the rest is stored there, "
    "and what was refused (with what descends from it) stays here only. `lifeline verify` "
    "here names it: a damaged row (`lifeline recover`), or an entry dated before its parent "
    "(this machine's clock was behind when it was written); a refused signature or statement "
    "names its signer in the reason"
)


def refusal_warnings(r: SyncReport, peer: str) -> dict[str, str]:
    """The warnings for ``r``'s refusals, by direction: ``here`` (this side refused what
    the peer sent), ``there`` (the peer refused what this side sent); none when nothing was
    refused."""
    ways = (
        ("here", _HERE, r.refused, r.refusals),
        ("there", _THERE, r.refused_there, r.refusals_there),
    )
    return {
        way: text.format(
            line=r.line,
            n=count(refused, "item", "items"),
            peer=peer,
            first=one_line(reasons[0], 1000) if reasons else "no reason given",
        )
        for way, text, refused, reasons in ways
        if refused
    }
