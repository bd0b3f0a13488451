"""The notary's verification rules: entries + attestations + signer statuses → findings.

Pure: no I/O, no clock. ``lifeline-mesh verify`` feeds it what a line holds; tests feed it
forged corpora directly. Each finding names one rule (``check``) and is either a failure
(``fail``) or a note that does not fail verification (``note``). docs/notary.md lists the
rules and what they cannot prove.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import defaultdict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lifeline.audit.line import Linked
from lifeline.entry import Entry, format_ts
from lifeline.errors import BadSignature, InvalidEntry
from lifeline.wording import count, noun
from lifeline_mesh.notary.import_times import attests, import_findings
from lifeline_mesh.notary.signers import KnownSigners, SignerState
from lifeline_mesh.notary.statement import (
    Attestation,
    Role,
    decode,
    made_together,
    tips_digest,
)
from lifeline_mesh.notary.times import canonical_ts, micros, seconds_between, unreadable
from lifeline_mesh.notary.verdict import (
    DEFAULT_BACKDATE_WINDOW_S,
    DEFAULT_SKEW_S,
    Finding,
    Policy,
    Verdict,
)
from lifeline_mesh.notary.witnessing import Mark, first_witnesses, marks_of

__all__ = [
    "DEFAULT_BACKDATE_WINDOW_S",
    "DEFAULT_SKEW_S",
    "UNSIGNED",
    "Checked",
    "Finding",
    "Policy",
    "Verdict",
    "anchor_findings",
    "check_attestations",
    "entry_findings",
    "missing_findings",
    "signer_findings",
    "state_findings",
    "summary_truncation",
    "unsigned_detail",
    "unsigned_severity",
    "verify_items",
    "window_findings",
]


_DEFAULT_POLICY = Policy()  # frozen: one default shared by every call


@dataclass(slots=True)
class Checked:
    """Items after decoding and signature checks: the valid ones and the findings."""

    count: int = 0
    valid: list[Attestation] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def merge(self, other: Checked) -> Checked:
        return Checked(
            self.count + other.count, self.valid + other.valid, self.findings + other.findings
        )


def verify_items(items: Iterable[bytes]) -> Checked:
    """Decode and verify items (independent per item, so callers may split the work)."""
    out = Checked()
    for item in items:
        out.count += 1
        try:
            att = decode(item)
            att.verify()
        except BadSignature as exc:
            check = "signer-mismatch" if "re-signed" in str(exc) else "bad-signature"
            out.findings.append(Finding(check, _hex_id(item), str(exc)))
            continue
        except InvalidEntry as exc:
            out.findings.append(Finding("malformed-attestation", _hex_id(item), str(exc)))
            continue
        out.valid.append(att)
    return out


def _hex_id(item: bytes) -> str:
    return hashlib.sha256(item).hexdigest()


def signer_findings(atts: Sequence[Attestation], signers: KnownSigners) -> list[Finding]:
    out: list[Finding] = []
    for att in atts:
        status = signers.status(att.node_id)
        about = att.subject if att.role is Role.AUTHOR else att.id.hex()
        if status.state is SignerState.UNKNOWN:
            out.append(
                Finding(
                    "unknown-signer",
                    about,
                    f"{att.role.value} signature by {att.node_id}, which is not a member of "
                    "this mesh; add it to members.json if it should be trusted",
                )
            )
        elif status.state is SignerState.REVOKED and status.revoked_at is not None:
            late = att.ts >= status.revoked_at
            out.append(
                Finding(
                    "revoked-signer",
                    about,
                    f"{att.role.value} signature by {att.node_id} at {att.ts}; the node was "
                    f"revoked at {status.revoked_at}"
                    + ("" if late else " (signed before revocation)"),
                    "fail" if late else "note",
                )
            )
        if att.role is Role.ENROLLED:
            continue  # dated at its certificate's start: nothing to say about its expiry
        if status.expires_at is not None and status.state is not SignerState.UNKNOWN:
            out.extend(_expiry_findings(att, about, status.expires_at))
    return out


def _expiry_findings(att: Attestation, about: str, expires_at: str) -> list[Finding]:
    """An ephemeral runner's signature: made after its certificate expired (fail), or
    made while it was valid by a runner that has expired since (a note: that is normal)."""
    if att.ts >= expires_at:
        detail = (
            f"{att.role.value} signature by {att.node_id} at {att.ts}; its certificate "
            f"expired at {expires_at}, so it was signed after expiry"
        )
        return [Finding("signed-after-expiry", about, detail, "fail")]
    if expires_at <= format_ts(dt.datetime.now(dt.UTC)):
        detail = (
            f"{att.role.value} signature by {att.node_id} at {att.ts}, while it was a runner; "
            f"its certificate expired after signing, at {expires_at}"
        )
        return [Finding("expired-after-signing", about, detail, "note")]
    return []


def check_attestations(
    entries: Sequence[Entry],
    items: Iterable[bytes] | Checked,
    signers: KnownSigners,
    policy: Policy = _DEFAULT_POLICY,
) -> Verdict:
    """Apply every notary rule to one line's entries and attestation items.

    ``items`` may be raw items or the result of :func:`verify_items` (done in parallel).
    """
    checked = items if isinstance(items, Checked) else verify_items(items)
    verdict = Verdict(entries=len(entries), attestations=checked.count)
    verdict.findings.extend(checked.findings)
    atts = checked.valid
    if not policy.signed_line and any(a.role is Role.AUTHOR for a in atts):
        policy = replace(policy, signed_line=True)
    verdict.findings.extend(signer_findings(atts, signers))
    trusted = [a for a in atts if signers.status(a.node_id).state is not SignerState.UNKNOWN]
    authors: dict[str, list[Attestation]] = defaultdict(list)
    imports: dict[str, list[Attestation]] = defaultdict(list)
    for att in atts:
        if att.role is Role.AUTHOR:
            authors[att.subject].append(att)
    for att in trusted:
        if att.role is Role.IMPORTED:
            imports[att.subject].append(att)
    # Earliest witnesses of every entry, in one pass over the line (witnessing.py).
    witnesses = first_witnesses(entries, marks_of(trusted))
    ts_of = {e.id: e.ts for e in entries}
    for entry in entries:
        mine, held = authors.get(entry.id, []), imports.get(entry.id, [])
        verdict.findings.extend(entry_findings(entry, mine, held, ts_of, policy))
        if mine:
            verdict.signed += 1
            verdict.findings.extend(window_findings(entry, mine, witnesses, policy))
        elif attests(held, entry.ts):
            verdict.imported += 1
        else:
            verdict.unsigned += 1
    verdict.findings.extend(summary_truncation(atts, ts_of, len(ts_of), policy))
    missing: dict[str, bool] = {}
    for att in atts:
        for entry_id in att.entry_ids():
            if entry_id not in ts_of:
                missing[entry_id] = missing.get(entry_id, False) or _local(att, policy)
    verdict.findings.extend(missing_findings(missing))
    verdict.findings.extend(state_findings(atts, ts_of, policy))
    return verdict


def window_findings(
    entry: Entry,
    authors: Sequence[Attestation],
    witnesses: Mapping[str, Sequence[Mark]],
    policy: Policy,
) -> list[Finding]:
    """A signed entry against its first witness that is not one of its authors."""
    witness = _first_other(witnesses.get(entry.id, ()), {a.node_id for a in authors})
    return [] if witness is None else _window(entry, witness, policy)


def _local(att: Attestation, policy: Policy) -> bool:
    return att.node_id == policy.local_node_id


UNSIGNED = (
    "no author signature (imported unsigned, e.g. from lifeline-context, or "
    "written without a node identity); not a forgery by itself"
)
UNSIGNED_ON_SIGNED_LINE = (
    "no author signature on a line its nodes sign: stripped or never sent, so its ts is nobody's"
    " (imported from lifeline-context? `lifeline-mesh sign --unsigned`, or --allow-unsigned)"
)


def unsigned_severity(policy: Policy) -> str:
    strict = policy.require_signed or (policy.signed_line and not policy.allow_unsigned)
    return "fail" if strict else "note"


def unsigned_detail(policy: Policy) -> str:
    return UNSIGNED_ON_SIGNED_LINE if unsigned_severity(policy) == "fail" else UNSIGNED


def _first_other(marks: Sequence[Mark], authors: set[str]) -> Mark | None:
    """The earliest witness that is not one of the entry's authors."""
    return next((m for m in marks if m[1] not in authors), None)


