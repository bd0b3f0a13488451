"""ZeroconfDiscovery: announce this node and find the other nodes of its mesh on the LAN.

An adapter around python-zeroconf's asyncio API. It registers one DNS-SD service
(``_lifeline-mesh._tcp.local.``, TXT: mesh id, node id, protocol version) and browses for the
same type. Browser callbacks only enqueue names; :meth:`run` resolves them and puts
:class:`PeerFound` / :class:`PeerLost` on :attr:`events`. Adverts of other meshes, of this
node, of nodes the allow-list refuses, and malformed ones are dropped with a debug log:
a LAN packet never raises into the node (DESIGN §8).

Only the names of nodes ``known`` admits (the node passes "a member of my mesh") are
looked up, one at a time, each name once however often it is heard (decision 0121):
anyone can make up node ids, and a flood of their names held the lookups of real members
behind one 3-second lookup each. A name heard before its node was known is looked up
once it is (the names in zeroconf's cache are looked at again every ``RESCAN_S``).

Interfaces are always named: multicast DNS on every interface of a laptop would announce
the node on networks the user never chose (a café Wi-Fi, a VPN, a container bridge).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable, Sequence

from zeroconf import IPVersion, NonUniqueNameException, ServiceStateChange, Zeroconf
from zeroconf._dns import DNSQuestion
from zeroconf._protocol.outgoing import DNSOutgoing
from zeroconf._utils.time import current_time_millis
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf
from zeroconf.const import _CLASS_IN, _FLAGS_AA, _FLAGS_QR_QUERY, _TYPE_PTR

from lifeline.errors import PeerError
from lifeline_mesh.discovery.advert import (
    SERVICE_TYPE,
    Advert,
    AdvertRejected,
    PeerEvent,
    PeerFound,
    PeerLost,
    admit,
    check_interfaces,
    instance_name,
    parse_txt,
    well_formed_name,
)

__all__ = [
    "RESCAN_S",
    "RESOLVE_TIMEOUT_MS",
    "PeerEvent",
    "ZeroconfDiscovery",
    "check_interfaces",
    "ip_version_of",
    "usable_addresses",
]

log = logging.getLogger(__name__)

RESOLVE_TIMEOUT_MS = 3_000  # how long one SRV/TXT/A lookup may take before we give up on it
PROBE_INTERVAL = 0.25  # seconds between our multicast probes while zeroconf probes (RFC 6762 §8.1)
RESCAN_S = 2.0  # how often the names heard are looked at again for nodes now known


def ip_version_of(addresses: Sequence[str]) -> IPVersion:
    versions = {ipaddress.ip_address(a).version for a in addresses}
    if versions == {4}:
        return IPVersion.V4Only
    if versions == {6}:
        return IPVersion.V6Only
    return IPVersion.All


class ZeroconfDiscovery:
    """Announce and browse on the named interfaces. ``async with`` it, then ``await run()``."""

    def __init__(
        self,
        *,
        node_id: str,
        mesh_id: str,
        port: int,
        interfaces: Sequence[str],
        allow: Callable[[str], bool] | None = None,
        known: Callable[[str], bool] | None = None,
        events: asyncio.Queue[PeerEvent] | None = None,
        resolve_timeout_ms: int = RESOLVE_TIMEOUT_MS,
        rescan_s: float = RESCAN_S,
    ) -> None:
        self.interfaces = check_interfaces(interfaces)
        self.advert = Advert(node_id, mesh_id, port, tuple(self.interfaces))
        self.events: asyncio.Queue[PeerEvent] = events if events is not None else asyncio.Queue()
        self._allow = allow
        self._known = known  # node ids whose names are looked up (None: every one)
        self._resolve_timeout_ms = resolve_timeout_ms
        self._rescan_s = rescan_s
        # names to look up (or drop) in the order heard, each once; the latest change wins
        self._pending: dict[str, ServiceStateChange] = {}
        self._heard = asyncio.Event()
        self._looked_up: set[str] = set()  # known names looked up since last heard
        self._found: dict[str, PeerFound] = {}  # instance name -> what we last announced
        self._azc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._info: AsyncServiceInfo | None = None
        self._registered = False

    # -- lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> ZeroconfDiscovery:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the sockets, register our service and start browsing."""
        self._azc = AsyncZeroconf(
            interfaces=list(self.interfaces), ip_version=ip_version_of(self.interfaces)
        )
        self._info = self._service_info()
        prober = asyncio.create_task(_probe_by_multicast(self._azc.zeroconf, self._info))
        try:
            try:
                await (await self._azc.async_register_service(self._info))
            finally:
                prober.cancel()
            self._registered = True
        except BaseException as exc:
            # Cancelled while probing, or refused: never leave the sockets open.
            await asyncio.shield(self.stop())
            if not isinstance(exc, NonUniqueNameException):
                raise
            raise PeerError(
                f"another process already announces node {self.advert.node_id} on "
                f"{', '.join(self.interfaces)}; is `lifeline-mesh serve` already running here?"
            ) from exc
        loop = asyncio.get_running_loop()

        def on_change(
            zeroconf: Zeroconf, service_type: str, name: str, state_change: ServiceStateChange
        ) -> None:
            # Called by zeroconf's reader; hand over to our loop and return at once.
            loop.call_soon_threadsafe(self._heard_name, name, state_change)

        self._browser = AsyncServiceBrowser(
            self._azc.zeroconf, [SERVICE_TYPE], handlers=[on_change]
        )

    async def stop(self) -> None:
        """Say goodbye (unregister) and close the sockets; safe to call twice."""
        azc, self._azc = self._azc, None
        if azc is None:
            return
        browser, self._browser = self._browser, None
        if browser is not None:
            await browser.async_cancel()
        if self._info is not None and self._registered:
            self._registered = False
            await (await azc.async_unregister_service(self._info))
        await azc.async_close()

    def _service_info(self) -> AsyncServiceInfo:
        advert = self.advert
        return AsyncServiceInfo(
            SERVICE_TYPE,
            instance_name(advert.node_id),
            addresses=[ipaddress.ip_address(a).packed for a in advert.addresses],
            port=advert.port,
            properties=advert.txt(),
            server=f"{advert.node_id}.local.",
        )

    # -- browsing ------------------------------------------------------------------

    async def run(self) -> None:
        """Turn browser changes into peer events until cancelled. Whatever a name heard
        on the LAN makes a lookup raise (anyone can send one: zeroconf's own
        ``BadTypeInNameException`` for a control character once ended `serve`) is logged
        and that name dropped; the loop goes on."""
        while True:
            name, change = await self._next_name()
            try:
                await self._handle(name, change)
            except Exception as exc:
                log.debug("discovery: lookup of %r failed: %s", name[:200], exc)

    def _heard_name(self, name: str, change: ServiceStateChange) -> None:
        """A browser change: queue the name when it is a known node's, or one we found."""
        if not well_formed_name(name):
            log.debug("discovery: ignoring the malformed name %r", name[:200])
            return
        self._looked_up.discard(name)
        if name in self._found or self._is_known(name):
            self._pending.pop(name, None)
            self._pending[name] = change  # to the back: heard again, looked up once
            self._heard.set()

    def _is_known(self, name: str) -> bool:
        if self._known is None:
            return True
        return self._known(name.partition(".")[0].lower())

    async def _next_name(self) -> tuple[str, ServiceStateChange]:
        """The next name to look up (or drop), oldest first; every ``rescan_s`` the names
        in zeroconf's cache whose nodes became known meanwhile join them."""
        while not self._pending:
            self._heard.clear()
            try:
                async with asyncio.timeout(self._rescan_s):
                    await self._heard.wait()
            except TimeoutError:
                self._rescan()
        name = next(iter(self._pending))
        return name, self._pending.pop(name)

    def _rescan(self) -> None:
        """Queue the names heard whose nodes were not known then and are now."""
        azc = self._azc
        if azc is None:
            return
        now = current_time_millis()
        for record in azc.zeroconf.cache.async_all_by_details(SERVICE_TYPE, _TYPE_PTR, _CLASS_IN):
            name = getattr(record, "alias", "")
            if name in self._found or name in self._looked_up or name in self._pending:
                continue
            if record.is_expired(now):
                continue
            if well_formed_name(name) and self._is_known(name):
                self._pending[name] = ServiceStateChange.Added

    async def _handle(self, name: str, change: ServiceStateChange) -> None:
        if change is ServiceStateChange.Removed:
            gone = self._found.pop(name, None)
            if gone is not None:
                await self.events.put(PeerLost(gone.node_id))
            return
        self._looked_up.add(name)
        advert = await self._resolve(name)
        if advert is None:
            return
        event = PeerFound(advert.node_id, advert.addresses, advert.port)
        if self._found.get(name) != event:
            self._found[name] = event
            await self.events.put(event)

    async def _resolve(self, name: str) -> Advert | None:
        azc = self._azc
        if azc is None:
            return None
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        if not await info.async_request(azc.zeroconf, self._resolve_timeout_ms):
            log.debug("discovery: %r did not answer within %d ms", name, self._resolve_timeout_ms)
            return None
        try:
            return self._check(name, info)
        except AdvertRejected as exc:
            log.debug("discovery: ignoring %r: %s", name, exc)
            return None

    def _check(self, name: str, info: AsyncServiceInfo) -> Advert:
        version = ip_version_of(self.interfaces)
        addresses = tuple(usable_addresses(info.parsed_addresses(version)))
        advert = parse_txt(info.properties, port=info.port, addresses=addresses)
        if name.lower() != instance_name(advert.node_id).lower():
            raise AdvertRejected(f"instance name {name!r} does not match node {advert.node_id}")
        return admit(
            advert,
            mesh_id=self.advert.mesh_id,
            own_node_id=self.advert.node_id,
            allow=self._allow,
        )


