"""Runs inside the Letta sidecar's virtual environment: the Letta server on loopback, with every
outbound connection refused.

Letta reaches for the network on its own (NLTK data at startup, tokenizer files, hosted
default models); moviemem promises loopback-only traffic, so this process refuses to resolve
or connect to anything but loopback addresses and Unix sockets, and says so in its log.

    python -I _serve.py --host 127.0.0.1 --port PORT   (LETTA_PG_URI etc. in the environment)
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from typing import Any

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def _is_loopback(host: object) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    name = str(host).split("%")[0].strip("[]").lower()
    if name in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def guard_network() -> None:
    """Refuse name lookups and connections that would leave the machine."""
    original_connect, original_connect_ex = socket.socket.connect, socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def _check(sock: socket.socket, address: object) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple) and not _is_loopback(address[0]):
            print(f"moviemem: refused an outbound connection to {address[0]}", file=sys.stderr, flush=True)
            raise ConnectionRefusedError(f"moviemem sidecar: outbound connection to {address[0]} refused (loopback only)")

    def connect(self: socket.socket, address: Any) -> None:
        _check(self, address)
        return original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check(self, address)
        return original_connect_ex(self, address)

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> list[Any]:
        if not _is_loopback(host):
            print(f"moviemem: refused a name lookup of {host}", file=sys.stderr, flush=True)
            raise socket.gaierror(socket.EAI_NONAME, f"moviemem sidecar: lookup of {host} refused (loopback only)")
        return original_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]  # forwarded unchanged to the real lookup

    socket.socket.connect = connect  # type: ignore[assignment]  # the guard replaces socket's methods on purpose
    socket.socket.connect_ex = connect_ex  # type: ignore[assignment]  # the guard replaces socket's methods on purpose
    socket.getaddrinfo = getaddrinfo


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if not _is_loopback(args.host):
        raise SystemExit("the moviemem Letta sidecar listens on loopback only")
    guard_network()
    import nltk

    # Letta downloads NLTK's punkt tables at startup; we run offline (they are only used to
    # split uploaded documents, which moviemem does not do)
    def skip_download(*args: object, **kwargs: object) -> bool:
        print(f"moviemem: skipped nltk.download{args}", file=sys.stderr)
        return False

    nltk.download = skip_download
    from letta.server.rest_api.app import start_server

    start_server(port=args.port, host=args.host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
