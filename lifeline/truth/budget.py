"""Budgets: how long a text is, in characters or in (estimated) tokens.

The default token count is a deterministic estimate (UTF-8 bytes / 4, rounded up), the same on
every machine and offline. With ``tokenizer="tiktoken"`` the count comes from tiktoken when it
is installed; it is optional and never required.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lifeline.errors import ConfigError

__all__ = ["DEFAULT_BUDGET_CHARS", "Budget", "estimate_tokens"]

DEFAULT_BUDGET_CHARS = 24_000
MIN_BUDGET = {"chars": 200, "tokens": 50}


def estimate_tokens(text: str) -> int:
    """About one token per four bytes of UTF-8: close to BPE tokenizers on English prose."""
    return (len(text.encode("utf-8")) + 3) // 4


def _tiktoken_counter() -> Callable[[str], int]:
    try:
        import tiktoken  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise ConfigError(
            "tokenizer 'tiktoken' is not installed; `pip install 'lifeline-mesh[tokenizer]'` "
            "(or `pip install tiktoken`), or use the default estimate"
        ) from exc
    enc = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(enc.encode(text))


@dataclass(frozen=True, slots=True)
class Budget:
    """A limit in ``chars`` or ``tokens``."""

    limit: int = DEFAULT_BUDGET_CHARS
    unit: str = "chars"
    tokenizer: str = "estimate"

    def __post_init__(self) -> None:
        if self.unit not in ("chars", "tokens"):
            raise ConfigError(f"budget unit {self.unit!r} is unknown; use chars or tokens")
        if self.limit < MIN_BUDGET[self.unit]:
            raise ConfigError(
                f"budget {self.limit} {self.unit} is too small; "
                f"give at least {MIN_BUDGET[self.unit]}"
            )

    def measure(self) -> Callable[[str], int]:
        if self.unit == "chars":
            return len
        if self.tokenizer == "tiktoken":
            return _tiktoken_counter()
        return estimate_tokens

    @property
    def max_items(self) -> int:
        """An upper bound on the items that can fit: every rendered item takes at least 18
        chars (``- `<12-char id>` ``, its summary and a newline)."""
        chars = self.limit if self.unit == "chars" else self.limit * 4
        return max(4, chars // 18)

    @property
    def item_cap_chars(self) -> int:
        """The most one item may take, so no single entry can evict the rest."""
        chars = self.limit if self.unit == "chars" else self.limit * 4
        return max(160, chars // 10)
