"""Admission rules for attestations and entries received from a peer.

Pure: no I/O. :func:`check_items` decides whether a batch of attestation items may be
stored (every item well-formed, under the caps, signed by the key its node id names, by a
signer that is known and was not revoked when it signed, and not dated in the receiver's
future). :func:`check_timing` applies the rules that need what the store already holds.
Any failure raises, so the caller stores nothing of the batch; a sync session judges each
item alone instead (:func:`timing_faults`, :func:`parent_fault`; decision 0112).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lifeline.entry import Entry
from lifeline.errors import BadSignature, EntryTooLarge, InvalidEntry
from lifeline.wording import noun
from lifeline_mesh.notary.enrollment import LearningSigners
from lifeline_mesh.notary.import_times import import_refusal
from lifeline_mesh.notary.rules import DEFAULT_BACKDATE_WINDOW_S, DEFAULT_SKEW_S
from lifeline_mesh.notary.signers import KnownSigners, SignerState
from lifeline_mesh.notary.statement import Attestation, Role, decode, made_together, ts_micros

__all__ = [
    "MAX_ADMIT_ITEMS",
    "StoredContext",
    "UnknownSigner",
    "check_entry_times",
    "check_items",
    "check_timing",
    "future_dated",
    "parent_fault",
    "timing_faults",
]

MAX_ADMIT_ITEMS = 10_000  # per call; a sync batch of ~1 MiB holds far fewer


class UnknownSigner(BadSignature):
    """Signed by a node that is neither a member nor a runner proven so far."""


def check_items(
    items: Sequence[bytes | Attestation],
    now: str,
    signers: KnownSigners | None = None,
    skew_s: float = DEFAULT_SKEW_S,
    *,
    signatures: bool = True,
    future: list[Attestation] | None = None,
) -> list[Attestation]:
    """Decode (unless already decoded) and verify every item, or raise for the first bad one.

    With ``signatures=False`` every rule but the ed25519 check itself is applied: for a
    caller that verified the batch's signatures elsewhere (in a worker process). With
    ``future``, an item dated after this node's clock plus ``skew_s`` (its signer's clock
    is ahead) is put there instead of failing the batch: it is held back, not stored, and
    taken once it is within the tolerance (decision 0084).
    """
    if len(items) > MAX_ADMIT_ITEMS:
        raise EntryTooLarge(
            f"{len(items)} attestations in one batch, over the cap of {MAX_ADMIT_ITEMS}; "
            "send smaller batches"
        )
    limit = ts_micros(now) + int(skew_s * 1e6)
    out: list[Attestation] = []
    members: set[str] = set()  # signers found members in this batch (learning only adds)
    for n, item in enumerate(items):
        try:
            att = item if isinstance(item, Attestation) else decode(item)
            att.verify(signature=signatures)
            if signers is not None and (att.node_id not in members or att.role is Role.ENROLLED):
                _check_signer(att, signers)
                members.add(att.node_id)
            if att.sort_key > limit and future is not None:
                future.append(att)
                continue
            if att.sort_key > limit:
                raise InvalidEntry(
                    f"{att.role.value} attestation by {att.node_id} is dated {att.ts}, after "
                    f"this node's clock ({now}) plus the {skew_s:g}s skew tolerance: "
                    "future-dated"
                )
        except InvalidEntry as exc:
            raise type(exc)(f"attestation {n} of the batch refused: {exc}") from exc
        out.append(att)
    return out


def _check_signer(att: Attestation, signers: KnownSigners) -> None:
    """A signer must be a member. A *revoked* member's signatures are admitted even when
    dated after the revocation: members that learned of it later may already hold them,
    and refusing them would stop every sync with those members for good (the sets must
    converge). ``verify`` flags each one as ``revoked-signer``, and a revoked node cannot
    connect to send new ones. An ``enrolled`` statement makes its runner known to what
    follows (its certificate must be the mesh CA's: decision 0024)."""
    if att.role is Role.ENROLLED and isinstance(signers, LearningSigners):
        signers.learn(att)
    status = signers.status(att.node_id)
    if status.state is SignerState.UNKNOWN:
        raise UnknownSigner(
            f"{att.role.value} attestation signed by {att.node_id}, which is not a member of "
            "this mesh; it is refused (add the node to the members registry if it should be)"
        )


@dataclass(frozen=True, slots=True)
class StoredContext:
    """What the store holds that bears on a batch (read in the admitting transaction)."""

    entry_ts: Mapping[str, str]  # entry id -> stored ts (subjects and their parents)
    entry_parents: Mapping[str, tuple[str, ...]]
    summary_counts: Mapping[tuple[str, str], list[tuple[str, int]]]  # (node, line) -> (ts, n)
    witnessed: Mapping[str, list[tuple[str, str]]]  # entry id -> (witness ts, witness node)
    # held subject -> the earliest ts of its children held (none: not in the mapping)
    child_ts: Mapping[str, str] = field(default_factory=dict)


def check_timing(
    atts: Sequence[Attestation],
    ctx: StoredContext,
    skew_s: float,
    backdate_window_s: float = DEFAULT_BACKDATE_WINDOW_S,
) -> None:
    """Refuse a provable backdate, a time contradicted by a witness, or a rolled-back summary:
    raises for the first of :func:`timing_faults`, so the caller stores nothing of the batch.
    """
    faults = timing_faults(atts, ctx, skew_s, backdate_window_s)
    if faults:
        raise InvalidEntry(faults[min(faults)])


def timing_faults(
    atts: Sequence[Attestation],
    ctx: StoredContext,
    skew_s: float,
    backdate_window_s: float = DEFAULT_BACKDATE_WINDOW_S,
) -> dict[int, str]:
    """Why each of ``atts`` that fails a rule checked against what is held is refused, by
    its place in ``atts``: a provable backdate, a time contradicted by a witness, a
    rolled-back summary. A session refuses each alone and stores the rest (decision 0112).

    Witness evidence is used when it is at hand (held, or in the same batch); a backdate whose
    receipts arrive later is stored and then flagged by ``lifeline-mesh verify``.
    """
    out: dict[int, str] = {}
    for n, att in enumerate(atts):
        why: str | None = None
        if att.role is Role.AUTHOR:
            why = (
                _parents_fault(att, ctx, skew_s)
                or _children_fault(att, ctx, skew_s)
                or _witness_fault(
                    att, ctx.witnessed.get(att.subject, []), skew_s, backdate_window_s
                )
            )
        elif att.role is Role.SUMMARY or att.role is Role.STATE:
            why = _rollback_fault(att, ctx)
        if why is not None:
            out[n] = why
    return out


def _rollback_fault(att: Attestation, ctx: StoredContext) -> str | None:
    for ts, count in ctx.summary_counts.get((att.node_id, att.subject), []):
        # Signed together, two statements may be dated in the wrong order: that is
        # no rollback (decision 0035), and refusing it would cut the node off.
        if ts < att.ts and count > att.summary_count and not made_together(ts, att.ts):
            return (
                f"{att.role.value} statement by {att.node_id} at {att.ts} says line "
                f"{att.subject!r} holds "
                f"{att.summary_count} {noun(att.summary_count, 'entry', 'entries')}"
                f", fewer than the {count} it signed at "
                f"{ts}: its store was truncated or rolled back; refused"
            )
    return None


def _parents_fault(att: Attestation, ctx: StoredContext, skew_s: float) -> str | None:
    for parent in ctx.entry_parents.get(att.subject, ()):
        parent_ts = ctx.entry_ts.get(parent)
        if parent_ts is not None and _later_by(parent_ts, att.ts, skew_s):
            return (
                f"author attestation by {att.node_id} dates entry {att.subject[:12]} "
                f"{att.ts}, before its parent {parent[:12]} ({parent_ts}): backdated; refused"
            )
    return None


def _children_fault(att: Attestation, ctx: StoredContext, skew_s: float) -> str | None:
    """An author signature dating its entry after a child held: its author wrote it before
    anyone could cite it, so the signature is not its author's. Signatures win over an
    unsigned ts (decision 0048): a member's for an entry nobody signed, dated after its
    children, moved it there and cut those children off every node that took it next."""
    child_ts = ctx.child_ts.get(att.subject)
    if child_ts is not None and _later_by(att.ts, child_ts, skew_s):
        return (
            f"author attestation by {att.node_id} dates entry {att.subject[:12]} {att.ts}, "
            f"after a child of it held ({child_ts}): not its author's; refused"
        )
    return None


def _witness_fault(
    att: Attestation, seen: list[tuple[str, str]], skew_s: float, window_s: float
) -> str | None:
    others = sorted(ts for ts, node in seen if node != att.node_id)
    if not others:
        return None
    gap = _gap(others[0], att.ts)
    if gap < -skew_s:
        return (
            f"author attestation dates entry {att.subject[:12]} {att.ts}, after a witness "
            f"held it at {others[0]}: future-dated; refused"
        )
    if gap > window_s:
        return (
            f"author attestation dates entry {att.subject[:12]} {att.ts}, {gap / 3600:.1f}h "
            f"before its first witness ({others[0]}): backdated beyond the "
            f"{window_s / 3600:g}h window; refused"
        )
    return None


def _gap(later: str, earlier: str) -> float:
    return (ts_micros(later) - ts_micros(earlier)) / 1e6


def future_dated(ts: str, now: str, skew_s: float) -> bool:
    """Whether ``ts`` is more than ``skew_s`` after ``now`` (both in stored form)."""
    return ts > now and _gap(ts, now) > skew_s


def _later_by(parent_ts: str, ts: str, skew_s: float) -> bool:
    """Whether ``parent_ts`` is more than ``skew_s`` after ``ts`` (both in stored form)."""
    # Stored-form times order as strings: a parent not after its child (nearly every
    # entry received) needs no arithmetic. A negative skew never occurs but stays exact.
    if parent_ts <= ts and skew_s >= 0:
        return False
    return _gap(parent_ts, ts) > skew_s


def check_entry_times(
    entries: Sequence[Entry],
    signed_ts: Mapping[str, set[str]],
    known_ts: Mapping[str, str],
    skew_s: float = DEFAULT_SKEW_S,
    attested: Mapping[str, set[str]] | None = None,
) -> None:
    """Refuse received entries whose ts contradicts what is signed or their parents' ts.

    ``signed_ts`` maps an entry id to the ts of its author attestations already held;
    ``known_ts`` gives the ts of stored entries (and of the batch itself); ``attested``,
    the ts the import attestations held fix for entries no author signed (decision 0119).
    """
    for entry in entries:
        signed = signed_ts.get(entry.id)
        if signed and entry.ts not in signed:
            raise BadSignature(
                f"entry {entry.id[:12]} arrives with ts {entry.ts}, but its author signed "
                f"{', '.join(sorted(signed))}: the time was edited; refused"
            )
        fixed = None if signed or attested is None else attested.get(entry.id)
        if fixed and entry.ts not in fixed:
            raise InvalidEntry(f"entry {entry.id[:12]}: {import_refusal(entry, fixed)}")
        why = parent_fault(entry, known_ts, skew_s)
        if why is not None:
            raise InvalidEntry(why)


def parent_fault(entry: Entry, known_ts: Mapping[str, str], skew_s: float) -> str | None:
    """Why ``entry`` is refused when it is dated before one of its parents (``known_ts``:
    the ts of the parents at hand) by more than ``skew_s``: a child cannot be older than
    what it names. None when it is not."""
    for parent in entry.parents:
        parent_ts = known_ts.get(parent)
        if parent_ts is not None and _later_by(parent_ts, entry.ts, skew_s):
            return (
                f"entry {entry.id[:12]} claims {entry.ts}, before its parent "
                f"{parent[:12]} ({parent_ts}): backdated; refused"
            )
    return None
