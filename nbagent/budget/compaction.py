"""Compaction: making a long transcript fit the context window again, without losing anything.

    compaction = await compact(messages, model, window=200_000)     # a `Compaction`, or None: nothing to do
    compaction.messages                                            # the shorter transcript
    compaction.replaced                                            # what it replaced, whole

Two steps, the cheap one first:

1. Old tool results become stubs: one line that says what was there (the tool, its size, how it began)
   and where the whole result lives (`locate`: in a notebook, a live object `inspect_variable` can read
   again; elsewhere `run.calls[i].details` on the run that made the call). The calls stay, each paired
   with its (now short) result, and the assistant messages around them stay untouched, reasoning included
   (Anthropic thinking signatures, Gemini thought signatures, Responses encrypted reasoning).
2. If that is not enough, the older turns are summarised by the model into one user message that opens
   the transcript; the recent turns (about `keep_recent` of the window, at least the last turn) are kept
   verbatim. The cut is always before a user message or an assistant message, never between a call and its
   result, so every call is still answered exactly once, right after it, for every provider.

The loop compacts by itself before a request would fill `threshold` of the window, and once more if a
provider still answers that the prompt is too long; `Agent.compact()` and `%agent --compact` do it by hand.
A compaction is an event (`Compacted`) and a fact of the session's record, with the messages it replaced.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import ModelError
from ..messages import AssistantMessage, Message, TextBlock, ToolResultMessage, Usage, UserMessage
from ..reprs import short_line
from ..safety.gate import screen
from .window import estimate_message, estimate_tokens

__all__ = ["SUMMARY_PREFIX", "Compaction", "CompactionSettings", "TranscriptDigest", "compact", "compaction_settings", "is_summary", "stub_text",
           "transcript_text"]

log = logging.getLogger("nbagent.compaction")

SUMMARY_PREFIX = "[Summary of the earlier conversation: it was compacted to fit the context window]"
STUB_PREFIX = "[compacted]"

SUMMARY_INSTRUCTIONS = (
    "You compact the transcript of a conversation between a user and an AI agent that works in a Jupyter "
    "notebook with tools, so that the agent can carry on with this summary instead of the transcript. "
    "Write a dense summary in Markdown: the user's requests (the latest one word for word), decisions and "
    "constraints, facts learned (names of variables, files, columns, numbers that matter), what the agent "
    "did with which tools and what came of it, errors met, and what is still open or next. Do not invent "
    "anything; do not address the user."
)
SUMMARY_REQUEST = "Summarise this transcript (an earlier summary, if any, comes first in it):"


@dataclass(slots=True)
class CompactionSettings:
    """When and how a run compacts its transcript (`Agent(compaction=...)`)."""

    threshold: float = 0.8
    """Compact before a request when the transcript would fill this share of the context window."""
    target: float = 0.5
    """After compacting, the transcript should take at most this share of the window."""
    keep_recent: float = 0.25
    """Recent turns kept verbatim: about this share of the window (at least the last turn)."""
    stub_chars: int = 400
    """Older tool results longer than this many characters become stubs."""
    stub_share: float = 0.1
    """The older turns, stubbed, may take this share of the window; beyond it they are summarised."""
    summarize: bool = True
    """Summarise older turns with the model when stubs are not enough."""
    summarizer: Any = None
    """The `Model` that writes summaries (default: the run's model)."""
    locate: Callable[[ToolResultMessage], str | None] | None = None
    """Where the whole result of a call lives, in words the model can act on (a notebook's session sets it)."""
    auto: bool = True
    """Compact automatically before the window fills (False: only by hand)."""

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1 or not 0 < self.target <= self.threshold or not 0 < self.keep_recent < 1:
            raise ValueError("compaction needs 0 < target <= threshold <= 1 and 0 < keep_recent < 1")


@dataclass(slots=True)
class Compaction:
    """One compaction: `messages[start:end]` of the transcript were replaced by `replacement`."""

    start: int
    """The first replaced message's index in the transcript before."""
    end: int
    """One past the last replaced message (the kept recent turns follow)."""
    replaced: list[Message]
    """The messages replaced, whole (their tool results keep their `details`)."""
    replacement: list[Message]
    """What stands in their place: stubbed results, or the summary."""
    messages: list[Message]
    """The whole transcript after."""
    stubbed: int = 0
    """Tool results replaced by stubs."""
    summarized: int = 0
    """Messages folded into the summary."""
    summary: str | None = None
    """The model's summary, if one was written."""
    tokens_before: int = 0
    """The transcript's size before (tokens, measured or estimated)."""
    tokens_after: int = 0
    """Its estimated size after."""
    reason: str = "auto"
    """auto (the window was filling), manual, or context_length (a provider refused the prompt)."""
    seconds: float = 0.0
    """Time spent compacting, the summary request included."""
    usage: Usage | None = None
    """Tokens of the summary requests."""
    responses: list[AssistantMessage] = field(default_factory=list)
    """The summary requests' responses (priced like any response)."""
    kind: str = "compaction"

    def __str__(self) -> str:
        what = []
        if self.stubbed:
            what.append(f"{self.stubbed} old tool result{'s' if self.stubbed != 1 else ''} stubbed")
        if self.summarized:
            what.append(f"{self.summarized} message{'s' if self.summarized != 1 else ''} summarised")
        gain = "" if self.tokens_after < self.tokens_before else (
            " (the conversation was already short: its summary saves nothing)")
        return (f"compacted ({self.reason}): {', '.join(what) or 'nothing'}; "
                f"{self.tokens_before:,} -> {self.tokens_after:,} tokens{gain}")


def is_summary(message: Message) -> bool:
    return isinstance(message, UserMessage) and message.text.startswith(SUMMARY_PREFIX)


def _one_line(text: str, limit: int) -> str:
    # only the head is looked at (a result may be megabytes): whitespace past twice the limit is never collapsed
    return short_line(text[: limit * 2], limit)


def default_locate(message: ToolResultMessage) -> str:
    return (f"The whole result is kept outside the conversation: `run.calls[i].details` for call id "
            f"{message.tool_call_id} on the run that made it; call {message.name} again if you need it.")


def stub_text(message: ToolResultMessage, locate: Callable[[ToolResultMessage], str | None] | None = None) -> str:
    """The line that stands for a tool result removed from the transcript."""
    text = message.text
    images = sum(1 for b in message.content if not isinstance(b, TextBlock))
    size = f"{len(text):,} characters" + (f" and {images} image{'s' if images != 1 else ''}" if images else "")
    where = (locate(message) if locate is not None else None) or default_locate(message)
    error = " (an error)" if message.is_error else ""
    return screen(f"{STUB_PREFIX} The result of {message.name}{error} ({size}) was removed to save context. "
                  f"It began: {_one_line(text, 120)!r}. {where}")


def _stub(message: ToolResultMessage, locate: Any) -> ToolResultMessage:
    return ToolResultMessage(message.tool_call_id, message.name, [TextBlock(stub_text(message, locate))],
                             message.is_error, result=message.result)


def _boundaries(messages: Sequence[Message]) -> list[int]:
    """Indices where a cut keeps every call with its results: before a user or an assistant message."""
    return [i for i, m in enumerate(messages) if not isinstance(m, ToolResultMessage)]


def transcript_text(messages: Sequence[Message], *, limit: int = 2_000) -> str:
    """A transcript as plain text, each item cut at `limit` characters (what a summary is written from)."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(f"USER: {m.text[:limit * 4]}")
        elif isinstance(m, AssistantMessage):
            if m.text:
                out.append(f"ASSISTANT: {m.text[:limit * 2]}")
            for c in m.tool_calls:
                args = c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments, default=str)
                out.append(f"ASSISTANT CALLS {c.name} (id {c.id}): {args[:limit]}")
        else:
            text = m.text
            cut = f" … [{len(text) - limit:,} more characters]" if len(text) > limit else ""
            out.append(f"RESULT of {m.name} (id {m.tool_call_id}{', error' if m.is_error else ''}): "
                       f"{text[:limit]}{cut}")
    return screen("\n\n".join(out))  # what a summary is written from, and sent to a model, passes the gate


class TranscriptDigest:
    """The summariser of a model that cannot write summaries (a `ScriptedModel` of plain responses): an
    extract of the transcript, each turn's first words, made offline and free, in place of a model's prose."""

    name = "digest"
    provider = "nbagent"

    async def request(self, messages: Sequence[Message], tools: Any = (), **_: Any) -> AssistantMessage:
        text = messages[-1].text if messages else ""
        body = text.split("<transcript>", 1)[-1].rsplit("</transcript>", 1)[0]
        lines = [_one_line(part, 160) for part in body.split("\n\n") if part.strip()]
        digest = "\n".join(f"- {line}" for line in lines[-40:])
        return AssistantMessage(text=f"Digest of the earlier turns (no model wrote it):\n{digest}", model=self.name,
                                provider=self.provider)


async def compact(
    messages: Sequence[Message],
    model: Any,
    *,
    window: int,
    settings: CompactionSettings | None = None,
    reason: str = "manual",
    force: bool = False,
    tokens: int | None = None,
    extra: int = 0,
    on_request: Callable[[Any], None] | None = None,
) -> Compaction | None:
    """Compact `messages` to fit `settings.target` of `window` (see the module docstring).

    `tokens` is the transcript's measured size (default: estimated); `extra` the instructions' and tools'
    share of every request. `force` summarises the older turns even when stubs would do (a compaction by
    hand). None when there is nothing older than the last turn to compact.
    """
    settings = settings or CompactionSettings()
    t0 = time.perf_counter()
    messages = list(messages)
    sizes = [estimate_message(m) for m in messages]
    before = tokens if tokens is not None else sum(sizes) + extra
    bounds = _boundaries(messages)
    if len(bounds) < 2:
        return None
    # The recent turns kept verbatim: the longest suffix from a boundary within keep_recent of the window.
    keep = settings.keep_recent * window
    cut = bounds[-1]
    suffix = sum(sizes[cut:])
    for b in reversed(bounds[:-1]):
        size = sum(sizes[b:cut])
        if suffix + size > keep:
            break
        suffix += size
        cut = b
    if cut == 0:
        # Everything fits in the recent share: only stubs could help, and only when forced.
        if not force:
            return None
        cut = bounds[-1]
    head = messages[:cut]
    tail = messages[cut:]
    target = settings.target * window

    # 1. Stubs for the older tool results.
    stubbed_head: list[Message] = []
    stubbed = 0
    first_changed: int | None = None
    for i, m in enumerate(head):
        if isinstance(m, ToolResultMessage) and not m.text.startswith(STUB_PREFIX) and (
                len(m.text) > settings.stub_chars or any(not isinstance(b, TextBlock) for b in m.content)):
            stubbed_head.append(_stub(m, settings.locate))
            stubbed += 1
            if first_changed is None:
                first_changed = i
        else:
            stubbed_head.append(m)
    head_tokens = estimate_tokens(stubbed_head)
    tail_tokens = sum(sizes[cut:])
    fits = head_tokens + tail_tokens + extra <= target and head_tokens <= settings.stub_share * window
    summarizer = settings.summarizer or (model if getattr(model, "writes_summaries", True) else TranscriptDigest())

    def stubs_only(note: str = "") -> Compaction | None:
        if first_changed is None:
            return None
        return Compaction(first_changed, cut, messages[first_changed:cut], stubbed_head[first_changed:],
                          stubbed_head + tail, stubbed=stubbed, tokens_before=before,
                          tokens_after=head_tokens + tail_tokens + extra, reason=reason + note,
                          seconds=time.perf_counter() - t0)

    if (fits and not force) or not settings.summarize or summarizer is None:
        return stubs_only()

    # 2. A summary of the older turns (written from the stubbed form, in pieces if it is too long).
    if len(head) < 2 and (not head or is_summary(head[0]) or isinstance(head[0], UserMessage)):
        return None  # one message summarised into one message: nothing gained
    text = transcript_text(stubbed_head)
    piece = max(4_000, int(window * 0.5 * 4))
    summary = ""
    responses: list[AssistantMessage] = []
    usage: Usage | None = None
    for start in range(0, len(text), piece):
        chunk = text[start:start + piece]
        prompt = f"{SUMMARY_REQUEST}\n\n<transcript>\n{summary and 'EARLIER SUMMARY: ' + summary + chr(10) * 2}{chunk}\n</transcript>"
        try:
            response = await summarizer.request([UserMessage(prompt)], (), instructions=SUMMARY_INSTRUCTIONS,
                                                on_request=on_request)
        except ModelError as exc:
            # No summary this time (a rate limit, an outage): the stubs still help, and the run goes on.
            log.warning("compaction: the summary request failed (%s); old tool results were stubbed only", exc)
            return stubs_only(f" (no summary: {type(exc).__name__})")
        responses.append(response)
        usage = (usage or Usage()) + response.usage if response.usage is not None else usage
        summary = response.text.strip() or summary
    summary_message = UserMessage(f"{SUMMARY_PREFIX}\n\n{summary or '(the model wrote no summary)'}")
    result = [summary_message, *tail]
    after = estimate_message(summary_message) + tail_tokens + extra
    return Compaction(0, cut, messages[:cut], [summary_message], result, stubbed=0, summarized=cut,
                      summary=summary, tokens_before=before, tokens_after=after, reason=reason,
                      seconds=time.perf_counter() - t0, usage=usage, responses=responses)


def compaction_settings(value: Any) -> CompactionSettings | None:
    """`Agent(compaction=...)`: True (the defaults), False/None (never), a threshold, or `CompactionSettings`."""
    if value is False or value is None:
        return None
    if value is True:
        return CompactionSettings()
    if isinstance(value, CompactionSettings):
        return value
    if isinstance(value, (int, float)) and 0 < value <= 1:
        return CompactionSettings(threshold=float(value), target=min(0.5, float(value)))
    raise ValueError(f"compaction is True, False, a threshold between 0 and 1, or CompactionSettings; not {value!r}")
