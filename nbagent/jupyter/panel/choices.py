"""The models the panel's picker offers: what `%agent --model` and `%config NBAgent.model` accept.

- models defined in the kernel (a `ScriptedModel`, an `OpenAIChatModel` pointed at a local server), by the
  name of their variable, first;
- then, for each provider whose key is set in the kernel's environment or stored with the panel's Settings
  (`nbagent.safety.keys`), the models the price table knows (`budget.pricing.priced_models`) as `provider:model`.

This only asks whether a key is set, and nothing of a key reaches the page. A model the list does not hold can still be typed.
"""

from __future__ import annotations

from typing import Any, Mapping

from nbagent.budget.pricing import priced_models
from nbagent.providers.base import Model

from ..config import KEY_VARIABLES

__all__ = ["MAX_CHOICES", "model_choices"]

MAX_CHOICES = 300


def model_choices(namespace: Mapping[str, Any], environ: Mapping[str, str], hidden: Any = (),
                  stored: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """[{"spec": what to pass as the model, "label": how the picker shows it}], at most `MAX_CHOICES`."""
    out: list[dict[str, str]] = []
    for name, value in list(namespace.items()):
        if isinstance(value, Model) and not name.startswith("_") and name not in hidden:
            out.append({"spec": name, "label": f"{name}: {value.spec}, defined in this kernel"})
    for provider, keys in KEY_VARIABLES:
        if any(environ.get(key) or (stored or {}).get(key) for key in keys):
            out.extend({"spec": f"{provider}:{m}", "label": f"{provider}:{m}"} for m in priced_models(provider))
    return out[:MAX_CHOICES]
