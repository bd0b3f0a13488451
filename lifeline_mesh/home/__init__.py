"""The node's home (``node_home.py``: every file of the node under ``.lifeline/``) and what
is read from it: config, identity, run state, inbound callers."""
