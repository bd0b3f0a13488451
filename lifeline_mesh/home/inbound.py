"""Nodes that synced in: the caller of every session a node served, and how it went.

``serve`` keeps ``NodeHome.inbound_path`` (one row per calling node, the last
session of each) so that ``lifeline-mesh peers`` lists the nodes that dial this one as well
as those it dials.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from typing import Any, Protocol

from lifeline_mesh.home.node_home import NodeHome

__all__ = ["InboundLog", "SessionCaller", "SessionFigures", "load_inbound"]

NODE_URI = b"lifeline-mesh://node/"
# Callers kept, the latest: a CI runner is a new node every job, and the log is rewritten
# after every session, so it must not grow with the jobs a node ever served
MAX_CALLERS = 1000


# What the log reads of a session, named here so the home stays below the layers that run
# sessions: transport/authz.py's PeerIdentity and sync/driver.py's SyncReport have them.
class SessionCaller(Protocol):
    """Who called: the transport address and the auth context's properties."""

    @property
    def address(self) -> str: ...

    @property
    def auth_context(self) -> Mapping[str, tuple[bytes, ...]]: ...


class SessionFigures(Protocol):
    """What a session did, as far as the log keeps it."""

    @property
    def entries_sent(self) -> int: ...

    @property
    def entries_received(self) -> int: ...

    @property
    def seconds(self) -> float: ...

    @property
    def refused(self) -> int: ...  # items the caller sent that this side refused alone

    @property
    def refused_there(self) -> int: ...  # items this side sent that the caller refused


def _node_id(identity: SessionCaller) -> str | None:
    for value in identity.auth_context.get("x509_subject_alternative_name", ()):
        if value.startswith(NODE_URI):
            return value[len(NODE_URI) :].decode("ascii", "replace")
    return None


class InboundLog:
    """The last session of each caller (the ``MAX_CALLERS`` latest), written to
    ``inbound.json`` after every session, latest last."""

    def __init__(self, home: NodeHome) -> None:
        self.path = home.inbound_path
        held = sorted(load_inbound(home), key=lambda r: float(r.get("last_session_at") or 0))
        self.rows: dict[str, dict[str, Any]] = {
            str(r.get("node_id") or r.get("address")): r for r in held
        }

    def record(
        self, identity: SessionCaller, line: str, report: SessionFigures | None, error: str | None
    ) -> None:
        node_id = _node_id(identity)
        if report is not None:
            result = f"ok: sent {report.entries_sent}, received {report.entries_received}"
            if report.refused or report.refused_there:  # decisions 0111, 0112
                result += (
                    f"; refused {report.refused} of its items, it refused "
                    f"{report.refused_there} of ours (the log names them)"
                )
        else:
            result = f"failed: {(error or '')[:200]}"
        key = node_id or identity.address
        sessions = int(self.rows.pop(key, {}).get("sessions") or 0) + 1
        while len(self.rows) >= MAX_CALLERS:  # the longest silent go first (oldest first)
            del self.rows[next(iter(self.rows))]
        self.rows[key] = {
            "node_id": node_id,
            "address": identity.address,
            "line": line,
            "last_session_at": time.time(),
            "result": result,
            # the session's time on this side (a hub's server time, bench/hub.py reads it)
            "seconds": round(report.seconds, 6) if report is not None else None,
            "sessions": sessions,  # every session this caller ran here, this one included
        }
        try:
            data = json.dumps({"inbound": list(self.rows.values())}, indent=2, sort_keys=True)
            # Replaced whole (a reader never sees half of it) but not fsynced: it is a
            # report rewritten after every session, and a crash loses only its last rows.
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".inbound-")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data.encode("utf-8") + b"\n")
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:  # a full disk must not stop serving; the table is only a report
            pass


def load_inbound(home: NodeHome) -> list[dict[str, Any]]:
    """The rows the last (or running) node wrote; [] when none or unreadable."""
    path = home.inbound_path
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    rows = data.get("inbound") if isinstance(data, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
