"""Serving streamable HTTP: which Host and Origin headers are accepted, the body limit, and refusing to
serve an open endpoint beyond loopback.

The SDK checks Host and Origin (DNS-rebinding protection) only when bound to a loopback name; here the
check is always on. On loopback the accepted hosts are the loopback names; bound to a specific address
beyond loopback, that address plus ``MEMORIA_HTTP_ALLOWED_HOSTS``; bound to every interface (0.0.0.0 or
::), only ``MEMORIA_HTTP_ALLOWED_HOSTS``, which must then be set. A wrong Host gets 421, a wrong Origin
403, a body over ``MEMORIA_HTTP_MAX_BODY_BYTES`` 413, a missing or invalid token (when tokens are
configured) 401.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from mcp.server.transport_security import TransportSecuritySettings

from server.config import ConfigError, Settings

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:  # a name
        return None


def is_loopback(host: str) -> bool:
    address = _address(host)
    return host == "localhost" or (address is not None and address.is_loopback)


def is_every_interface(host: str) -> bool:
    address = _address(host)
    return host == "" or (address is not None and address.is_unspecified)


def host_header(host: str) -> str:
    """``host`` as a Host header names it: IPv6 addresses compressed and bracketed."""
    address = _address(host)
    if address is None:
        return host.lower()
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def transport_security(host: str, port: int, settings: Settings) -> TransportSecuritySettings:
    """Host/Origin validation for a server bound to ``host``:``port`` (see the module docstring)."""
    if is_loopback(host):
        bound = [] if f"{host_header(host)}:*" in LOOPBACK_HOSTS else [f"{host_header(host)}:*"]
        hosts = [*LOOPBACK_HOSTS, *bound, *settings.http.allowed_hosts]
        origins = [*LOOPBACK_ORIGINS, *settings.http.allowed_origins]
    else:
        if is_every_interface(host) and not settings.http.allowed_hosts:
            raise ConfigError(
                f"serving on every interface ({host or '0.0.0.0'}) needs MEMORIA_HTTP_ALLOWED_HOSTS: the host "
                "names clients use to reach this server, e.g. memory.example.com:* (a request naming any other "
                "Host is refused, which stops DNS-rebinding attacks)"
            )
        own = [] if is_every_interface(host) else [f"{host_header(host)}:{port}"]
        hosts = [*own, *settings.http.allowed_hosts]
        origins = list(settings.http.allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def refuse_open_endpoint(host: str, settings: Settings, authenticated: bool) -> None:
    """Beyond loopback, every client must bring a token, unless the operator says a proxy checks them."""
    if authenticated or is_loopback(host) or settings.http.allow_unauthenticated:
        return
    raise ConfigError(
        f"refusing to serve {host} without authentication: anyone who can reach it could read and write "
        "every memory. Set MEMORIA_HTTP_TOKENS_FILE (static tokens) or MEMORIA_OAUTH_ISSUER_URL (OAuth), "
        "bind 127.0.0.1, or set MEMORIA_HTTP_ALLOW_UNAUTHENTICATED=true behind an authenticating proxy"
    )


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``, bound before anything starts (the store, the models, the
    "serving" line): a port in use is said in one line, not after the server said it serves. As uvicorn
    binds its own: address reuse on, so a restart right after a stop is not refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = (
            "the address is in use (another server listens there)"
            if exc.errno == errno.EADDRINUSE
            else f"{exc.strerror or exc}".lower()
        )
        raise ConfigError(
            f"cannot serve on {host_header(host)}:{port}: {why}. Choose another port "
            "(--http HOST:PORT), or stop what listens there"
        ) from None
    sock.set_inheritable(True)
    return sock
