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


# -- a raw JSON Schema as the output type; strict submission; a run's own tool catalogue -----------------
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                   "nick": {"type": "string"}},
    "required": ["name", "age"],
}


def test_a_json_schema_dict_is_an_output_type():
    model = ScriptedModel([calls(call("submit_result", name="Ada", age=-1)),
                           calls(call("submit_result", name="Ada", age=36))])
    r = Agent(model=model, output_type=PERSON).run_sync("x")
    first, second = r.calls
    assert first.status == "invalid_arguments" and "minimum" in first.result.text
    assert r.status == "done" and r.output == {"name": "Ada", "age": 36}
    assert model.requests[0]._tools[0].parameters == PERSON  # sent unchanged
    assert_valid(r)


def test_a_non_object_json_schema_is_wrapped():
    model = ScriptedModel([calls(call("submit_result", result=["a", "b"]))])
    r = Agent(model=model, output_type={"type": "array", "items": {"type": "string"}}).run_sync("x")
    assert r.output == ["a", "b"]


def test_a_bad_output_schema_is_a_clear_configuration_error():
    from nbagent import ConfigurationError

    with pytest.raises(ConfigurationError, match="output_type"):
        Agent(model=ScriptedModel([]), output_type={"type": "object", "properties": {"a": {"type": 5}}})
    with pytest.raises(ConfigurationError, match="output_type"):
        Agent(model=ScriptedModel([]), output_type=object())


def test_the_submit_tool_is_strict_on_the_wire():
    from nbagent.providers.openai import OpenAIChatModel
    from nbagent.providers.openai_responses import OpenAIResponsesModel
    from nbagent.tools.structured import make_submit_tool

    submit = make_submit_tool(Answer)
    assert submit.strict is True
    from nbagent import UserMessage

    for model in (OpenAIChatModel("gpt-4.1", api_key="sk-test-0123456789abcdef"),
                  OpenAIResponsesModel("gpt-4.1", api_key="sk-test-0123456789abcdef")):
        body = model.build_request([UserMessage("x")], [submit])[0]
        spec = body["tools"][0]
        fn = spec.get("function", spec)
        assert fn["strict"] is True
        assert fn["parameters"]["additionalProperties"] is False
        assert sorted(fn["parameters"]["required"]) == ["city", "population"]


def test_strict_nulls_for_optional_fields_are_dropped_before_validation():
    class Report(pydantic.BaseModel):
        title: str
        pages: int = 1

    model = ScriptedModel([calls(call("submit_result", title="t", pages=None))])
    r = Agent(model=model, output_type=Report).run_sync("x")
    assert r.status == "done" and r.output == Report(title="t", pages=1)
    model = ScriptedModel([calls(call("submit_result", name="Ada", age=3, nick=None))])
    assert Agent(model=model, output_type=PERSON).run_sync("x").output == {"name": "Ada", "age": 3}


def test_a_structured_run_has_its_own_tool_catalogue():
    from nbagent import tool

    @tool(read_only=True)
    def lookup(city: str) -> int:
        return 2100000

    @tool(read_only=True)
    def chat(text: str) -> str:
        return text

    model = ScriptedModel([calls(call("lookup", city="Paris")),
                           calls(call("submit_result", city="Paris", population=2100000)), "plain answer"])
    agent = Agent(model=model, tools=[chat])
    r = agent.run_sync("x", output_type=Answer, tools=[lookup])
    assert model.requests[0].tools == ("lookup", "submit_result")
    assert r.output == Answer(city="Paris", population=2100000)
    plain = agent.run_sync("y")
    assert model.requests[2].tools == ("chat",) and plain.output == "plain answer"
