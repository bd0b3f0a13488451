"""Membership and transport security: the mesh CA, invites and joins, revocations, mTLS.

Public API for the node and the notary; see docs/security.md for the model.
"""

from __future__ import annotations

from lifeline_mesh.membership.authz import (
    Authorizer,
    NotAuthenticated,
    PermissionDenied,
    authorize,
    cert_identity_from_context,
    identity_from_context,
    peer_error_from_rpc,
    status_for,
)
from lifeline_mesh.membership.ca import MeshCA, MeshInfo, create_mesh
from lifeline_mesh.membership.certs import CertIdentity, identity_from_cert
from lifeline_mesh.membership.invite import Token, issue_invite, parse_duration
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.membership.revocation import (
    Revocation,
    RevocationList,
    export_revocations,
    import_revocations,
    revoke,
    signer_status,
)
from lifeline_mesh.membership.tls import (
    channel_credentials,
    channel_options,
    join_server_credentials,
    require_loopback,
    server_credentials,
)

__all__ = [
    "Authorizer",
    "CertIdentity",
    "Member",
    "MeshCA",
    "MeshInfo",
    "NotAuthenticated",
    "PermissionDenied",
    "Registry",
    "Revocation",
    "RevocationList",
    "Token",
    "authorize",
    "cert_identity_from_context",
    "channel_credentials",
    "channel_options",
    "create_mesh",
    "export_revocations",
    "identity_from_cert",
    "identity_from_context",
    "import_revocations",
    "issue_invite",
    "join_server_credentials",
    "parse_duration",
    "peer_error_from_rpc",
    "require_loopback",
    "revoke",
    "server_credentials",
    "signer_status",
    "status_for",
]