def entry_findings(
    entry: Linked,
    authors: Sequence[Attestation],
    imports: Sequence[Attestation],
    ts_of: Mapping[str, str],
    policy: Policy,
) -> list[Finding]:
    """One entry's own rules: signed or not, its ts as signed, not before its parents
    (``ts_of`` maps at least the entry's stored parents to their ts)."""
    out: list[Finding] = []
    if not authors:
        out.extend(import_findings(entry, imports, authored=False, local=policy.local_node_id))
        edited = any(f.check == "ts-mismatch" for f in out)
        if not attests(imports, entry.ts) and not edited:
            # another node's claim of another ts moves nothing: as unsigned (decision 0122)
            why, severity = unsigned_detail(policy), unsigned_severity(policy)
            out.insert(0, Finding("unsigned", entry.id, why, severity))
    elif all(a.ts != entry.ts for a in authors):
        signed = ", ".join(sorted({a.ts for a in authors}))
        out.append(
            Finding(
                "ts-mismatch",
                entry.id,
                f"stored ts {entry.ts} is not the signed ts ({signed}); "
                "the time was edited after signing",
            )
        )
    if authors and imports:
        out.extend(import_findings(entry, imports, authored=True))
    # An unsigned entry's ts was never bound by anyone (lifeline-context's `approve` keeps
    # the proposal's older ts): its timing is a note, as the unsigned finding itself.
    timing = "fail" if authors or policy.require_signed else "note"
    unread = False
    for parent in entry.parents:
        other = ts_of.get(parent)
        if other is None or (other <= entry.ts and canonical_ts(other) and canonical_ts(entry.ts)):
            continue  # stored-form times order as strings: not after, so not a backdate
        gap = seconds_between(other, entry.ts)
        if gap is None:
            unread = unread or micros(entry.ts) is None  # a parent's own is its finding
            continue
        if gap > policy.skew_s:
            out.append(
                Finding(
                    "ts-before-parent",
                    entry.id,
                    f"ts {entry.ts} is before its parent {parent[:12]}'s ts {other} "
                    f"(more than the {policy.skew_s:g}s skew tolerance); possible backdate",
                    timing,
                )
            )
    if unread:
        out.append(Finding("ts-unreadable", entry.id, unreadable(entry.ts, "its parents"), timing))
    return out


