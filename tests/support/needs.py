"""A test that needs something this machine may lack (a server, a browser, a tool): on a
laptop it skips and says how to get it; under CI (``CI`` set), which must run every test,
it fails instead."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["missing", "under_ci"]


def under_ci() -> bool:
    return bool(os.environ.get("CI"))


def missing(reason: str, *, under_ci_says: str | None = None) -> NoReturn:
    """Skip with ``reason``; under CI fail with ``under_ci_says`` (``reason`` if not given)."""
    if under_ci():
        pytest.fail(under_ci_says or f"{reason} (CI is set, so this fails instead of skipping)")
    pytest.skip(reason)
