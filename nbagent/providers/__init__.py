"""Models: the `Model` protocol, `ScriptedModel`, and `load_model("provider:model")`.

| spec prefix         | protocol                          | key / base URL from the environment                  |
|---------------------|-----------------------------------|------------------------------------------------------|
| `anthropic:`        | Anthropic Messages                | ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL (without /v1)   |
| `openai:`           | OpenAI Chat Completions           | OPENAI_API_KEY, OPENAI_BASE_URL (with /v1)            |
| `openai-responses:` | OpenAI Responses                  | the same as `openai:`                                 |
| `google:`           | Gemini API (streamGenerateContent)| GEMINI_API_KEY or GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL |
| `mistral:`          | Mistral chat completions          | MISTRAL_API_KEY, MISTRAL_BASE_URL                     |
| `ollama:`           | OpenAI-compatible (local)         | OLLAMA_BASE_URL (default http://localhost:11434/v1), OLLAMA_API_KEY (optional) |
| `scripted`          | offline `ScriptedModel`           | none                                                  |
| `replay:ID`         | a stored session, offline (`ReplayModel`) | none (`workspace=` option: where the store is) |

A variable the environment does not set is looked up in the keys the person stored with the panel's Settings
(`nbagent.safety.keys`: a file outside every workspace); the environment wins.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ConfigurationError
from .base import Model
from .scripted import ScriptedModel

__all__ = ["PROVIDERS", "Model", "ScriptedModel", "load_model"]

PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic": ("nbagent.providers.anthropic", "AnthropicModel"),
    "openai": ("nbagent.providers.openai", "OpenAIChatModel"),
    "openai-responses": ("nbagent.providers.openai_responses", "OpenAIResponsesModel"),
    "google": ("nbagent.providers.google", "GeminiModel"),
    "mistral": ("nbagent.providers.mistral", "MistralModel"),
    "ollama": ("nbagent.providers.openai", "OllamaModel"),
}
"""Spec prefix -> (module, class). Modules are imported only when a model of theirs is loaded."""


def load_model(spec: str | Model, *, base_url: str | None = None, api_key: str | None = None, **options: Any) -> Model:
    """A model from a spec like `"anthropic:claude-sonnet-4-5"` (a `Model` is returned as is).

    `base_url` and `api_key` override the environment; other options go to the model's constructor.
    """
    if isinstance(spec, Model):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"a model spec is a string like 'openai:gpt-4.1', not {spec!r}")
    spec = spec.strip()
    if spec == "scripted" or spec.startswith("scripted:"):
        return ScriptedModel(name=spec.partition(":")[2] or "scripted", **options)
    if spec == "replay" or spec.startswith("replay:"):  # a stored session's responses (None: the latest)
        from .replay import ReplayModel

        return ReplayModel(spec.partition(":")[2] or None, **options)
    prefix, sep, name = spec.partition(":")
    if not sep or not name:
        raise ConfigurationError(
            f"model spec {spec!r} needs a provider prefix: one of {', '.join(p + ':' for p in PROVIDERS)} or 'scripted'"
        )
    if prefix not in PROVIDERS:
        raise ConfigurationError(f"unknown provider {prefix!r} in {spec!r}; known: {', '.join(PROVIDERS)}, scripted")
    module_name, class_name = PROVIDERS[prefix]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigurationError(f"provider {prefix!r} is not available in this build of nbagent") from None
        raise
    cls = getattr(module, class_name)
    return cls(name, base_url=base_url, api_key=api_key, **options)
