"""What tokens cost, and what a run and a conversation have spent.

    request_cost(usage, "claude-sonnet-4-5", "anthropic")   # 0.0039975 (US dollars), or None: price unknown
    spend = Spend(); spend.add(message)                     # usage and cost summed, response by response

Prices come from the `genai-prices` table (pydantic's maintained list of providers' prices, with tiers and
cache prices), imported on first use only: it takes about 0.15 s, and `import nbagent` stays fast. A model
the table does not know has no price: a `Spend` that holds such a response says "price unknown" rather than
a wrong number. Each response is priced on its own (prices with tiers depend on one request's size).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

from ..messages import AssistantMessage, Usage

__all__ = ["Spend", "format_cost", "price_known", "priced_models", "request_cost"]

log = logging.getLogger("nbagent.pricing")

PROVIDER_IDS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "google": "google",
    "mistral": "mistral",
}
"""nbagent's provider names -> the price table's. Others (ollama, scripted, replay) have no price."""


@functools.lru_cache(maxsize=256)
def _lookup(model: str, provider: str) -> bool:
    """Whether the table has a price for `model` at `provider` (cached: an unknown model is looked up once)."""
    provider_id = PROVIDER_IDS.get(provider)
    if provider_id is None or not model:
        return False
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:  # pragma: no cover - a dependency; a broken install says "price unknown"
        log.warning("genai-prices is not installed: costs are shown as unknown")
        return False
    try:
        calc_price(PriceUsage(input_tokens=1, output_tokens=1), model, provider_id=provider_id)
    except LookupError:
        return False
    return True


@functools.lru_cache(maxsize=16)
def priced_models(provider: str) -> tuple[str, ...]:
    """The models the price table knows at `provider` (nbagent's name), to choose from; () for a provider it
    does not price (ollama, scripted...) or without the table."""
    provider_id = PROVIDER_IDS.get(provider)
    if provider_id is None:
        return ()
    try:
        from genai_prices import data
    except ImportError:  # pragma: no cover - a dependency; a broken install offers no choices
        return ()
    for known in data.providers:
        if known.id == provider_id:
            return tuple(sorted({m.id for m in known.models if isinstance(m.id, str)}))
    return ()


def price_known(model: str | None, provider: str | None) -> bool:
    """Whether responses of `model` at `provider` can be priced."""
    return _lookup(model or "", provider or "")


def request_cost(usage: Usage | None, model: str | None, provider: str | None) -> float | None:
    """The price of one response in US dollars, or None when the table does not know the model."""
    if usage is None or not price_known(model, provider):
        return None
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    priced = PriceUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                        cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens)
    try:
        result = calc_price(priced, model, provider_id=PROVIDER_IDS[provider])  # type: ignore[index,arg-type]
    except (LookupError, ValueError) as exc:
        log.debug("no price for %s:%s (%s)", provider, model, exc)
        return None
    return float(result.total_price)


def format_cost(cost: float | None) -> str:
    """`$0.0123`, `$1.24`, or `price unknown`."""
    if cost is None:
        return "price unknown"
    if cost == 0:
        return "$0"
    if cost < 0.01:
        return f"${cost:.4f}"
    if cost < 1:
        return f"${cost:.3f}"
    return f"${cost:,.2f}"


@dataclass(slots=True)
class Spend:
    """Tokens and money, summed response by response (a run's, or a whole conversation's)."""

    usage: Usage = field(default_factory=Usage)
    """Every response's tokens, summed."""
    priced: float = 0.0
    """The cost of the responses that could be priced, in US dollars."""
    unpriced: int = 0
    """Responses whose model has no price in the table (their cost is unknown)."""
    responses: int = 0
    """Responses counted."""

    @property
    def cost(self) -> float | None:
        """US dollars, or None when some response could not be priced (price unknown)."""
        return None if self.unpriced else self.priced

    def add(self, message: AssistantMessage, *, model: str | None = None, provider: str | None = None) -> float | None:
        """Count one response (priced by its own model and provider, else the ones given); returns its cost."""
        self.responses += 1
        if message.usage is None:
            # No usage reported: its tokens are unknown, and so is its cost (a scripted model's response
            # without usage costs nothing, as no provider was paid).
            if (message.provider or provider) in PROVIDER_IDS:
                self.unpriced += 1
            return None
        self.usage = self.usage + message.usage
        cost = request_cost(message.usage, message.model or model, message.provider or provider)
        if cost is None:
            self.unpriced += 1
        else:
            self.priced += cost
        return cost

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.usage + other.usage, self.priced + other.priced, self.unpriced + other.unpriced,
                     self.responses + other.responses)

    def copy(self) -> Spend:
        return Spend(self.usage + Usage(), self.priced, self.unpriced, self.responses)

    def as_dict(self) -> dict[str, Any]:
        """For records and the session store."""
        return {**self.usage.as_dict(), "cost": self.cost, "responses": self.responses}

    def __str__(self) -> str:
        u = self.usage
        parts = [f"{u.input_tokens:,} in", f"{u.output_tokens:,} out"]
        if u.cache_read_tokens or u.cache_write_tokens:
            parts.append(f"{u.cache_read_tokens:,} cached")
        if u.reasoning_tokens:
            parts.append(f"{u.reasoning_tokens:,} reasoning")
        return f"{' · '.join(parts)} tokens, {format_cost(self.cost)}"
