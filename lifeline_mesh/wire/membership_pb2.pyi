from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class JoinRequest(_message.Message):
    __slots__ = ("token_id", "proof", "csr_der", "node_public_key", "node_signature")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    CSR_DER_FIELD_NUMBER: _ClassVar[int]
    NODE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    NODE_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    token_id: bytes
    proof: bytes
    csr_der: bytes
    node_public_key: bytes
    node_signature: bytes
    def __init__(self, token_id: _Optional[bytes] = ..., proof: _Optional[bytes] = ..., csr_der: _Optional[bytes] = ..., node_public_key: _Optional[bytes] = ..., node_signature: _Optional[bytes] = ...) -> None: ...

class JoinReply(_message.Message):
    __slots__ = ("node_cert_pem", "ca_cert_pem", "members_json", "revocations_json", "role", "mesh_id")
    NODE_CERT_PEM_FIELD_NUMBER: _ClassVar[int]
    CA_CERT_PEM_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_JSON_FIELD_NUMBER: _ClassVar[int]
    REVOCATIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    MESH_ID_FIELD_NUMBER: _ClassVar[int]
    node_cert_pem: bytes
    ca_cert_pem: bytes
    members_json: str
    revocations_json: str
    role: str
    mesh_id: str
    def __init__(self, node_cert_pem: _Optional[bytes] = ..., ca_cert_pem: _Optional[bytes] = ..., members_json: _Optional[str] = ..., revocations_json: _Optional[str] = ..., role: _Optional[str] = ..., mesh_id: _Optional[str] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIReply(_message.Message):
    __slots__ = ("node_id", "mesh_id", "role", "server_node_id")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    MESH_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SERVER_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    mesh_id: str
    role: str
    server_node_id: str
    def __init__(self, node_id: _Optional[str] = ..., mesh_id: _Optional[str] = ..., role: _Optional[str] = ..., server_node_id: _Optional[str] = ...) -> None: ...

class RevocationsRequest(_message.Message):
    __slots__ = ("known",)
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    known: bytes
    def __init__(self, known: _Optional[bytes] = ...) -> None: ...

class RevocationsReply(_message.Message):
    __slots__ = ("revocations_json", "members_json", "digest", "unchanged")
    REVOCATIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_JSON_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    revocations_json: str
    members_json: str
    digest: bytes
    unchanged: bool
    def __init__(self, revocations_json: _Optional[str] = ..., members_json: _Optional[str] = ..., digest: _Optional[bytes] = ..., unchanged: _Optional[bool] = ...) -> None: ...
