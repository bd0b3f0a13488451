"""The `lifeline` command line."""
