"""What does a request on a new connection cost `oip serve`? Its CPU per request and the rate four clients reach.

    python -m bench.bench_new_connections [--requests 3000] [--rounds 2] [--against OTHER_CHECKOUT]

A load balancer's health check and a client without a connection pool open a connection for each request. Four
client threads send, each on a connection of its own with ``Connection: close``, ``GET /v2/health/ready`` (answered
by the thread that accepts the worker's connections) and an `iris` inference (handed to the event loop), to
`oip serve --workers 1` of this checkout and, with ``--against``, of another (e.g. ``git worktree add /tmp/before
HEAD~1``), the checkouts taking turns each round. The server's CPU (user + system, from ``/proc``) is divided by the
requests sent; every answer must be 200.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench.bench_loop_shedding import served

ROOT = Path(__file__).resolve().parents[1]
BODY = b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[5.1,3.5,1.4,0.2]}]}'
REQUESTS = {
    "health": b"GET /v2/health/ready HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n",
    "infer": b"POST /v2/models/iris/infer HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY),
}
CLIENTS = 4


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _client(port: int, request: bytes, count: int, answered: list[int]) -> None:
    ok = 0
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(request)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            ok += received.startswith(b"HTTP/1.1 200 ")
    answered.append(ok)


def measure(base: str, pid: int, request: bytes, requests: int) -> tuple[float, float]:
    """(server CPU µs per request, requests a second) for ``requests`` new connections from ``CLIENTS`` threads."""
    port = int(base.rsplit(":", 1)[1])
    answered: list[int] = []
    each = requests // CLIENTS
    threads = [threading.Thread(target=_client, args=(port, request, each, answered)) for _ in range(CLIENTS)]
    cpu, started = cpu_seconds(pid), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds, used = time.perf_counter() - started, cpu_seconds(pid) - cpu
    if sum(answered) != each * CLIENTS:
        raise SystemExit(f"bench_new_connections: {each * CLIENTS - sum(answered)} answers were not 200")
    return used / (each * CLIENTS) * 1e6, each * CLIENTS / seconds


@contextlib.contextmanager
def quiet_served(checkout: Path) -> Iterator[tuple[str, int]]:
    with served(checkout) as (base, _metrics, pid):
        yield base, pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="requests of each kind per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", type=Path, help="another checkout, measured in the same run")
    args = parser.parse_args()
    checkouts = [("this checkout", ROOT)] + ([(str(args.against), args.against.resolve())] if args.against else [])
    print(f"load average before: {os.getloadavg()}", flush=True)
    rows = []
    for round_ in range(1, args.rounds + 1):
        for name, checkout in checkouts:
            with quiet_served(checkout) as (base, pid):
                measure(base, pid, REQUESTS["infer"], 200)  # warm
                for kind, request in REQUESTS.items():
                    cpu, rate = measure(base, pid, request, args.requests)
                    rows.append(f"| {name} | {round_} | {kind} | {cpu:.0f} | {rate:,.0f} |")
                    print(rows[-1], flush=True)
    print(f"load average after: {os.getloadavg()}")
    print("\n".join(["| server | round | request | server CPU per request (µs) | requests a second |",
                     "| --- | ---: | --- | ---: | ---: |", *rows]))  # fmt: skip


if __name__ == "__main__":
    main()
