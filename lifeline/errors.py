"""The one tree of errors raised by lifeline and lifeline_mesh.

::

    LifelineError
    ├── InvalidEntry            an entry that must not be stored
    │   ├── IdMismatch          its id is not the hash of its content
    │   ├── EntryTooLarge       a field or the whole entry is over a size cap
    │   └── BadSignature        (lifeline_mesh) a signature does not verify
    ├── ProtocolError           a sync session went wrong
    │   ├── LocalProtocolError  we misused the protocol (a bug here)
    │   └── RemoteProtocolError the peer misbehaved (bad frame, over a cap)
    ├── StoreError              the store could not do what was asked
    │   ├── NotFound            no entry (or line) by that id, prefix or name
    │   ├── AmbiguousPrefix     an id prefix matches more than one entry
    │   └── CorruptRow          a stored row cannot be decoded
    ├── PeerError               a peer is unreachable or timed out
    │   ├── Busy                a peer is at its cap of calls at once (try again later)
    │   └── Refused             a session was refused (line not shared, not allowed)
    │       ├── NotAuthenticated   no usable mesh certificate / failed TLS handshake
    │       └── PermissionDenied   known caller, not allowed (revoked, reader, other mesh)
    └── ConfigError             bad configuration or a bad argument

Every message says what happened, shows the offending value, and says what to do next.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousPrefix",
    "BadSignature",
    "Busy",
    "ConfigError",
    "CorruptRow",
    "EntryTooLarge",
    "IdMismatch",
    "InvalidEntry",
    "LifelineError",
    "LocalProtocolError",
    "NotAuthenticated",
    "NotFound",
    "PeerError",
    "PermissionDenied",
    "ProtocolError",
    "Refused",
    "RemoteProtocolError",
    "StoreError",
]


class LifelineError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidEntry(LifelineError):
    """An entry failed validation or admission and was not stored."""


class IdMismatch(InvalidEntry):
    """The id carried by an entry is not the hash of its content."""


class EntryTooLarge(InvalidEntry):
    """A field, or the whole entry, is larger than the configured cap."""


class BadSignature(InvalidEntry):
    """A signature does not verify, or its signer is not acceptable."""


class ProtocolError(LifelineError):
    """A sync session failed."""


class LocalProtocolError(ProtocolError):
    """This side misused the protocol; a bug in lifeline-mesh."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids."""


class StoreError(LifelineError):
    """The store could not complete an operation."""


class NotFound(StoreError):
    """No entry or line matches."""


class AmbiguousPrefix(StoreError):
    """An id prefix matches more than one entry."""


class CorruptRow(StoreError):
    """A stored row cannot be decoded into an entry."""


class PeerError(LifelineError):
    """A peer is unreachable, timed out, or refused the session."""


class Busy(PeerError):
    """The peer serves as many calls of that kind as it takes at once (from this caller,
    or from all): nothing was done, try again in a moment."""


class Refused(PeerError):
    """A session was refused: the line is not shared, or the caller may not do that."""


class NotAuthenticated(Refused):
    """The caller presented no usable mesh certificate (or the TLS handshake failed)."""


class PermissionDenied(Refused):
    """The caller is known but not allowed: revoked, another mesh, or a role too weak."""


class ConfigError(LifelineError):
    """A configuration value or command-line argument is wrong."""
