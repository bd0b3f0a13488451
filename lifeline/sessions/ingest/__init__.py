"""Ingest: transcripts read, redacted and packed into the sessions line; the source ledger."""
