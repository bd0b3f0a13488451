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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.entry import Entry, format_ts
from lifeline.errors import BadSignature, InvalidEntry
from lifeline_mesh.notary.signers import KnownSigners, SignerState
from lifeline_mesh.notary.statement import Attestation, Role, decode, ts_micros

__all__ = [
    "DEFAULT_BACKDATE_WINDOW_S",
    "DEFAULT_SKEW_S",
    "Checked",
    "Finding",
    "Policy",
    "Verdict",
    "check_attestations",
    "verify_items",
]

# Clocks of honest nodes on NTP agree within seconds; five minutes leaves room for a laptop
# that has not synced its clock for a while without hiding a real backdate.
DEFAULT_SKEW_S = 300.0
# An entry written offline reaches its first witness when the node reconnects; a day covers
# a laptop closed overnight. Beyond it the claimed time is a candidate backdate.
DEFAULT_BACKDATE_WINDOW_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    subject: str  # entry id (hex) or attestation id (hex)
    detail: str
    severity: str = "fail"  # fail | note


@dataclass(frozen=True, slots=True)
class Policy:
    local_node_id: str | None = None
    skew_s: float = DEFAULT_SKEW_S
    backdate_window_s: float = DEFAULT_BACKDATE_WINDOW_S
    require_signed: bool = False


@dataclass(slots=True)
class Verdict:
    entries: int = 0
    signed: int = 0
    unsigned: int = 0
    attestations: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "fail"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "signed": self.signed,
            "unsigned": self.unsigned,
            "attestations": self.attestations,
            "findings": [asdict(f) for f in self.findings],
        }


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


def _signer_findings(atts: Sequence[Attestation], signers: KnownSigners) -> list[Finding]:
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
    policy: Policy = Policy(),
) -> Verdict:
    """Apply every notary rule to one line's entries and attestation items.

    ``items`` may be raw items or the result of :func:`verify_items` (done in parallel).
    """
    checked = items if isinstance(items, Checked) else verify_items(items)
    verdict = Verdict(entries=len(entries), attestations=checked.count)
    verdict.findings.extend(checked.findings)
    atts = checked.valid
    verdict.findings.extend(_signer_findings(atts, signers))
    trusted = [a for a in atts if signers.status(a.node_id).state is not SignerState.UNKNOWN]
    authors: dict[str, list[Attestation]] = defaultdict(list)
    first_witness: dict[str, tuple[str, str]] = {}
    for att in atts:
        if att.role is Role.AUTHOR:
            authors[att.subject].append(att)
    for att in trusted:
        if att.role is Role.WITNESS:
            for entry_id in att.extras:
                seen = first_witness.get(entry_id)
                if seen is None or att.ts < seen[0]:
                    first_witness[entry_id] = (att.ts, att.node_id)
    by_id = {e.id: e for e in entries}
    for entry in entries:
        verdict.findings.extend(_entry_findings(entry, authors.get(entry.id, []), by_id, policy))
        if authors.get(entry.id):
            verdict.signed += 1
            witness = first_witness.get(entry.id)
            signer_ids = {a.node_id for a in authors[entry.id]}
            if witness is not None and witness[1] not in signer_ids:
                verdict.findings.extend(_window(entry, witness, policy))
        else:
            verdict.unsigned += 1
    verdict.findings.extend(_truncation(atts, by_id, policy))
    return verdict


def _entry_findings(
    entry: Entry, authors: list[Attestation], by_id: dict[str, Entry], policy: Policy
) -> list[Finding]:
    out: list[Finding] = []
    if not authors:
        out.append(
            Finding(
                "unsigned",
                entry.id,
                "no author signature (imported unsigned, e.g. from lifeline-context, or "
                "written without a node identity); not a forgery by itself",
                "fail" if policy.require_signed else "note",
            )
        )
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
    for parent in entry.parents:
        other = by_id.get(parent)
        if other is not None and _seconds(other.ts, entry.ts) > policy.skew_s:
            out.append(
                Finding(
                    "ts-before-parent",
                    entry.id,
                    f"ts {entry.ts} is before its parent {parent[:12]}'s ts {other.ts} "
                    f"(more than the {policy.skew_s:g}s skew tolerance); possible backdate",
                )
            )
    return out


def _seconds(later: str, earlier: str) -> float:
    """How many seconds ``later`` is after ``earlier`` (negative when before)."""
    return (ts_micros(later) - ts_micros(earlier)) / 1e6


def _window(entry: Entry, witness: tuple[str, str], policy: Policy) -> list[Finding]:
    seen_at, by = witness
    gap = _seconds(seen_at, entry.ts)
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


def _truncation(
    atts: Sequence[Attestation], by_id: dict[str, Entry], policy: Policy
) -> list[Finding]:
    """Entries this node signed for but no longer holds: a truncated or rolled-back store."""
    out: list[Finding] = []
    missing: dict[str, bool] = {}
    for att in atts:
        local = att.node_id == policy.local_node_id
        if att.role is Role.SUMMARY:
            gone = [t for t in att.summary_tips if t not in by_id]
            if local and (gone or att.summary_count > len(by_id)):
                out.append(
                    Finding(
                        "truncated",
                        att.id.hex(),
                        f"this node signed at {att.ts} that line {att.subject!r} held "
                        f"{att.summary_count} entries (tips {len(att.summary_tips)}); it now "
                        f"holds {len(by_id)} and {len(gone)} of those tips are gone",
                    )
                )
            continue
        for entry_id in att.entry_ids():
            if entry_id not in by_id:
                missing[entry_id] = missing.get(entry_id, False) or local
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
