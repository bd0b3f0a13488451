from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Hello(_message.Message):
    __slots__ = ("protocol_version", "line", "sets", "capabilities", "max_frame_bytes", "max_items", "salt", "summaries", "opening")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    SETS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    OPENING_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    line: str
    sets: _containers.RepeatedScalarFieldContainer[str]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    max_frame_bytes: int
    max_items: int
    salt: bytes
    summaries: _containers.RepeatedScalarFieldContainer[bytes]
    opening: bytes
    def __init__(self, protocol_version: _Optional[int] = ..., line: _Optional[str] = ..., sets: _Optional[_Iterable[str]] = ..., capabilities: _Optional[_Iterable[str]] = ..., max_frame_bytes: _Optional[int] = ..., max_items: _Optional[int] = ..., salt: _Optional[bytes] = ..., summaries: _Optional[_Iterable[bytes]] = ..., opening: _Optional[bytes] = ...) -> None: ...

class Bound(_message.Message):
    __slots__ = ("height", "id_prefix", "infinite")
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    INFINITE_FIELD_NUMBER: _ClassVar[int]
    height: int
    id_prefix: bytes
    infinite: bool
    def __init__(self, height: _Optional[int] = ..., id_prefix: _Optional[bytes] = ..., infinite: _Optional[bool] = ...) -> None: ...

class Range(_message.Message):
    __slots__ = ("upper", "mode", "fingerprint", "count", "tokens")
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SKIP: _ClassVar[Range.Mode]
        FINGERPRINT: _ClassVar[Range.Mode]
        ID_LIST: _ClassVar[Range.Mode]
        WANT_ALL: _ClassVar[Range.Mode]
    SKIP: Range.Mode
    FINGERPRINT: Range.Mode
    ID_LIST: Range.Mode
    WANT_ALL: Range.Mode
    UPPER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    upper: Bound
    mode: Range.Mode
    fingerprint: bytes
    count: int
    tokens: bytes
    def __init__(self, upper: _Optional[_Union[Bound, _Mapping]] = ..., mode: _Optional[_Union[Range.Mode, str]] = ..., fingerprint: _Optional[bytes] = ..., count: _Optional[int] = ..., tokens: _Optional[bytes] = ...) -> None: ...

class Recon(_message.Message):
    __slots__ = ("set", "ranges", "packed")
    SET_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    set: int
    ranges: _containers.RepeatedCompositeFieldContainer[Range]
    packed: bytes
    def __init__(self, set: _Optional[int] = ..., ranges: _Optional[_Iterable[_Union[Range, _Mapping]]] = ..., packed: _Optional[bytes] = ...) -> None: ...

class Want(_message.Message):
    __slots__ = ("set", "tokens", "ids", "short_ids", "full_tokens")
    SET_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    SHORT_IDS_FIELD_NUMBER: _ClassVar[int]
    FULL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    set: int
    tokens: bytes
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    short_ids: bytes
    full_tokens: bytes
    def __init__(self, set: _Optional[int] = ..., tokens: _Optional[bytes] = ..., ids: _Optional[_Iterable[bytes]] = ..., short_ids: _Optional[bytes] = ..., full_tokens: _Optional[bytes] = ...) -> None: ...

class External(_message.Message):
    __slots__ = ("id", "line")
    ID_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    line: str
    def __init__(self, id: _Optional[bytes] = ..., line: _Optional[str] = ...) -> None: ...

class Items(_message.Message):
    __slots__ = ("set", "items", "externals")
    SET_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    EXTERNALS_FIELD_NUMBER: _ClassVar[int]
    set: int
    items: _containers.RepeatedScalarFieldContainer[bytes]
    externals: _containers.RepeatedCompositeFieldContainer[External]
    def __init__(self, set: _Optional[int] = ..., items: _Optional[_Iterable[bytes]] = ..., externals: _Optional[_Iterable[_Union[External, _Mapping]]] = ...) -> None: ...

class Abort(_message.Message):
    __slots__ = ("code", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EndOfTurn(_message.Message):
    __slots__ = ("refused", "refusals")
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    REFUSALS_FIELD_NUMBER: _ClassVar[int]
    refused: int
    refusals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, refused: _Optional[int] = ..., refusals: _Optional[_Iterable[str]] = ...) -> None: ...

