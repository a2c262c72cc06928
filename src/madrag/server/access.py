"""Which model servers the web server may reach, and which of them its own API keys go to.

A caller of the API (any local process on a loopback binding, any token holder on a public one) names a
backend's ``base_url``. Two rules keep that from turning the server against its operator:

- **Addresses** (:func:`check_address`): a run or a connection test reaches only a loopback address, its kind's
  own server (no ``base_url``: OpenAI's, Anthropic's), the presets' servers (:mod:`madrag.teacher.presets`) and
  the servers the operator named (``madrag serve --allow-backend-url URL``, ``--api-key-url URL``). Any other
  address is refused (:class:`NotAllowed`, 403) before a connection is made, in a sentence naming the option. A
  host name not named by the operator is resolved, and every address it resolves to must be a loopback one.
- **Keys** (:func:`env_key`): the key the server reads from its environment (:meth:`ServerConfig.key_env`) is
  sent only to its kind's own server and to the base URLs the operator named with ``--api-key-url``. Any other
  URL gets the key typed with it (held with the run, :mod:`madrag.server.runs.keys`) or none.

The address is checked when the request comes in, again on the scoring thread just before a run's first
request, and a third time by madrag's HTTP client itself each time it resolves the name to connect
(:func:`connect_problem`, the guard of :mod:`madrag.providers.address_guard` set around every run and test): a
name that answers a loopback address first and another one when the client connects (DNS rebinding) is refused
there, its request failing with the reason.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from madrag.providers.backends import backends, find_backend
from madrag.server.config import ServerConfig
from madrag.server.http.faults import BadInput, NotAllowed
from madrag.teacher import presets

Resolver = Callable[[str, int], list[str]]
"""``(host, port) -> the addresses it resolves to`` (the tests give their own)."""

ALLOW_OPTION = "madrag serve --allow-backend-url"
DEFAULT_PORTS = {"http": 80, "https": 443}


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (what the HTTP client would connect to); [] when it resolves to none."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in found})


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``, lower-cased, the scheme's port when none is given; a BadInput for a URL
    that names no host."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise BadInput(f"the server URL {url!r} has an invalid port", "base_url") from None
    host = (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        raise BadInput(f"the server URL {url!r} is not an http:// or https:// address with a host", "base_url")
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def normal_url(url: str) -> str:
    """``url`` as the key rule compares it: scheme, host and port (given or the scheme's) and the path without a
    trailing slash; no user, query or fragment."""
    return _shown(*origin(url)) + urlsplit(url.strip()).path.rstrip("/")


def key_urls(config: ServerConfig, kind: str) -> set[str]:
    """The base URLs the server's environment key of ``kind`` goes to: its kind's own address and those named
    with ``--api-key-url``."""
    own = find_backend(kind).traits.default_url
    return {normal_url(u) for u in (own, *config.key_urls(kind)) if u}


def key_goes_to(config: ServerConfig, kind: str, base_url: str | None) -> bool:
    """Whether the server's environment key of ``kind`` may be sent to ``base_url`` (None: the kind's own
    server)."""
    if not base_url or not base_url.strip():
        return True
    return normal_url(base_url) in key_urls(config, kind)


def env_key(config: ServerConfig, kind: str, base_url: str | None) -> str | None:
    """The environment variable a backend of ``kind`` at ``base_url`` reads its key from when none was typed:
    the server's (:meth:`ServerConfig.key_env`) where that key goes to ``base_url``, else ``""`` (no variable is
    read, no key sent); None for a kind that takes no key."""
    if not find_backend(kind).traits.needs_key:
        return None
    if not key_goes_to(config, kind, base_url):
        return ""
    return config.key_env(kind)


def allowed_origins(config: ServerConfig) -> set[tuple[str, str, int]]:
    """The servers a caller may name besides loopback ones: every remote kind's own, the presets' and those the
    operator named (``--allow-backend-url``, ``--api-key-url``)."""
    urls: Iterable[str] = (
        *(b.traits.default_url for b in backends() if b.traits.default_url),
        *([own] if (own := os.environ.get("OPENAI_BASE_URL", "").strip()) else []),  # the openai kind's own then
        *presets.preset_urls(),
        *config.allow_backend_urls,
        *config.api_key_urls,
        *(u for urls in config.kind_key_urls.values() for u in urls),
    )
    return {origin(u) for u in urls}


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _addresses(host: str, port: int, resolver: Resolver | None) -> list[str]:
    """``host`` itself where it is an address, else every address it resolves to (``resolver``, else
    :func:`resolve`)."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return (resolver or resolve)(host, port)
    return [host]


def _shown(scheme: str, host: str, port: int) -> str:
    """``scheme://host:port``, an IPv6 host in brackets."""
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def check_address(config: ServerConfig, base_url: str | None, resolver: Resolver | None = None) -> None:
    """Refuse (:class:`NotAllowed`) a ``base_url`` the server may not reach (the rules above); None (the kind's
    own server) is allowed. Resolves a host name the operator did not name (``resolver``, else :func:`resolve`);
    connects to nothing."""
    if not base_url or not base_url.strip():
        return
    scheme, host, port = origin(base_url)
    if (scheme, host, port) in allowed_origins(config):
        return
    addresses = _addresses(host, port, resolver)
    if addresses and all(_is_loopback(a) for a in addresses):
        return
    shown = _shown(scheme, host, port)
    if not addresses:
        why = f"{host} resolves to no address"
    else:
        why = f"{host} is {', '.join(addresses[:3])}, not a loopback address"
    raise NotAllowed(
        f"this server may not reach the model server at {shown} ({why}, nor a preset's server): its operator "
        f"allows one with `{ALLOW_OPTION} {shown}` (and sends it the server's own API key only with "
        "`--api-key-url`)",
        "base_url",
    )


def connect_problem(config: ServerConfig, host: str, port: int, addresses: list[str]) -> str | None:
    """Why madrag's HTTP client may not connect to ``host`` (a name, resolved to ``addresses`` just before it
    connects): the guard of every run and connection test (:mod:`madrag.providers.address_guard`). None when it
    may: a server the operator or a preset names by that name and port, or every address a loopback one."""
    if (host.lower().rstrip("."), port) in {(h, p) for _, h, p in allowed_origins(config)}:
        return None
    if addresses and all(_is_loopback(a) for a in addresses):
        return None
    found = ", ".join(addresses[:3]) or "no address"
    return f"{host} resolved to {found} when connecting: not allowed ({ALLOW_OPTION})"


LMS_OPTION = "madrag serve --allow-lms-url"


def check_lms(config: ServerConfig, url: str, resolver: Resolver | None = None) -> None:
    """Refuse (:class:`NotAllowed`) a Canvas address the server may not reach: one the operator named
    (``--allow-lms-url``) or whose every address is a loopback one; checked before each call the LMS pages and API
    make (connect, list, pull, preview, push). Connects to nothing."""
    scheme, host, port = origin(url)
    if (scheme, host, port) in {origin(u) for u in config.allow_lms_urls}:
        return
    addresses = _addresses(host, port, resolver)
    if addresses and all(_is_loopback(a) for a in addresses):
        return
    shown = _shown(scheme, host, port)
    raise NotAllowed(
        f"this server may not reach the Canvas at {shown}: its operator allows one with `{LMS_OPTION} {shown}`",
        "url",
    )
