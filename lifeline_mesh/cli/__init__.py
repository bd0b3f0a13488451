"""The `lifeline-mesh` command line."""
