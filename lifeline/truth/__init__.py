"""The current truth of a line: reducers, state, context assembly and recall (DESIGN §4).

Pure core: :mod:`parse`, :mod:`state`, :mod:`reducers`, :mod:`views`, :mod:`budget`,
:mod:`pieces`, :mod:`fit`, :mod:`sections`, :mod:`assemble`, :mod:`formats`. Adapters on a
store: :mod:`snapshot` (incremental state in the line's db), :mod:`recall` (FTS5) and
:mod:`service` (the glue the CLI and the node call).
"""

from __future__ import annotations

__all__: list[str] = []
