"""LAN discovery: who else of our mesh is on this network, and at which address."""

from __future__ import annotations

from lifeline_mesh.discovery.advert import SERVICE_TYPE, Advert, PeerFound, PeerLost

__all__ = ["SERVICE_TYPE", "Advert", "PeerFound", "PeerLost"]
