"""What a run may spend: money (`pricing`), the context window (`window`, and `compaction` when it fills), and
the provider's request and token rates (`ratelimit`).

The rule: this wing imports only the vocabulary at the top of nbagent (messages, errors...) and `safety`.
"""

from __future__ import annotations

from .compaction import Compaction, CompactionSettings, compact, compaction_settings
from .pricing import Spend, format_cost, price_known, request_cost
from .ratelimit import Limiter, RateLimit
from .window import context_window, estimate_tokens, measure

__all__ = [
    "Compaction",
    "CompactionSettings",
    "Limiter",
    "RateLimit",
    "Spend",
    "compact",
    "compaction_settings",
    "context_window",
    "estimate_tokens",
    "format_cost",
    "measure",
    "price_known",
    "request_cost",
]
