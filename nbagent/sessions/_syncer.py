"""Making what the store wrote durable without making the run wait for the disk: one thread per process
that fsyncs the files writers committed to, at most once every `SYNC_INTERVAL`.

What a commit promises, and when:
- when `commit()` returns, its lines are in the file (one `write`): a killed process, kernel or Python,
  loses none of them;
- within `SYNC_INTERVAL` (plus the fsync's own time), they are on the disk: the commit hands its file to
  this thread (`soon`), which fsyncs it at once when it has not fsynced for `SYNC_INTERVAL`, else when that
  much time has passed since its last fsync began, for every commit made meanwhile (a group fsync: one
  flush of the disk covers them all, and a run that calls tools many times a second pays for a few fsyncs a
  second, not one a call). A machine that stops (power cut, OS crash) loses at most what was committed in
  the last `SYNC_INTERVAL` and during the fsync in progress;
- when `close()` returns (a run's end), everything written is on the disk: it waits for its own fsync.

An fsync that fails is raised by the writer's next `commit()` or `close()`, on the caller's thread, as a
synchronous one would have been.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

__all__ = ["SYNCER", "SYNC_INTERVAL"]

SYNC_INTERVAL = 0.1
"""Seconds between the starts of two fsyncs of the store's thread (what a machine that stops can lose)."""


class _Syncer:
    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._due: dict[int, Any] = {}
        self._thread: threading.Thread | None = None

    def soon(self, writer: Any) -> None:
        """fsync `writer`'s file as soon as the thread can (the writer's `_sync()` does it)."""
        if id(writer) in self._due:  # an fsync of it is still to begin: it covers what was just written
            return
        with self._cond:
            self._due[id(writer)] = writer
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="nbagent-session-fsync", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _work(self) -> None:
        cond = self._cond
        began = -SYNC_INTERVAL
        while True:
            with cond:
                while not self._due:
                    cond.wait()
            wait = began + SYNC_INTERVAL - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # commits made meanwhile join this fsync
            began = time.monotonic()
            with cond:
                due, self._due = self._due, {}
            for writer in due.values():
                writer._sync()
            del due, writer


SYNCER = _Syncer()
if hasattr(os, "register_at_fork"):  # a forked child has no thread: it starts its own when it writes
    os.register_at_fork(after_in_child=SYNCER._reset)
