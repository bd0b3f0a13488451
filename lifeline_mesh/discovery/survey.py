"""A one-off look at the LAN: every lifeline-mesh advert heard on the named interfaces.

For ``lifeline-mesh discover``, the answer to "why do my two nodes not see each other?".
Unlike :class:`ZeroconfDiscovery` it announces nothing and filters nothing: adverts of other
meshes and malformed ones are listed with the reason the node would ignore them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zeroconf import ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from lifeline_mesh.discovery.advert import (
    SERVICE_TYPE,
    AdvertRejected,
    admit,
    parse_txt,
    well_formed_name,
)
from lifeline_mesh.discovery.zeroconf import (
    RESOLVE_TIMEOUT_MS,
    check_interfaces,
    ip_version_of,
    usable_addresses,
)

__all__ = ["Sighting", "survey"]


@dataclass(frozen=True, slots=True)
class Sighting:
    """One advert heard: what it says, and why this node would ignore it (or None)."""

    name: str
    node_id: str | None
    mesh_id: str | None
    addresses: tuple[str, ...]
    port: int | None
    ignored_because: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "mesh_id": self.mesh_id,
            "addresses": list(self.addresses),
            "port": self.port,
            "ignored_because": self.ignored_because,
        }


async def survey(
    interfaces: Sequence[str],
    *,
    listen_for: float,
    mesh_id: str | None = None,
    own_node_id: str = "",
    members: frozenset[str] | None = None,
) -> list[Sighting]:
    """Browse for ``listen_for`` seconds, then resolve every name heard; ``members``: the
    node ids of this node's members list (a node of our mesh not on it is not looked up)."""
    ifaces = check_interfaces(interfaces)
    version = ip_version_of(ifaces)
    names: set[str] = set()

    def heard(
        zeroconf: Zeroconf, service_type: str, name: str, state_change: ServiceStateChange
    ) -> None:
        # A name no node announces is never looked up: a control character in one
        # made the lookup raise (and printing it could write escapes to the terminal).
        if state_change is not ServiceStateChange.Removed and well_formed_name(name):
            names.add(name)

    azc = AsyncZeroconf(interfaces=ifaces, ip_version=version)
    try:
        browser = AsyncServiceBrowser(azc.zeroconf, [SERVICE_TYPE], handlers=[heard])
        await asyncio.sleep(listen_for)  # the listening window is what the user asked for
        await browser.async_cancel()
        out = []
        for name in sorted(names):
            info = AsyncServiceInfo(SERVICE_TYPE, name)
            try:
                answered = await info.async_request(azc.zeroconf, RESOLVE_TIMEOUT_MS)
            except Exception as exc:
                out.append(Sighting(name, None, None, (), None, f"lookup failed: {exc}"))
                continue
            if not answered:
                out.append(Sighting(name, None, None, (), None, "did not answer a lookup"))
                continue
            out.append(_sighting(name, info, version, mesh_id, own_node_id, members))
        return out
    finally:
        await azc.async_close()


def _sighting(
    name: str,
    info: AsyncServiceInfo,
    version: Any,
    mesh_id: str | None,
    own: str,
    members: frozenset[str] | None,
) -> Sighting:
    addresses = tuple(usable_addresses(info.parsed_addresses(version)))
    try:
        advert = parse_txt(info.properties, port=info.port, addresses=addresses)
    except AdvertRejected as exc:
        return Sighting(name, None, None, addresses, info.port, f"malformed: {exc}")
    reason = None
    if mesh_id is not None:
        try:
            admit(advert, mesh_id=mesh_id, own_node_id=own)
        except AdvertRejected as exc:
            reason = str(exc)
        if reason is None and members is not None and advert.node_id not in members:
            reason = (
                f"node {advert.node_id} is not on this node's members list (it is looked up "
                "once a session brings a list that names it)"
            )
    return Sighting(name, advert.node_id, advert.mesh_id, addresses, advert.port, reason)
