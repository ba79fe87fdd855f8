"""The fake rate-limited provider itself (tests/providers/ratelimited.py): it times a request by its arrival, as a
provider's edge does, not by when its own event loop got round to reading it."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from tests.providers.ratelimited import RateLimitedServer

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
REQUEST = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
           f"content-length: {len(BODY)}\r\n\r\n").encode() + BODY


def send_two(port: int, apart: float, sent: list[float], answers: list[bytes]) -> None:
    """Two requests on two connections, `apart` seconds apart (at least), then their answers' status lines."""
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    for i, conn in enumerate(conns):
        if i:
            time.sleep(apart)
        sent.append(time.monotonic())
        conn.sendall(REQUEST)
    for conn in conns:
        answers.append(conn.recv(65536).split(b"\r\n", 1)[0])
        conn.close()


@pytest.mark.parametrize("stamp", ["arrival", "read"])
async def test_requests_that_arrived_an_interval_apart_are_both_taken_however_late_the_server_reads_them(stamp):
    """A provider allowing no burst (3,000 a minute: one request each 20 ms) gets two requests 25 ms apart while
    its event loop is busy for 0.3 s: read together, they are still an interval apart on arrival, and both are
    answered. Stamped when read (the old way), the second looks early and is refused."""
    async with RateLimitedServer(requests_per_minute=3000, burst_seconds=0.0, stamp=stamp) as server:
        sent: list[float] = []
        answers: list[bytes] = []
        client = threading.Thread(target=send_two, args=(server.port, 0.025, sent, answers))
        client.start()
        time.sleep(0.3)  # the server's loop (this one) is busy: both requests wait in the kernel unread
        busy_until = time.monotonic()
        while client.is_alive():
            await _pause()
        client.join()
        assert len(sent) == 2
        if stamp == "arrival":
            assert answers == [b"HTTP/1.1 200 OK"] * 2 and server.limited == 0
            assert server.arrivals[0] <= busy_until and server.arrivals[1] - server.arrivals[0] >= 0.025
            assert all(arrived <= busy_until for arrived in server.arrivals[:2])
        else:
            assert server.limited == 1 and sorted(answers) == [b"HTTP/1.1 200 OK", b"HTTP/1.1 429 Too Many Requests"]
            assert all(arrived >= busy_until for arrived in server.arrivals)


async def test_an_early_request_is_refused_by_its_arrival_time():
    """The other side: two requests 2 ms apart at the socket are refused one, however the reads fall."""
    async with RateLimitedServer(requests_per_minute=3000, burst_seconds=0.0) as server:
        sent: list[float] = []
        answers: list[bytes] = []
        client = threading.Thread(target=send_two, args=(server.port, 0.002, sent, answers))
        client.start()
        while client.is_alive():
            await _pause()
        client.join()
        gap = sent[1] - sent[0]
        if gap < 0.02:  # (a thread that slept far longer than asked makes this case moot)
            assert server.limited == 1 and b"HTTP/1.1 429 Too Many Requests" in answers
        assert server.stats()["reordered"] == 0


def test_the_stamp_is_one_of_two():
    with pytest.raises(ValueError, match="stamp"):
        RateLimitedServer(stamp="later")


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.005)
