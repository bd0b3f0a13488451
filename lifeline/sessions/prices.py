"""Token prices: the dated table shipped with lifeline, and the user's own (decision 0069).

``token_prices.json`` beside this module lists list prices per million tokens, with the
date they were read and where. A file the user names (``--prices FILE``) or places in the home
(``.lifeline/prices.json``) in the same shape adds models or replaces the shipped ones, and
its ``as_of`` dates the result. A model is found by its name, or its name without a release
date suffix (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``); a model found nowhere
has no price — `sessions usage` shows its tokens and says it is unpriced, never a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError
from lifeline.sessions.messages import Tokens

__all__ = ["Price", "PriceTable", "load_prices"]

_DATED = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
_RATES = ("input", "cached", "cache_write", "output")


@dataclass(frozen=True, slots=True)
class Price:
    """Per million tokens; cached input and cache writes at the input rate when not given."""

    input: float
    output: float
    cached: float | None = None
    cache_write: float | None = None

    def cost(self, tokens: Tokens) -> float:
        cached = self.input if self.cached is None else self.cached
        write = self.input if self.cache_write is None else self.cache_write
        return (
            tokens.input * self.input
            + tokens.cached * cached
            + tokens.cache_write * write
            + tokens.output * self.output
        ) / 1_000_000


@dataclass(frozen=True, slots=True)
class PriceTable:
    as_of: str
    currency: str
    models: dict[str, Price] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def price(self, model: str | None) -> Price | None:
        if not model:
            return None
        name = model.strip().lower()
        return self.models.get(name) or self.models.get(_DATED.sub("", name))


def _parse(data: Any, origin: str) -> tuple[str, str, dict[str, Price], tuple[str, ...]]:
    def bad(what: str) -> ConfigError:
        return ConfigError(
            f'{origin}: {what}; expected {{"as_of": "YYYY-MM-DD", "models": '
            '{"model-name": {"input": 3.0, "output": 15.0, "cached": 0.3}}} (USD per million)'
        )

    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise bad('no "models" object')
    as_of = data.get("as_of")
    if not isinstance(as_of, str) or not as_of:
        raise bad('no "as_of" date')
    models: dict[str, Price] = {}
    for name, rates in data["models"].items():
        if not isinstance(rates, dict) or set(rates) - set(_RATES):
            raise bad(f"model {name!r} has rates other than {', '.join(_RATES)}")
        for key, value in rates.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise bad(f"model {name!r}: {key} must be a number >= 0, not {value!r}")
        if "input" not in rates or "output" not in rates:
            raise bad(f"model {name!r} needs an input and an output price")
        models[str(name).lower()] = Price(
            input=float(rates["input"]),
            output=float(rates["output"]),
            cached=None if rates.get("cached") is None else float(rates["cached"]),
            cache_write=None if rates.get("cache_write") is None else float(rates["cache_write"]),
        )
    sources = data.get("sources")
    listed = tuple(str(s) for s in sources) if isinstance(sources, list) else ()
    return as_of, str(data.get("currency", "USD")), models, listed


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no price file {path}; give an existing file to --prices") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc}); fix or remove it") from exc


def load_prices(*overrides: Path) -> PriceTable:
    """The shipped table, then each override that exists, later ones winning."""
    shipped = json.loads(
        files("lifeline.sessions").joinpath("token_prices.json").read_text("utf-8")
    )
    as_of, currency, models, sources = _parse(shipped, "the shipped price table")
    for path in overrides:
        own_as_of, own_currency, own, own_sources = _parse(_read(path), str(path))
        if own_currency != currency:
            raise ConfigError(
                f"{path}: prices in {own_currency}, the shipped table is in {currency}; "
                "give every price in one currency"
            )
        models = {**models, **own}
        as_of = f"{own_as_of} ({path.name}), {as_of} (shipped)"
        sources = (*own_sources, *sources)
    return PriceTable(as_of, currency, models, sources)
