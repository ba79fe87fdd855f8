"""Structured task results through submit_result."""

from __future__ import annotations

import pydantic
import pytest

from nbagent import Agent, OutputError, ScriptedModel
from tests.helpers import assert_valid, call, calls


class Answer(pydantic.BaseModel):
    city: str
    population: int = pydantic.Field(gt=0)

    @pydantic.field_validator("city")
    @classmethod
    def capitalised(cls, value: str) -> str:  # a rule the JSON schema cannot express
        if not value[:1].isupper():
            raise ValueError("city names start with a capital letter")
        return value


def test_accepted_submission_ends_the_run_with_the_typed_value():
    model = ScriptedModel([calls(call("submit_result", city="Paris", population=2100000))])
    r = Agent(model=model, output_type=Answer).run_sync("x")
    assert r.status == "done" and r.output == Answer(city="Paris", population=2100000)
    assert model.requests[0].tools == ("submit_result",)
    assert_valid(r)


def test_rejected_submission_keeps_the_turn_open():
    model = ScriptedModel([
        calls(call("submit_result", city="paris", population=5)),
        calls(call("submit_result", city="Paris", population=-5)),
        calls(call("submit_result", city="Paris", population=5)),
    ])
    r = Agent(model=model, output_type=Answer).run_sync("x")
    first, second, third = r.calls
    assert first.status == "error" and "capital letter" in first.result.text and "rejected" in first.result.text
    assert second.status == "invalid_arguments" and "population" in second.result.text
    assert third.status == "ok" and r.output.population == 5
    assert_valid(r)


def test_text_only_answer_gets_one_reminder_then_fails_clearly():
    model = ScriptedModel(["Paris, about 2 million.", calls(call("submit_result", city="Paris", population=2))])
    r = Agent(model=model, output_type=Answer).run_sync("x")
    assert r.output.city == "Paris"
    assert "submit_result" in r.messages[2].text  # the reminder

    model = ScriptedModel(["Paris.", "Still Paris."])
    with pytest.raises(OutputError, match="even after a reminder"):
        Agent(model=model, output_type=Answer).run_sync("x")


def test_non_model_output_types_are_wrapped():
    model = ScriptedModel([calls(call("submit_result", result=[1, 2, 3]))])
    agent = Agent(model=model, output_type=list[int])
    r = agent.run_sync("x")
    assert r.output == [1, 2, 3]
    schema = r.requests[0].body()["tools"][0]["parameters"]
    assert schema["required"] == ["result"] and schema["properties"]["result"]["type"] == "array"