async def _probe_by_multicast(zc: Zeroconf, info: AsyncServiceInfo) -> None:
    """Ask "who announces this name?" as a multicast (QM) probe until cancelled.

    zeroconf probes with the unicast-response bit (QU), and a defender answers a QU probe by
    unicast to the prober's address and port 5353. When two processes on one host announce on
    the same address, both have a socket bound to ADDRESS:5353 with SO_REUSEPORT, and the
    kernel hands a unicast datagram to just one of them, chosen by a hash that depends on the
    host (and on the network namespace): on some machines the answer always reaches the
    defender's own socket, and the same node started twice went unseen. A probe without that
    bit is answered at once by multicast (RFC 6762 §8.1: probes are exempt from the one-second
    multicast rate limit), which every socket joined to the group on that interface receives.
    The answer lands in zeroconf's cache, where its probing loop sees our name taken and raises
    NonUniqueNameException — on the interfaces we announce on, whatever else the host has.
    """
    while True:
        out = DNSOutgoing(_FLAGS_QR_QUERY | _FLAGS_AA)
        out.add_question(DNSQuestion(info.type, _TYPE_PTR, _CLASS_IN))  # QM: no unicast bit
        out.add_authorative_answer(info.dns_pointer())  # an authority record: a probe
        zc.async_send(out)
        await asyncio.sleep(PROBE_INTERVAL)


def usable_addresses(addresses: Sequence[str]) -> list[str]:
    """Addresses we can dial, link-local IPv6 last (they need a scope id)."""
    out = []
    for text in addresses:
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            continue
        if addr.is_unspecified or addr.is_multicast:
            continue
        out.append(str(addr))
    return sorted(out, key=lambda a: (ipaddress.ip_address(a).is_link_local, a))
