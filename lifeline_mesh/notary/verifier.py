"""Checking many ed25519 signatures in helper processes, beside the node's own process.

Admission has to verify every received attestation, and an initial sync receives them by
the hundred thousand (bench/history/notary.md). A helper process
(lifeline_mesh.helpers.pool) verifies at full speed on another core while this process decodes
and stores.

A helper only answers "which is the first item whose signature does not verify over its
statement"; every other admission rule stays in this process
(:func:`lifeline_mesh.notary.admission.check_items`, which also words the refusal). Small
batches (tests, the live sync of a few entries) are verified here: handing them over would
cost more than it saves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from lifeline_mesh.helpers.pool import run_split
from lifeline_mesh.helpers.worker import VERIFY, first_bad_in

__all__ = ["MIN_OFFLOAD", "first_bad_in", "first_bad_signature"]

MIN_OFFLOAD = 64  # items; smaller batches are verified in this process


async def first_bad_signature(items: Sequence[bytes]) -> int:
    """``first_bad_in(items)``; a large batch is checked in the helper processes."""
    if len(items) < MIN_OFFLOAD:
        return await asyncio.to_thread(first_bad_in, items)
    for offset, bad in await run_split(VERIFY, items, list, first_bad_in):
        if bad >= 0:
            return offset + bad
    return -1
