"""The panel's Settings: providers with their keys and base URLs, the model, and the `%config NBAgent` choices.

    settings_state(config)            what the page shows (never a key: where it comes from and its last 4 characters)
    set_key(provider, key)            store a provider's key (`nbagent.safety.keys`, a 0600 file outside the workspace)
    remove_key(provider)              forget it
    set_base_url(provider, url)       store (or, with None, forget) where a provider's requests go: a local server
    set_option(config, name, value)   what `%config NBAgent.<name> = value` does, for this kernel

Providers are those `load_model` knows (`nbagent.providers.PROVIDERS`: the five wire formats and `ollama:`, any
local OpenAI-compatible server); a key or base URL is stored under the variable its provider reads, and the
provider reads the environment first, then the stored value. Options are every configurable trait of `NBAgent`,
decided by the trait's kind: a choice, a flag, a number or text is edited in the page; a dict, list or object
(rules, MCP servers, the approver) is named with how to set it with `%config`.

What it reads, who could have written it: the page's requests (the person's, through the Jupyter server's token).
A key is checked as providers check one (`clean_key`), registered with the secret gate before it is stored, and
never sent back nor put into an error; a base URL must be an http(s) URL with a host and nothing else (no
credentials, query or fragment).
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from IPython.core.error import UsageError
from traitlets import Bool, Enum, Float, Int, TraitError, Unicode

from nbagent.budget.pricing import priced_models
from nbagent.errors import AuthenticationError
from nbagent.providers import PROVIDERS
from nbagent.providers._keys import clean_key
from nbagent.safety import keys, redact

__all__ = ["check_base_url", "remove_key", "set_base_url", "set_key", "set_option", "settings_state"]

LABELS = {
    "anthropic": "Anthropic (Messages API)",
    "openai": "OpenAI (Chat Completions)",
    "openai-responses": "OpenAI (Responses API)",
    "google": "Google Gemini",
    "mistral": "Mistral",
    "ollama": "Local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio)",
}
"""How the page names each provider (a provider not named here shows its spec prefix)."""
MAX_TEXT = 2000


def _model_class(provider: str) -> Any:
    if provider not in PROVIDERS:
        raise UsageError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    module, name = PROVIDERS[provider]
    return getattr(importlib.import_module(module), name)


def _source(name: str | None, stored: dict[str, str]) -> tuple[str | None, str | None]:
    """Where a variable's value comes from ("environment", "stored" or None) and the value."""
    import os

    if not name:
        return None, None
    value = os.environ.get(name, "")
    if value.strip():
        return "environment", value.strip()
    if name in stored:
        return "stored", stored[name].strip()
    return None, None


def _provider(provider: str, stored: dict[str, str]) -> dict[str, Any]:
    cls = _model_class(provider)
    key_names = tuple(cls.key_env)
    key_from, key, key_name = None, None, key_names[0] if key_names else None
    for name in key_names:
        key_from, key = _source(name, stored)
        if key_from:
            key_name = name
            break
    url_name = cls.base_url_env[0] if cls.base_url_env else None
    url_from, url = _source(url_name, stored)
    return {
        "id": provider, "label": LABELS.get(provider, provider), "key_variable": key_name,
        "key": {"source": key_from, "ends": key[-4:] if key and len(key) >= 12 else None,
                "required": bool(cls.key_required)},
        "base_url": {"variable": url_name, "value": url, "source": url_from, "default": cls.default_base_url},
        "models": [f"{provider}:{m}" for m in priced_models(provider)],
    }


