"""Received entries parsed and admitted in the helper processes (lifeline_mesh.helpers.pool).

During an initial sync the node's process parses a batch while its store thread writes the
one before; both need the interpreter lock, so they ran one after the other. A helper
process parses and admits (id recomputed from the content, size caps) at full speed on
another core, and hands back each entry's fields, which are cheap to load.

The answer is the same as ``EntryCodec.parse`` gives for each item. When one item is
inadmissible the batch is handed back unparsed, and the session parses it here: its
refusal then names the item and the reason, exactly as without helpers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple
from typing import Any

from lifeline.entry import Entry
from lifeline_mesh.helpers.pool import run_split
from lifeline_mesh.helpers.worker import ENTRIES, parse_entries
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import Frame, Items
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, ParsedItems

__all__ = ["MIN_OFFLOAD", "parse_in_helpers", "parsed_items", "preparse"]

MIN_OFFLOAD = 256  # entries; a smaller batch is parsed by the session itself


async def parse_in_helpers(codec: EntryCodec, raws: Sequence[bytes]) -> list[ParsedItem] | None:
    """Each of ``raws`` as ``codec.parse`` gives it, or None if one is inadmissible."""
    limits = astuple(codec.limits)

    def local(part: Sequence[bytes]) -> tuple[int, list[tuple[Any, ...]]]:
        return parse_entries(limits, part)

    out: list[ParsedItem] = []
    for offset, (bad, parsed) in await run_split(
        ENTRIES, raws, lambda part: (limits, list(part)), local
    ):
        if bad >= 0:
            return None
        out += parsed_items(raws[offset : offset + len(parsed)], parsed)
    return out if len(out) == len(raws) else None


def parsed_items(raws: Sequence[bytes], answer: Sequence[tuple[Any, ...]]) -> list[ParsedItem]:
    """The parsed items of ``raws`` from a helper's answer for them (``parse_entries``)."""
    return [
        ParsedItem(item_id, f[1].encode("ascii"), deps, raw, Entry(*f))
        for raw, (item_id, deps, f) in zip(raws, answer, strict=True)
    ]


async def preparse(frame: Frame, codec: ItemCodec | None) -> Frame | ParsedItems:
    """``frame`` with its entries parsed in the helpers, when it is a large batch of them."""
    if not isinstance(frame, Items) or len(frame.items) < MIN_OFFLOAD:
        return frame
    if not isinstance(codec, EntryCodec):
        return frame
    parsed = await parse_in_helpers(codec, frame.items)
    return frame if parsed is None else ParsedItems(frame, tuple(parsed))