class Fin(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeepAlive(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Frame(_message.Message):
    __slots__ = ("hello", "recon", "want", "items", "abort", "end_of_turn", "fin", "keep_alive")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    RECON_FIELD_NUMBER: _ClassVar[int]
    WANT_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    END_OF_TURN_FIELD_NUMBER: _ClassVar[int]
    FIN_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    recon: Recon
    want: Want
    items: Items
    abort: Abort
    end_of_turn: EndOfTurn
    fin: Fin
    keep_alive: KeepAlive
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., recon: _Optional[_Union[Recon, _Mapping]] = ..., want: _Optional[_Union[Want, _Mapping]] = ..., items: _Optional[_Union[Items, _Mapping]] = ..., abort: _Optional[_Union[Abort, _Mapping]] = ..., end_of_turn: _Optional[_Union[EndOfTurn, _Mapping]] = ..., fin: _Optional[_Union[Fin, _Mapping]] = ..., keep_alive: _Optional[_Union[KeepAlive, _Mapping]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("lines", "items", "serves_port")
    LINES_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SERVES_PORT_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedScalarFieldContainer[str]
    items: bool
    serves_port: int
    def __init__(self, lines: _Optional[_Iterable[str]] = ..., items: _Optional[bool] = ..., serves_port: _Optional[int] = ...) -> None: ...

class LineChange(_message.Message):
    __slots__ = ("lines", "initial", "node_id", "items_line", "sets", "items", "tree", "prune", "graft")
    LINES_FIELD_NUMBER: _ClassVar[int]
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_LINE_FIELD_NUMBER: _ClassVar[int]
    SETS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TREE_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FIELD_NUMBER: _ClassVar[int]
    GRAFT_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedScalarFieldContainer[str]
    initial: bool
    node_id: str
    items_line: str
    sets: _containers.RepeatedScalarFieldContainer[str]
    items: _containers.RepeatedCompositeFieldContainer[Items]
    tree: bytes
    prune: _containers.RepeatedScalarFieldContainer[bytes]
    graft: bool
    def __init__(self, lines: _Optional[_Iterable[str]] = ..., initial: _Optional[bool] = ..., node_id: _Optional[str] = ..., items_line: _Optional[str] = ..., sets: _Optional[_Iterable[str]] = ..., items: _Optional[_Iterable[_Union[Items, _Mapping]]] = ..., tree: _Optional[bytes] = ..., prune: _Optional[_Iterable[bytes]] = ..., graft: _Optional[bool] = ...) -> None: ...

class ShallowRequest(_message.Message):
    __slots__ = ("line",)
    LINE_FIELD_NUMBER: _ClassVar[int]
    line: str
    def __init__(self, line: _Optional[str] = ...) -> None: ...

class ShallowPart(_message.Message):
    __slots__ = ("attestations", "statements", "entries", "externals", "head", "signature", "public_key")
    ATTESTATIONS_FIELD_NUMBER: _ClassVar[int]
    STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    EXTERNALS_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    attestations: _containers.RepeatedScalarFieldContainer[bytes]
    statements: _containers.RepeatedScalarFieldContainer[bytes]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    externals: _containers.RepeatedCompositeFieldContainer[External]
    head: bytes
    signature: bytes
    public_key: bytes
    def __init__(self, attestations: _Optional[_Iterable[bytes]] = ..., statements: _Optional[_Iterable[bytes]] = ..., entries: _Optional[_Iterable[bytes]] = ..., externals: _Optional[_Iterable[_Union[External, _Mapping]]] = ..., head: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., public_key: _Optional[bytes] = ...) -> None: ...

class PushRequest(_message.Message):
    __slots__ = ("line", "attestations", "entries", "externals")
    LINE_FIELD_NUMBER: _ClassVar[int]
    ATTESTATIONS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    EXTERNALS_FIELD_NUMBER: _ClassVar[int]
    line: str
    attestations: _containers.RepeatedScalarFieldContainer[bytes]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    externals: _containers.RepeatedCompositeFieldContainer[External]
    def __init__(self, line: _Optional[str] = ..., attestations: _Optional[_Iterable[bytes]] = ..., entries: _Optional[_Iterable[bytes]] = ..., externals: _Optional[_Iterable[_Union[External, _Mapping]]] = ...) -> None: ...

class PushReply(_message.Message):
    __slots__ = ("entries_added", "attestations_added")
    ENTRIES_ADDED_FIELD_NUMBER: _ClassVar[int]
    ATTESTATIONS_ADDED_FIELD_NUMBER: _ClassVar[int]
    entries_added: int
    attestations_added: int
    def __init__(self, entries_added: _Optional[int] = ..., attestations_added: _Optional[int] = ...) -> None: ...