def _option(config: Any, name: str, trait: Any) -> dict[str, Any]:
    value = getattr(config, name)
    item: dict[str, Any] = {"name": name, "help": str(trait.help or ""), "nullable": bool(trait.allow_none)}
    if isinstance(trait, Enum):
        item.update(kind="choice", choices=[str(v) for v in trait.values], value=None if value is None else str(value))
    elif isinstance(trait, Bool):
        item.update(kind="bool", value=bool(value))
    elif isinstance(trait, (Int, Float)):
        item.update(kind="int" if isinstance(trait, Int) else "float", value=value)
    elif isinstance(trait, Unicode) or (name == "model" and (value is None or isinstance(value, str))):
        item.update(kind="text", value=None if value is None else redact(str(value))[:MAX_TEXT])
    elif name == "model":  # a Model object set with %config: its spec, read-only here
        item.update(kind="other", value=redact(str(getattr(value, "spec", None) or type(value).__name__))[:MAX_TEXT])
    else:
        item.update(kind="other", value=None)
    return item


def settings_state(config: Any) -> dict[str, Any]:
    """What the Settings page shows: providers (no key, only where it comes from and its end), options, the file."""
    stored = keys.stored_values()
    traits = config.traits(config=True)
    options = [_option(config, name, traits[name]) for name in sorted(traits, key=lambda n: (n != "model", n))]
    return {"providers": [_provider(p, stored) for p in PROVIDERS], "options": options, "file": str(keys.keys_path())}


def set_key(provider: str, key: str) -> None:
    cls = _model_class(provider)
    if not cls.key_env:
        raise UsageError(f"{provider} takes no API key")
    name = cls.key_env[0]
    try:
        cleaned = clean_key(key, "the key typed", provider)
    except AuthenticationError as exc:
        raise UsageError(exc.message) from None
    if len(cleaned) < 8:
        raise UsageError("that key is too short to be an API key (fewer than 8 characters); copy it again")
    try:
        keys.store(name, cleaned)
    except (OSError, ValueError) as exc:
        raise UsageError(f"the key could not be stored in {keys.keys_path()}: {type(exc).__name__}") from None


def remove_key(provider: str) -> bool:
    cls = _model_class(provider)
    return any([keys.remove(name) for name in cls.key_env])


def check_base_url(url: str) -> str:
    """The base URL as stored, or a UsageError saying what is wrong with it."""
    text = url.strip()
    if not text:
        raise UsageError("the base URL is empty (Remove forgets a stored one)")
    if len(text) > MAX_TEXT or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise UsageError("a base URL has no spaces or control characters in it")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"that base URL cannot be read: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError("a base URL starts with http:// or https:// (for example http://localhost:8000/v1)")
    if not parts.hostname:
        raise UsageError("a base URL names a host (for example http://localhost:8000/v1)")
    if parts.username is not None or parts.password is not None:
        raise UsageError("a base URL holds no user name or password: store the key in the key field instead")
    if parts.query or parts.fragment:
        raise UsageError("a base URL has no ?query or #fragment: requests add their own path to it")
    del port
    return text.rstrip("/")


def set_base_url(provider: str, url: str | None) -> None:
    cls = _model_class(provider)
    if not cls.base_url_env:
        raise UsageError(f"{provider} takes no base URL")
    name = cls.base_url_env[0]
    if url is None:
        keys.remove(name)
        return
    keys.store(name, check_base_url(url))


def set_option(config: Any, name: str, value: Any) -> None:
    """`%config NBAgent.<name> = value` for this kernel: refused with the trait's own words when it does not fit."""
    traits = config.traits(config=True)
    if name not in traits:
        raise UsageError(f"NBAgent has no setting {name!r}; %config NBAgent lists them")
    kind = _option(config, name, traits[name])["kind"]
    if kind == "other":
        raise UsageError(f"NBAgent.{name} is set with %config NBAgent.{name} = ... in a cell (it is not a single value)")
    if isinstance(value, str) and kind != "text":
        value = value.strip()
    if value == "" and traits[name].allow_none:
        value = None
    if kind in ("int", "float") and isinstance(value, str):
        try:
            value = int(value) if kind == "int" else float(value)
        except ValueError:
            raise UsageError(f"NBAgent.{name} is a {'whole ' if kind == 'int' else ''}number, not {value!r}") from None
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        setattr(config, name, value)
    except TraitError as exc:
        raise UsageError(f"NBAgent.{name}: {redact(str(exc))}") from None
