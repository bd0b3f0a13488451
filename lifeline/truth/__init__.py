"""The current truth of a line: reducers, state, context assembly and recall (DESIGN §4).

Pure core: :mod:`parse`, :mod:`state`, :mod:`reducers`, :mod:`views`, :mod:`budget`,
:mod:`pieces`, :mod:`fit`, :mod:`sections`, :mod:`assemble`, :mod:`formats`. Adapters on a
store: :mod:`source` (a line's truth, the port) and :mod:`snapshot` (which truth a line
reads, per backend; the incremental state in a line file), :mod:`pg_view` (in a hub's
database), :mod:`recall` (FTS5) and :mod:`service` (the glue the CLI and the node call).
"""

from __future__ import annotations

__all__: list[str] = []
