"""Per-thread capture of stdout/stderr: what one thread prints goes to its sink, nothing else does."""

from __future__ import annotations

import io
import threading

import pytest

from nbagent.toolbox._capture import RoutedStdin, RoutedStream, StreamSink, _routes, route_thread


class Recorder(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_routed_thread_writes_to_its_sink_and_others_to_the_stream() -> None:
    under = Recorder()
    stream = RoutedStream("stdout", under)
    got: list[tuple[str, str]] = []
    ident = threading.get_ident()
    _routes[ident] = lambda name, text: got.append((name, text))
    try:
        stream.write("mine")
        assert stream.isatty() is False
        t = threading.Thread(target=lambda: stream.write("theirs"))
        t.start()
        t.join()
    finally:
        del _routes[ident]
    assert got == [("stdout", "mine")]
    assert under.getvalue() == "theirs"
    assert stream.isatty() is True
    assert stream.getvalue() == "theirs"  # everything else is the real stream's


def test_a_sink_left_behind_closed_is_dropped() -> None:
    under = io.StringIO()
    stream = RoutedStream("stdout", under)
    sink = StreamSink()
    sink.close()
    ident = threading.get_ident()
    _routes[ident] = sink
    stream.write("after")
    assert ident not in _routes
    assert under.getvalue() == "after"


def test_a_patched_write_stays_behind_the_routing() -> None:
    under = io.StringIO()
    stream = RoutedStream("stdout", under)
    teed: list[str] = []
    original = stream.write

    def tee(text: str) -> int:
        teed.append(text)
        return original(text)

    stream.write = tee  # what IPython does while a cell runs
    stream.write("cell output")
    got: list[str] = []
    ident = threading.get_ident()
    _routes[ident] = lambda name, text: got.append(text)
    try:
        stream.write("tool output")
    finally:
        del _routes[ident]
    stream.write = original  # the cell ended: the patch is undone
    stream.write("later")
    assert teed == ["cell output"]
    assert got == ["tool output"]
    assert under.getvalue() == "cell outputlater"


def test_stdin_refuses_a_routed_thread() -> None:
    stdin = RoutedStdin(io.StringIO("typed\n"))
    with route_thread(lambda name, text: None):
        with pytest.raises(EOFError):
            stdin.readline()
    assert stdin.readline() == "typed\n"


def test_the_sink_keeps_a_bounded_copy_and_streams_everything() -> None:
    streamed: list[tuple[str, str]] = []
    sink = StreamSink(lambda name, text: streamed.append((name, text)), limit=10, interval=0)
    for _ in range(5):
        sink("stdout", "abcd")
    sink("stderr", "e")
    sink.close()
    assert sink.text("stdout").startswith("abcdabcdab")
    assert "10 more characters were not kept" in sink.text("stdout")
    assert "".join(t for n, t in streamed if n == "stdout") == "abcd" * 5
    assert sink.text("stderr") == "e"
