"""docker/compose.hub.yml without an engine: the services, volumes, ports and peers of the
table in docker/README.md, and how its hub processes reach the one database
(tests/deploy/test_docker_engine.py runs it for real)."""

from __future__ import annotations

from typing import Any

from tests.support.compose_docs import DOCKER
from tests.support.compose_docs import defaults as _defaults
from tests.support.compose_docs import documented_topology as _documented_topology
from tests.support.compose_docs import service_env as _env
from tests.support.yaml_subset import parse


def _hub() -> dict[str, Any]:
    data = _defaults(parse((DOCKER / "compose.hub.yml").read_text(encoding="utf-8")))
    assert isinstance(data, dict)
    return data


def test_the_hub_compose_file_matches_its_documented_topology() -> None:
    hub = _hub()
    services = hub["services"]
    documented = _documented_topology("## The hub: two processes on PostgreSQL")
    assert set(services) == {"postgres", "bootstrap", "hub-1", "hub-2", "laptop"}
    assert set(documented) == set(services)
    for name, doc in documented.items():
        service = services[name]
        assert service["volumes"] == doc["volumes"], name
        assert service.get("ports", []) == doc["ports"], name
        assert _env(service, "LIFELINE_MESH_PEERS").split() == doc["peers"], name
    # the hub processes need no invite (one node); the laptop's is redeemed at hub-2
    boot = _env(services["bootstrap"], "LIFELINE_MESH_INVITE_FOR").split()
    assert (
        boot == ["laptop"]
        and _env(services["bootstrap"], "LIFELINE_MESH_JOIN_ADDRESS") == "hub-2:7421"
    )
    used = {v.split(":")[0] for s in services.values() for v in s["volumes"]}
    assert used == set(hub["volumes"])


def test_the_hub_processes_share_one_database_and_the_laptop_its_own_files() -> None:
    hub = _hub()
    # One hub node made in the database by bootstrap (`hub init --new-mesh`), two processes
    # of it, a laptop syncing through both (run for real by tests/deploy/test_docker_engine.py):
    # no profile keeps any of them out of `up`.
    store = "postgresql://lifeline:lifeline-trial@postgres:5432/lifeline"
    services = hub["services"]
    healthy, done = (
        {"condition": "service_healthy"},
        {"condition": "service_completed_successfully"},
    )
    for name in ("bootstrap", "hub-1", "hub-2"):
        service = services[name]
        assert "profiles" not in service and service["environment"]["LIFELINE_MESH_STORE"] == store
        assert service["depends_on"]["postgres"] == healthy, name
    for name in ("hub-1", "hub-2"):  # both wait for the node (and its CA) in the database only
        assert services[name]["depends_on"] == {"bootstrap": done, "postgres": healthy}, name
        assert "tokens:/tokens:ro" not in services[name]["volumes"], name  # no invite to read
    assert services["laptop"]["depends_on"] == {"hub-1": healthy, "hub-2": healthy}
    laptop = hub["services"]["laptop"]
    assert "LIFELINE_MESH_STORE" not in laptop["environment"]
    assert laptop["environment"]["LIFELINE_MESH_PEERS"].split() == ["hub-1:7420", "hub-2:7420"]
