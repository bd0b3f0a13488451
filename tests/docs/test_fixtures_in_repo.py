"""A clone alone runs the whole suite: the fixtures tests read live in the repository."""

from __future__ import annotations

from tests.support.paths import FIXTURES, LC_FIXTURE, REPO


def test_the_predecessor_fixture_is_inside_the_repository() -> None:
    assert FIXTURES == REPO / "tests" / "fixtures"
    assert LC_FIXTURE.is_relative_to(FIXTURES)
    assert (LC_FIXTURE / "expected.json").is_file()
    assert (LC_FIXTURE / ".lifeline" / "ledger.db").is_file()
    assert (FIXTURES / "PROVENANCE.md").is_file()
