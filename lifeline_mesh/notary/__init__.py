"""The notary: ed25519 attestations about entries, their storage and their audit (DESIGN §6).

``statement`` (pure) defines the signed statements and their bytes; ``admission`` (pure)
decides what received items may be stored; ``rules`` (pure) audits a line; ``storage`` keeps
attestations in the line's SQLite file and exposes them as an opaque set for sync; ``sign``
signs on this node; ``audit`` drives ``lifeline-mesh verify``.
"""

from __future__ import annotations

# No re-exports: `lifeline` reads this package's schema module when it opens a line
# (lifeline/store/schema.py, line_schema), which must not load the rest of the notary.
