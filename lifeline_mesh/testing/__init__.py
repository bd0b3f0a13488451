"""Harnesses for tests and benchmarks, kept out of the pure core: two sessions in memory."""
