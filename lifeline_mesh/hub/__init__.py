"""A hub: a node whose lines live in a PostgreSQL database (docs/hub.md)."""
