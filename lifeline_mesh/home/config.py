"""The node's config file (``NodeHome.config_path``).

``config.json`` holds what the user set: which lines are shared with the mesh, static peers,
the listen address, where metrics are served. It is written 0600 (it names the node's peers);
key material lives beside it, also 0600 and refused when other users can read it,
and is never synced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.errors import ConfigError, Refused
from lifeline.fsutil import write_atomic
from lifeline.lines import validate_line_name
from lifeline_mesh.home.node_home import NodeHome

__all__ = ["NodeConfig"]


@dataclass(slots=True)
class NodeConfig:
    shared_lines: list[str] = field(default_factory=list)
    peers: list[str] = field(default_factory=list)
    listen: str = "127.0.0.1:0"
    metrics_listen: str | None = None  # `serve --metrics-listen` (docs/operations.md)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def current(cls, home: NodeHome) -> NodeConfig:
        """:meth:`load`, read again only when the file was replaced or changed (a running
        node asks at every session and every poll of its lines). Read it, do not change it:
        the same object is handed to every caller until the file changes. Kept on the home
        (its ``held``), as the home keeps what it opened."""
        path = home.config_path
        try:
            st = path.stat()
        except FileNotFoundError:
            return cls()
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        held = home.held.get("config")
        if held is None or held[0] != key:
            held = home.held["config"] = (key, cls.load(home))
        config = held[1]
        assert isinstance(config, NodeConfig)
        return config

    @classmethod
    def load(cls, home: NodeHome) -> NodeConfig:
        path = home.config_path
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            known = {
                k: data.pop(k)
                for k in ("shared_lines", "peers", "listen", "metrics_listen")
                if k in data
            }
            config = cls(**known, extra=data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{path} is not a valid node config ({exc}); fix or remove it"
            ) from exc
        for line in config.shared_lines:
            validate_line_name(line)
        return config

    def require_shared(self, lines: Iterable[str]) -> None:
        """Refuse, before any peer is asked, a line this node does not share."""
        for line in lines:
            if line not in self.shared_lines:
                raise Refused(
                    f"line {line!r} is not shared on this node, so it is never sent or "
                    f"accepted; run `lifeline-mesh share {line}` first"
                )

    def save(self, home: NodeHome) -> None:
        """Write atomically (temp file + rename), so a crash never leaves half a config."""
        path = home.config_path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = asdict(self)
        data.update(data.pop("extra"))
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        write_atomic(path, text.encode("utf-8"), mode=0o600)
