"""What a session's entries are, without the session model: the size caps, the format
number and the entry kinds (read by the settings and the indexes, which need no pydantic;
``lifeline.sessions.pack`` uses and re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FORMAT", "KIND_HEADER", "KIND_PART", "KIND_STATUS", "Caps"]

# What ingest writes for a given transcript (decision 0053). Bump it with any change that
# alters the bytes written for the same file — parsing, redaction, caps, ids — so that the
# next ingest reads every file again and writes the new entries; readers then show each
# session by its newest-format header (``Catalogue``). On a merge of two bumps, take the
# larger number plus one.
FORMAT = 6  # 2: ids from content only (0053); 3: edits judged by their results (0054);
# 4: the secret rules of decision 0052; 5: what a transcript could leak or break (0113);
# 6: an argv redacted as the command line it stands for, cookies given by flag (0118)

# The entry kinds of a session in its line (decision 0019).
KIND_HEADER, KIND_PART, KIND_STATUS = "session", "session-part", "session-status"


@dataclass(frozen=True, slots=True)
class Caps:
    """Size caps in characters; configurable under ``sessions`` in .lifeline/config.json."""

    tool_output: int = 8_000  # a tool result's output
    text: int = 24_000  # any other string
    part_bytes: int = 48_000  # one part entry's items (kept under the body cap)
