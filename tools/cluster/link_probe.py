#!/usr/bin/python3
"""Measures a TCP link between two hosts (or network namespaces): round-trip latency and
bandwidth. Standard library only.

  link_probe.py server [--bind ADDR] [--port P]
  link_probe.py client HOST PORT [--count N] [--mib M] [--connect-timeout S]

The server answers connections one after another until it is killed. The client makes two
connections: a ping-pong of N one-byte messages with TCP_NODELAY (median, p90 and minimum
round trip in microseconds), then a bulk send of M MiB, timed from the first byte sent to
the server's acknowledgement of the last (so one one-way delay is included; at 64 MiB and a
millisecond it is noise). The client prints one JSON line on stdout; exit 1 on failure.
"""
import argparse
import json
import socket
import statistics
import struct
import sys
import time

PING, BULK = b"P", b"B"
CHUNK = 1 << 20


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise ConnectionError("peer closed the connection")
        buf += part
    return bytes(buf)


def serve(args):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((args.bind, args.port))
    lsock.listen(4)
    print(f"link_probe: listening on {args.bind}:{args.port}", file=sys.stderr, flush=True)
    while True:
        conn, _ = lsock.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                mode = recv_exact(conn, 1)
                if mode == PING:
                    # Echo every byte until the client closes.
                    while True:
                        b = conn.recv(1)
                        if not b:
                            break
                        conn.sendall(b)
                elif mode == BULK:
                    total = struct.unpack("!Q", recv_exact(conn, 8))[0]
                    got, buf = 0, bytearray(CHUNK)
                    while got < total:
                        part = conn.recv_into(buf, min(CHUNK, total - got))
                        if part == 0:
                            raise ConnectionError("bulk sender closed early")
                        got += part
                    conn.sendall(struct.pack("!Q", got))
            except (ConnectionError, OSError) as e:
                print(f"link_probe: server: {e}", file=sys.stderr, flush=True)


def connect(host, port, timeout):
    """Retries until the server listens (it may be starting in another namespace)."""
    end = time.monotonic() + timeout
    while True:
        try:
            s = socket.create_connection((host, port), timeout=max(1.0, timeout))
            s.settimeout(60)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.monotonic() >= end:
                raise
            time.sleep(0.1)


def client(args):
    with connect(args.host, args.port, args.connect_timeout) as s:
        s.sendall(PING)
        rtts = []
        for _ in range(args.count):
            t = time.perf_counter_ns()
            s.sendall(b"x")
            recv_exact(s, 1)
            rtts.append((time.perf_counter_ns() - t) / 1e3)
    rtts.sort()
    total = args.mib << 20
    with connect(args.host, args.port, args.connect_timeout) as s:
        s.sendall(BULK + struct.pack("!Q", total))
        block = memoryview(bytes(CHUNK))
        t = time.perf_counter()
        sent = 0
        while sent < total:
            sent += s.send(block[: min(CHUNK, total - sent)])
        got = struct.unpack("!Q", recv_exact(s, 8))[0]
        seconds = time.perf_counter() - t
    if got != total:
        raise ConnectionError(f"server received {got} of {total} bytes")
    print(json.dumps({
        "host": args.host, "port": args.port, "count": args.count,
        "rtt_us_median": round(statistics.median(rtts), 1),
        "rtt_us_p90": round(rtts[min(len(rtts) - 1, int(0.9 * len(rtts)))], 1),
        "rtt_us_min": round(rtts[0], 1),
        "bytes": total, "seconds": round(seconds, 4),
        "mbit_per_s": round(total * 8 / seconds / 1e6, 1),
    }), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    sp = sub.add_parser("server", help="answer probes")
    sp.add_argument("--bind", default="0.0.0.0")
    sp.add_argument("--port", type=int, default=5201)
    cp = sub.add_parser("client", help="measure the link to a server")
    cp.add_argument("host")
    cp.add_argument("port", type=int)
    cp.add_argument("--count", type=int, default=200, help="ping-pongs (default 200)")
    cp.add_argument("--mib", type=int, default=64, help="MiB to send for the bandwidth (default 64)")
    cp.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to retry connecting")
    args = ap.parse_args()
    if args.mode == "client":
        if args.count < 1:
            ap.error("--count must be at least 1")
        if args.mib < 1:
            ap.error("--mib must be at least 1")
    try:
        serve(args) if args.mode == "server" else client(args)
    except (OSError, ConnectionError) as e:
        print(f"link_probe: {args.mode}: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
