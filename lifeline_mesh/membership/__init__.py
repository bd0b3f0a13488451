"""Membership: the mesh CA, invites and joins, revocations, mTLS credentials, the authorizer.

Public API for the node and the notary; see docs/security.md for the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lifeline_mesh.transport import lazy_exports

if TYPE_CHECKING:
    from lifeline_mesh.membership.authz import MeshAuthorizer, authorize, cert_identity
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
        server_credentials,
    )

__all__ = [
    "CertIdentity",
    "Member",
    "MeshAuthorizer",
    "MeshCA",
    "MeshInfo",
    "Registry",
    "Revocation",
    "RevocationList",
    "Token",
    "authorize",
    "cert_identity",
    "channel_credentials",
    "channel_options",
    "create_mesh",
    "export_revocations",
    "identity_from_cert",
    "import_revocations",
    "issue_invite",
    "join_server_credentials",
    "parse_duration",
    "revoke",
    "server_credentials",
    "signer_status",
]

# Where each name lives: imported when first asked for, so that importing one module of
# the package (``membership.certs``, as every signed `lifeline log` does) does not load
# the CA, the invites and gRPC for it.
_HOME = {
    "CertIdentity": "lifeline_mesh.membership.certs",
    "Member": "lifeline_mesh.membership.registry",
    "MeshAuthorizer": "lifeline_mesh.membership.authz",
    "MeshCA": "lifeline_mesh.membership.ca",
    "MeshInfo": "lifeline_mesh.membership.ca",
    "Registry": "lifeline_mesh.membership.registry",
    "Revocation": "lifeline_mesh.membership.revocation",
    "RevocationList": "lifeline_mesh.membership.revocation",
    "Token": "lifeline_mesh.membership.invite",
    "authorize": "lifeline_mesh.membership.authz",
    "cert_identity": "lifeline_mesh.membership.authz",
    "channel_credentials": "lifeline_mesh.membership.tls",
    "channel_options": "lifeline_mesh.membership.tls",
    "create_mesh": "lifeline_mesh.membership.ca",
    "export_revocations": "lifeline_mesh.membership.revocation",
    "identity_from_cert": "lifeline_mesh.membership.certs",
    "import_revocations": "lifeline_mesh.membership.revocation",
    "issue_invite": "lifeline_mesh.membership.invite",
    "join_server_credentials": "lifeline_mesh.membership.tls",
    "parse_duration": "lifeline_mesh.membership.invite",
    "revoke": "lifeline_mesh.membership.revocation",
    "server_credentials": "lifeline_mesh.membership.tls",
    "signer_status": "lifeline_mesh.membership.revocation",
}


__getattr__ = lazy_exports(__name__, _HOME)
