"""Whether a host is this machine: the viewer serves its unauthenticated page to loopback
hosts only, and a server on this machine may take no API key."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
