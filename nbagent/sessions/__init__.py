"""Conversations that outlive the kernel: an append-only JSONL store per conversation.

    <workspace>/.nbagent/sessions/<id>.jsonl        one JSON object per line
    <workspace>/.nbagent/sessions/<id>.d/<name>     side files: whole texts too long for a line

The first line is the header (`kind: "session"`: id, format, created, notebook, workspace, model); every
later line is one fact, in the order it happened:

| kind | what |
|---|---|
| `run` | a run started: its prompt, model, mode |
| `message` | one message of the transcript, in nbagent's neutral form (`nbagent.transcript`) |
| `call` | the serialisable parts of a call record: status, decision and who made it, duration, activity |
| `request` | the exact body sent to the provider, secrets removed |
| `compaction` | the transcript was compacted: `messages[start:end]` (written earlier, kept whole) were replaced by `replacement`; the summary requests' responses, the reason, the sizes |
| `end` | a run ended: status, usage, cost, error |

Writing: lines are gathered as a run goes and `commit()`ed at the points where the transcript is whole: one
`write` under an exclusive `flock` (the model's response before its calls run; a batch's results when the
loop next waits, or with the next response). A killed kernel loses at most the batch in flight (said
precisely in `recording`), and two kernels writing into one workspace never interleave lines of one file.
The fsync is the store's own thread's (`_syncer`): at most one every 0.1 s for every commit made meanwhile,
and a writer's `close()` (a run's end) waits for its own. Every line but the store's identifying facts (the
header, the notebook) passes `nbagent.safety.secrets.redact`; a tool result's text longer than
`SIDE_FILE_CHARS` is stored cut, with the whole text in a side file (restored when the session is loaded).

Reading: `load_session` skips a truncated or corrupt line with a warning (never fatal), refuses a file
written by a newer format with a clear message, and gives calls that were in flight when the writer
died a synthesised "interrupted" result, so the transcript is valid before the next request.

The store is five modules: `_folder` (where sessions live, their ids, the format version), `_writer`
(`SessionWriter`: gathering a run's facts, cutting long results into side files, one locked, signed write
per batch), `_syncer` (the fsyncs, off the run's thread), `_reader` (`load_session`, `list_sessions`,
`find_session`: verifying every line; a listing, and so "the latest", holds only files that verify) and
`_transcript` (what loading makes of the verified facts: side files restored, request bodies made whole, the
transcript repaired). What reading trusts, and what stops a forged file, is said at the top of `_reader`: every line is signed, and a file whose lines do not verify is refused.
`recording` (`SessionRecorder`) writes a run into the store as it goes, at the points where its transcript
is whole.

The rule: this wing imports only the vocabulary at the top of nbagent and `safety`.
"""

from __future__ import annotations

from ._folder import FORMAT, SessionError, new_session_id, sessions_dir
from ._reader import (
    UNSIGNED_VARIABLE, SessionInfo, Sessions, Skipped, StoredSession, delete_session, find_session, list_sessions,
    load_session,
)
from ._transcript import INTERRUPTED, repair_transcript
from ._writer import SIDE_FILE_CHARS, SessionWriter

__all__ = ["FORMAT", "INTERRUPTED", "SIDE_FILE_CHARS", "UNSIGNED_VARIABLE", "SessionError", "SessionInfo", "Sessions",
           "SessionWriter", "Skipped", "StoredSession", "delete_session", "find_session", "list_sessions", "load_session",
           "new_session_id", "repair_transcript", "sessions_dir"]
