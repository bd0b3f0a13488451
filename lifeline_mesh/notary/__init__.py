"""The notary: ed25519 attestations about entries, their storage and their audit (DESIGN §6).

``statement`` (pure) defines the signed statements and their bytes; ``admission`` (pure)
decides what received items may be stored; ``rules`` (pure) audits a line; ``storage`` keeps
attestations in the line's SQLite file and exposes them as an opaque set for sync; ``sign``
signs on this node; ``audit`` drives ``lifeline-mesh verify``.
"""

from __future__ import annotations

from lifeline_mesh.notary.sign import (
    append_hook_factory,
    attest_state,
    sign_entries,
    sign_unsigned,
    summarize,
    witness,
)
from lifeline_mesh.notary.signers import FileSigners, KnownSigners, SignerState, SignerStatus
from lifeline_mesh.notary.statement import Attestation, Role, decode, sign
from lifeline_mesh.notary.storage import NotaryStore

__all__ = [
    "Attestation",
    "FileSigners",
    "KnownSigners",
    "NotaryStore",
    "Role",
    "SignerState",
    "SignerStatus",
    "append_hook_factory",
    "attest_state",
    "decode",
    "sign",
    "sign_entries",
    "sign_unsigned",
    "summarize",
    "witness",
]
