"""LineMemo: what was computed from one line, answered again while the line has not changed.

An agent's first call is ``context``, and a server that stays up answers it many times over
a line that mostly did not change. The memo keeps each answer under its arguments and the
line's change token (:mod:`lifeline.store.change`), asked before every use: the same token
means the same entries, so the same answer. Any write, by this process or another (a
``serve`` syncing into the same file, ``lifeline log``, another hub process), moves the
token and empties the memo. The token is asked *before* computing, so an answer computed
while a write landed is filed under the older token and never served for the newer one.

One memo per open line, held by whoever holds the line (the MCP workspace today). It is
small and owns nothing but its token source, a bounded map of answers, and the line's
items as read and as rendered (:class:`~lifeline.truth.tableview.ItemMemo`,
:class:`~lifeline.truth.sections.PieceMemo`), which outlive a change: the first answer
after a write reads and renders only what is new.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from lifeline.line_source import ChangeWatch
from lifeline.store.change import SqliteChangeWatch
from lifeline.truth.sections import PieceMemo
from lifeline.truth.tableview import ItemMemo

__all__ = ["MEMO_ANSWERS", "LineMemo", "TokenSource"]

T = TypeVar("T")
TokenSource = Callable[[], Awaitable[Hashable | None]]

MEMO_ANSWERS = 32  # answers kept per line (distinct argument sets), least recently used out


class LineMemo:
    """Answers computed from one line, keyed by arguments, valid for one change token."""

    def __init__(
        self,
        token: TokenSource,
        *,
        capacity: int = MEMO_ANSWERS,
        close: Callable[[], None] | None = None,
    ) -> None:
        self._token_of = token
        self._close = close
        self._capacity = capacity
        self._token: Hashable | None = None
        self._answers: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0
        # Items as read and as rendered: valid across changes (see ItemMemo, PieceMemo),
        # so the first answer after a write reads and renders only the new items.
        self.items = ItemMemo()
        self.pieces = PieceMemo()

    @classmethod
    def of_sqlite(cls, path: Path, *, capacity: int = MEMO_ANSWERS) -> LineMemo:
        """A memo of the SQLite line file at ``path`` (:class:`SqliteChangeWatch`)."""
        return cls.watching(SqliteChangeWatch(path), capacity=capacity)

    @classmethod
    def watching(cls, watch: ChangeWatch, *, capacity: int = MEMO_ANSWERS) -> LineMemo:
        """A memo valid while ``watch`` (a line source's, whatever its backend) answers the
        same token."""
        return cls(watch.token, capacity=capacity, close=watch.close)

    async def answer(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        """The answer for ``key``: kept, when the line has not changed since it was
        computed; else ``compute()``, kept for the next call. Unknown token: computed,
        never kept."""
        token = await self._token_of()
        if token is None:
            self.misses += 1
            return await compute()
        if token != self._token:
            self._answers.clear()
            self._token = token
        if key in self._answers:
            self.hits += 1
            self._answers.move_to_end(key)
            value: T = self._answers[key]
            return value
        self.misses += 1
        value = await compute()
        if self._token == token:  # a newer token seen meanwhile: this answer may be older
            self._answers[key] = value
            while len(self._answers) > self._capacity:
                self._answers.popitem(last=False)
        return value

    def close(self) -> None:
        self._answers.clear()
        self._token = None
        if self._close is not None:
            self._close()
