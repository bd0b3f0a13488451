"""The words recall indexes and the BM25 it ranks them by, shared by the scan and the
indexes of both backends (:mod:`lifeline.truth.recall`, :mod:`lifeline.truth.pg_recall`).

BM25 as SQLite's FTS5 computes it: ``k1`` = 1.2, ``b`` = 0.75, idf floored at 1e-6, the
summary weighing :data:`SUMMARY_WEIGHT` times the body, an entry's length its words in
both.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

__all__ = ["CANDIDATES", "SUMMARY_WEIGHT", "Bm25", "words"]

SUMMARY_WEIGHT = 3.0
CANDIDATES = 10_000  # matches ranked at most, beyond those of rare words (decision 0026)
_K1, _B = 1.2, 0.75


def _fold_text(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The words recall indexes in text: runs of letters and digits, case and accents
    folded (as FTS5's unicode61 tokenizer with remove_diacritics 2)."""
    return re.findall(r"[^\W_]+", _fold_text(text))


class Bm25:
    """BM25 as FTS5 computes it, given the line's totals: ``docs`` entries of ``length``
    words in all, ``held[k]`` of them holding term k (shared by the scan and a hub's index)."""

    def __init__(self, docs: int, length: int, held: Sequence[int]) -> None:
        self.docs = docs
        self._avg = max(length / docs, 1e-9) if docs else 1.0
        self._idf = [max(math.log((docs - n + 0.5) / (n + 0.5)), 1e-6) for n in held]

    def score(self, counts: Sequence[float], length: int) -> float:
        """One entry's score from its weighted count of each term and its length."""
        score = 0.0
        norm = _K1 * (1 - _B + _B * length / self._avg)
        for weight, f in zip(self._idf, counts, strict=True):
            if f:
                score += weight * f * (_K1 + 1) / (f + norm)
        return score

    def best(
        self, matches: Iterable[tuple[bytes, Sequence[float], int]], limit: int
    ) -> list[tuple[str, float]]:
        """The best ``limit`` of (raw id, counts, length), as (hex id, score), best first
        and ties by id; only the best are kept (a million matches sorted whole took ~300 MB)."""
        if not self.docs:
            return []

        def scored() -> Iterator[tuple[float, bytes]]:
            for raw, counts, length in matches:
                score = self.score(counts, length)
                if score > 0:
                    yield -score, raw

        return [(i.hex(), -negated) for negated, i in heapq.nsmallest(limit, scored())]
