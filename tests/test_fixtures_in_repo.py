"""A clone alone runs the whole suite: the fixtures tests read live in the repository."""

from __future__ import annotations

from tests.conftest import FIXTURE, REPO


def test_the_predecessor_fixture_is_inside_the_repository() -> None:
    assert FIXTURE.is_relative_to(REPO / "tests" / "fixtures")
    assert (FIXTURE / "expected.json").is_file()
    assert (FIXTURE / ".lifeline" / "ledger.db").is_file()
    assert (REPO / "tests" / "fixtures" / "PROVENANCE.md").is_file()