def _window(entry: Entry, witness: tuple[str, str], policy: Policy) -> list[Finding]:
    seen_at, by = witness
    gap = seconds_between(seen_at, entry.ts)
    if gap is None:
        against = f"its first witness ({by} at {seen_at})"
        return [Finding("ts-unreadable", entry.id, unreadable(entry.ts, against))]
    if gap < -policy.skew_s:
        return [
            Finding(
                "future-dated",
                entry.id,
                f"claims {entry.ts} but {by} already held it at {seen_at} "
                f"({-gap:.0f}s earlier, skew tolerance {policy.skew_s:g}s)",
            )
        ]
    if gap > policy.backdate_window_s:
        return [
            Finding(
                "possible-backdate",
                entry.id,
                f"claims {entry.ts} but was first witnessed by {by} at {seen_at}, "
                f"{gap / 3600:.1f}h later (window {policy.backdate_window_s / 3600:g}h)",
            )
        ]
    return []


def summary_truncation(
    atts: Iterable[Attestation], held: Container[str], count: int, policy: Policy
) -> list[Finding]:
    """This node's own summaries and states naming more entries (or tips) than the store
    holds (``count`` entries): a truncated or rolled-back store."""
    out: list[Finding] = []
    for att in atts:
        if att.role is not Role.SUMMARY and att.role is not Role.STATE:
            continue
        if att.role is Role.STATE and not _local(att, policy):
            continue  # see state_findings
        gone = [t for t in att.summary_tips if t not in held]
        if _local(att, policy) and (gone or att.summary_count > count):
            out.append(
                Finding(
                    "truncated",
                    att.id.hex(),
                    f"this node signed ({att.role.value}) at {att.ts} that line "
                    f"{att.subject!r} held "
                    f"{att.summary_count} {noun(att.summary_count, 'entry', 'entries')}"
                    f" (tips {len(att.summary_tips)}); it now "
                    f"holds {count} and {len(gone)} of those tips are gone",
                )
            )
    return out


