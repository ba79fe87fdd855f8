"""Valid after any interruption: 200 runs stopped at random points, each transcript checked against every
provider's structural rules (tests/wire_rules.py).

Where a run is interrupted: inside a tool, between the calls of a sequential batch, while the model's
response streams, while an approval waits, by a model error (as after retries run out), by
`run.cancel()`, by cancelling the run's task (the Stop button, an interrupted cell), and by a kernel
killed mid-write: the session file cut at a random byte, then resumed and continued. The conversations
carry what providers need back (Anthropic signed thinking, Gemini thought signatures, Responses
encrypted reasoning), and calls are made in parallel and in sequence.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, load_model, tool
from nbagent.errors import ModelError
from nbagent.messages import Reasoning, UserMessage
from nbagent.sessions import _ends
from nbagent.transcript import check_transcript

from tests.wire_rules import problems

WIRE_MODELS = {p: load_model(spec, api_key="test-key") for p, spec in {
    "anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4.1", "openai-responses": "openai-responses:gpt-5",
    "google": "google:gemini-2.5-flash", "mistral": "mistral:mistral-large-latest"}.items()}
KINDS = ["tool", "between_calls", "stream", "approval", "model_error", "cancel", "task_cancel", "killed"]
SEEDS = range(200)


@tool(read_only=True)
async def slow(seconds: float) -> str:
    """Wait a little."""
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


@tool(read_only=True, execution_mode="sequential")
def step(n: int) -> str:
    """One step of a sequence."""
    return f"step {n}"


@tool(destructive=True)
def change(what: str) -> str:
    """Change something (asks first)."""
    return f"changed {what}"


def _response(rng: random.Random, turn: int) -> AssistantMessage:
    kind = rng.choice(["slow", "steps", "change", "mixed"])
    if kind == "slow":
        calls = [ToolCall(name="slow", arguments={"seconds": rng.choice([0.0, 0.01, 0.05])}) for _ in range(rng.randint(1, 3))]
    elif kind == "steps":
        calls = [ToolCall(name="step", arguments={"n": k}) for k in range(rng.randint(2, 4))]
    elif kind == "change":
        calls = [ToolCall(name="change", arguments={"what": f"t{turn}"})]
    else:
        calls = [ToolCall(name="slow", arguments={"seconds": 0.01}), ToolCall(name="change", arguments={"what": "x"}),
                 ToolCall(name="nope", arguments={})]  # an unknown tool among them
    # what each provider needs sent back, on the messages that provider made
    provider = rng.choice([None, "anthropic", "google", "openai-responses"])
    reasoning = []
    if provider == "anthropic":
        reasoning.append(Reasoning(text="thinking", signature=f"sig{turn}", provider="anthropic"))
    elif provider == "openai-responses":
        reasoning.append(Reasoning(encrypted=f"enc{turn}", id=f"rs_{turn}", provider="openai-responses"))
    elif provider == "google":
        calls[0].provider_data = {"thoughtSignature": f"gsig{turn}"}
    return AssistantMessage(text=rng.choice(["", "Let me look."]), tool_calls=calls, reasoning=reasoning,
                            provider=provider)


def _script(rng: random.Random, turns: int) -> list:
    return [_response(rng, t) for t in range(turns)] + ["Done."]


def _check(messages: list, where: str) -> None:
    assert check_transcript(messages) == [], where
    for provider, model in WIRE_MODELS.items():
        found = problems(provider, model.to_wire(messages), messages)
        assert found == [], f"{where}: {provider}: {found}"


async def _interrupt(run, rng: random.Random, kind: str, gate: asyncio.Event | None) -> None:
    if kind in ("approval",) and gate is not None:
        await asyncio.wait_for(gate.wait(), 5)
    else:
        await asyncio.sleep(rng.choice([0, 0.001, 0.005, 0.01, 0.02, 0.05]))
    if kind == "task_cancel":
        task = getattr(run, "_task", None) or getattr(run, "task", None)
        if task is not None:
            task.cancel()
            return
    run.cancel()


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_run_interrupted_at_a_random_point_leaves_a_valid_transcript(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    turns = rng.randint(1, 4)
    script = _script(rng, turns)
    gate = asyncio.Event() if kind == "approval" else None

    async def approver(request):
        if gate is not None:
            gate.set()
            await asyncio.sleep(30)  # a person who does not answer
        return rng.random() < 0.7

    if kind == "model_error":
        at = rng.randint(0, turns)

        def fail(messages):
            raise ModelError("the provider kept failing (retries ran out)")

        script = script[:at] + [fail]
    model = ScriptedModel(script, delay=0.002 if kind == "stream" else 0)
    history = [UserMessage("earlier"), AssistantMessage(text="earlier answer")] if rng.random() < 0.5 else None
    agent = Agent(model=model, tools=[slow, step, change], approver=approver, workspace=tmp_path,
                  session=kind == "killed", max_turns=turns + 2)
    run = agent.start("go", history=history) if kind != "killed" else agent.start("go")
    if kind not in ("model_error", "killed"):
        interrupter = asyncio.ensure_future(_interrupt(run, rng, kind, gate))
    try:
        await run
    except BaseException:  # a failed or cancelled run raises when awaited
        pass
    if kind not in ("model_error", "killed"):
        interrupter.cancel()
    _check(run.messages, f"seed {seed} ({kind}, status {run.status})")

    if kind == "killed":
        # the kernel died while writing: cut the session file at a random byte, resume, continue
        path = tmp_path / ".nbagent" / "sessions" / f"{agent.session_id}.jsonl"
        data = path.read_bytes()
        header_end = data.index(b"\n") + 1
        path.write_bytes(data[: rng.randint(header_end, len(data))])
        _ends.forget(path)  # (a kernel that died during its run never closed the file: no end recorded)
        with _quiet():
            later = Agent(model=ScriptedModel(["resumed"]), tools=[slow, step, change], workspace=tmp_path)
            later.resume(agent.session_id)
        if later.conversation:  # a cut before the first whole message leaves nothing to check (and nothing to send)
            _check(later.conversation, f"seed {seed} (killed, resumed)")
        again = await later.run("and now?")
        assert again.status == "done"
        _check(again.messages, f"seed {seed} (killed, resumed, continued)")


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)
