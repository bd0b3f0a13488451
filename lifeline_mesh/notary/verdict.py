"""What ``lifeline-mesh verify`` reports, and how strictly: a finding, the audit's policy,
a line's verdict. The shapes the rules (``rules.py``, ``import_times.py``) fill; no rule
lives here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.audit.times import SKEW_S

__all__ = ["DEFAULT_BACKDATE_WINDOW_S", "DEFAULT_SKEW_S", "Finding", "Policy", "Verdict"]

# Honest NTP clocks agree in seconds; 5 minutes (as `lifeline verify`) hides no real backdate.
DEFAULT_SKEW_S = SKEW_S
# An entry written offline meets its first witness when the node reconnects: a day covers a
# laptop closed overnight; beyond, the claimed time is a candidate backdate.
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
    allow_unsigned: bool = False  # False: unsigned fails on a signed line (decision 0048)
    signed_line: bool = False  # set by the audit: the line holds an author signature


@dataclass(slots=True)
class Verdict:
    entries: int = 0
    signed: int = 0
    unsigned: int = 0
    attestations: int = 0
    imported: int = 0  # no author signature, but attested as imported by a node
    findings: list[Finding] = field(default_factory=list)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "fail"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "signed": self.signed,
            "unsigned": self.unsigned,
            "imported": self.imported,
            "attestations": self.attestations,
            "findings": [asdict(f) for f in self.findings],
        }
