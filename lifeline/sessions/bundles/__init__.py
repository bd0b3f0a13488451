"""Continuation bundles: distilled from sessions, merged, fitted to a budget, rendered."""
