"""Datafari 7's WebSocket under a flood of huge messages (issue 66): what the service's memory
and its liveness probe do while clients send messages of 16 MiB, compressed (a frame with the
permessage-deflate bit set, whether or not compression was agreed: what a hostile client
writes by hand) and plain, for a few seconds.

Before the fix, uvicorn's defaults (16 MiB messages, compression on) let 3 clients take the
service from 122 MiB to 824 MiB for 8 s (8 clients: 1.5 GB, never given back): a compressed
message inflated whole before the app's 512 KiB check. Now the protocol offers no compression
and refuses a message over 512 KiB from its header.

    python -m bench.ws_flood --url http://127.0.0.1:8000 --pid <the service's pid>
                             [--clients 8] [--seconds 5]

Every connection goes to the address given (127.0.0.1: `make run`); bounded in time.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import statistics
import struct
import threading
import time
import zlib
from urllib.parse import urlsplit

import httpx

MESSAGE_BYTES = 16 * 1024 * 1024
MASKED_WHOLE = 256 * 1024  # payloads up to this size are masked whole (the rest: the head)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _frame(payload: bytes, *, compressed: bool) -> bytes:
    """One masked client text frame, FIN set, RSV1 when `compressed`."""
    first = 0x80 | (0x40 if compressed else 0) | 0x1
    mask = os.urandom(4)
    header = bytes([first, 0x80 | 127]) + struct.pack("!Q", len(payload)) + mask
    whole = len(payload) <= MASKED_WHOLE  # a compressed message: what the server inflates
    shown = payload if whole else payload[:64]  # a plain one: refused from its header
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(shown))
    return header + masked + (b"" if whole else payload[64:])


def _attack(host: str, port: int, path: str, until: float, counts: dict[str, int]) -> None:
    compressed = zlib.compressobj(wbits=-15)
    deflated = compressed.compress(b"a" * MESSAGE_BYTES) + compressed.flush(zlib.Z_SYNC_FLUSH)
    deflated = deflated[:-4]  # permessage-deflate drops the sync flush's tail
    plain_head = b"x" * (1024 * 1024)  # the first MiB of a plain 16 MiB message
    while time.monotonic() < until:
        kind = "compressed" if counts["sent"] % 2 else "plain"
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                key = base64.b64encode(os.urandom(16)).decode()
                sock.sendall(
                    f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n".encode()
                )
                sock.recv(4096)  # the 101 (or a refusal)
                if kind == "compressed":
                    sock.sendall(_frame(deflated, compressed=True))
                else:
                    frame = _frame(plain_head, compressed=False)
                    # the header announces 16 MiB; the first MiB follows
                    frame = frame[:2] + struct.pack("!Q", MESSAGE_BYTES) + frame[10:]
                    sock.sendall(frame)
                sock.settimeout(2)
                try:
                    sock.recv(4096)  # the close frame
                    counts["closed"] += 1
                except (TimeoutError, OSError):
                    pass
                counts["sent"] += 1
        except OSError:
            counts["errors"] += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--pid", type=int, required=True, help="the service's process id")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    parts = urlsplit(args.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    before = rss_mib(args.pid)
    counts = {"sent": 0, "closed": 0, "errors": 0}
    until = time.monotonic() + args.seconds
    attackers = [
        threading.Thread(target=_attack, args=(host, port, "/ai/ws", until, counts), daemon=True)
        for _ in range(args.clients)
    ]
    for attacker in attackers:
        attacker.start()
    peak, probes = before, []
    with httpx.Client(timeout=10) as http:
        while time.monotonic() < until:
            started = time.perf_counter()
            http.get(f"{args.url}/health/live")
            probes.append((time.perf_counter() - started) * 1000)
            peak = max(peak, rss_mib(args.pid))
            time.sleep(0.05)
    for attacker in attackers:
        attacker.join(10)
    time.sleep(1)
    after = rss_mib(args.pid)
    p95 = statistics.quantiles(probes, n=20)[-1] if len(probes) >= 20 else max(probes)
    print(
        f"{args.clients} clients, {args.seconds:g} s: {counts['sent']} messages of 16 MiB "
        f"({counts['closed']} answered by a close, {counts['errors']} connection errors); "
        f"service RSS {before:.0f} MiB before, peak {peak:.0f} MiB, {after:.0f} MiB after; "
        f"/health/live p50 {statistics.median(probes):.1f} ms, p95 {p95:.1f} ms"
    )


if __name__ == "__main__":
    main()
