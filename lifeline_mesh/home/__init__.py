"""The node's own files under ``.lifeline/mesh/``: config, identity, run state, inbound callers."""
