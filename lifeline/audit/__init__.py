"""Checking a line: ids, parents, signatures of the rows, the file itself, and recovery."""