def anchor_findings(
    anchored: Sequence[tuple[str, str]], authors: Mapping[str, Sequence[Attestation]]
) -> list[Finding]:
    """An entry its author signed whose parent is an external anchor the line does not
    hold (``anchored``: (child, parent)). An anchor is a parent a markdown import could not
    reproduce, so only imported entries, which nobody signed, name one: a signed entry was
    written on parents its author held. A peer declared it so to pass off a parent it
    withholds, or to hide a cross-line parent's line from ``external-missing``
    (decision 0123)."""
    out = []
    for child, parent in anchored:
        signers = sorted({a.node_id for a in authors.get(child, ())})
        if signers:
            detail = (
                f"parent {parent[:12]} is declared an external anchor, a parent a markdown "
                f"import could not reproduce, but {', '.join(signers)} signed this entry as "
                "its author, on parents it held: the parent is withheld or the declaration "
                "false (a peer sent it with the entry)"
            )
            out.append(Finding("anchor-signed", child, detail))
    return out


def missing_findings(missing: Mapping[str, bool]) -> list[Finding]:
    """Entries signed for (id → whether this node signed) that the store does not hold."""
    out: list[Finding] = []
    for entry_id, local in sorted(missing.items()):
        if local:
            detail = (
                "this node signed for this entry but the store no longer holds it; "
                "the store was truncated or rolled back"
            )
            out.append(Finding("truncated", entry_id, detail))
        else:
            detail = "another node signed for this entry; it has not reached this store yet"
            out.append(Finding("attested-missing", entry_id, detail, "note"))
    return out


def _reordered(top: Attestation, att: Attestation) -> Finding:
    return Finding(
        "reordered-states",
        att.id.hex(),
        f"{att.node_id} signed at {att.ts} that line {att.subject!r} held "
        f"{att.summary_count} {noun(att.summary_count, 'entry', 'entries')}"
        f", and at {top.ts}, less than a second earlier, "
        f"{top.summary_count}: two statements made together and dated in the wrong order "
        "(decision 0035), not a rollback",
        "note",
    )


def state_findings(
    atts: Iterable[Attestation], held: Container[str], policy: Policy
) -> list[Finding]:
    """Rules for state statements: a node's count never falls; parts agree with their
    digest; tips another node names that this store does not hold are noted."""
    states = sorted((a for a in atts if a.role is Role.STATE), key=lambda a: (a.ts, a.id))
    out: list[Finding] = []
    highest: dict[tuple[str, str], Attestation] = {}
    parts: dict[tuple[str, str, tuple[str, str, str]], list[Attestation]] = defaultdict(list)
    for att in states:
        parts[(att.node_id, att.ts, att.state_key)].append(att)
        key = (att.node_id, att.subject)
        top = highest.get(key)
        if top is not None and top.summary_count > att.summary_count and top.ts < att.ts:
            out.append(
                _reordered(top, att)
                if made_together(top.ts, att.ts)
                else Finding(
                    "rollback",
                    att.id.hex(),
                    f"{att.node_id} signed at {att.ts} that line {att.subject!r} held "
                    f"{att.summary_count} {noun(att.summary_count, 'entry', 'entries')}"
                    f", fewer than the {top.summary_count} it signed "
                    f"at {top.ts}: its store was truncated or rolled back",
                )
            )
        if top is None or att.summary_count > top.summary_count:
            highest[key] = att
        gone = [t for t in att.summary_tips if t not in held]
        if gone and att.node_id != policy.local_node_id:
            out.append(
                Finding(
                    "unknown-tips",
                    att.id.hex(),
                    f"{att.node_id} signed at {att.ts} a state whose {count(len(gone), 'tip')} "
                    f"(first {gone[0][:12]}) this store does not hold: not arrived yet, or "
                    "never existed; it witnesses nothing here",
                    "note",
                )
            )
    for group in parts.values():
        out.extend(_parts_findings(group))
    return out


def _parts_findings(group: list[Attestation]) -> list[Finding]:
    """A state signed in n parts: all present, and their tips hash to the signed digest."""
    n = group[0].part[1]
    if n == 1:
        return []  # decode checked the digest of a single part
    held = {a.part[0]: a for a in group}
    if len(held) < n:
        return [
            Finding(
                "statement-incomplete",
                group[0].id.hex(),
                f"state by {group[0].node_id} at {group[0].ts}: {len(held)} of {n} parts held",
                "note",
            )
        ]
    tips = [t for k in sorted(held) for t in held[k].summary_tips]
    if tips_digest(tips) == group[0].state_key[2] and len(set(tips)) == len(tips):
        return []
    return [
        Finding(
            "malformed-attestation",
            group[0].id.hex(),
            f"state by {group[0].node_id} at {group[0].ts}: the tips of its {n} parts do not "
            "hash to the digest it signed",
        )
    ]
