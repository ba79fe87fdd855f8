"""Keys on a cluster: a key given in code reaches each runner once, sealed to it, over the batch's own queues.

    secrets = model_secrets(model)          # this side: what the model holds that never goes in a pickle
    shipped = strip_secrets(copy)           # the copy that travels (scattered) holds none of it
    pair = KeyPair()                        # the runner, when it starts: its hello carries pair.public
    sealed = seal(pair.public, secrets, context)     # this side, on the hello: put in the runner's own queue
    secrets = pair.open(sealed, context)    # the runner: then `give_keys(agent, secrets)`

How a key travels: it does not go in the agent's pickle, a task's arguments, the scheduler's task graph, a
log or the dashboard. When the person's model holds a key given in code (`api_key=...`, or a credential
header such as `api-key:`), each runner (one per worker, a new one when a worker dies) makes a key pair
when it starts (X25519) and says hello with its public half; this side seals the model's secrets to that
half (an ephemeral X25519 exchange, HKDF-SHA256, ChaCha20-Poly1305, bound to the batch and the runner's life)
and puts the sealed bytes in the runner's own queue, before any item. The scheduler holds only sealed bytes,
for as long as the queue holds them. The runner opens them, registers each value as a secret (so the
worker's redaction removes it from every error, log line and record, as this process's does) and gives them
to its own copy of the model, which holds the key as this process holds it (a `Secret`, never pickled).

A key the person did not give in code is not shipped: a worker reads it from its own environment
(`OPENAI_API_KEY` and the like), where a LocalCluster's workers inherit this process's when they start. A
worker with neither fails the whole batch at its start, with one message naming the variable and the worker
(`missing_key_message`), instead of every item failing on its own.

Reads: a runner's hello (its public key) and, on the worker, the sealed bytes in its queue. Who could have
written them: anyone who can reach the cluster's scheduler. What stops harm: the sealed bytes open only with
the runner's private key, which never leaves its process, and only for this batch and this life (a sealed
message copied to another runner does not open); a forged hello could ask for the key sealed to a key pair
of its own, but whoever can write to the scheduler can already run any code on the workers, where the key
is in memory (Dask has no authority inside a cluster): the seal keeps the key out of what the cluster
stores, logs and shows, not from the cluster's own code.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from ..errors import ConfigurationError
from ..providers._keys import Secret, credential_header
from ..safety import secrets as _secrets

__all__ = ["KeyPair", "check_no_secret", "give_keys", "has_key", "missing_key_message", "model_secrets", "seal",
           "strip_secrets"]

_INFO = b"nbagent cluster keys v1"


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError:  # pragma: no cover - the dask extra installs it
        raise ConfigurationError("a key given in code travels to a cluster's workers sealed, which needs the "
                                 "cryptography package: pip install 'nbagent[dask]'") from None
    return hashes, serialization, X25519PrivateKey, X25519PublicKey, ChaCha20Poly1305, HKDF


def _key(shared: bytes, context: bytes) -> bytes:
    hashes, _, _, _, _, HKDF = _crypto()
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO + b"|" + context).derive(shared)


def _raw(public: Any) -> bytes:
    _, serialization, *_ = _crypto()
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class KeyPair:
    """A runner's key pair, made when it starts: `public` goes in its hello; the private half never leaves."""

    __slots__ = ("_private", "public")

    def __init__(self) -> None:
        _, _, X25519PrivateKey, *_ = _crypto()
        self._private = X25519PrivateKey.generate()
        self.public = _raw(self._private.public_key())

    def __reduce__(self) -> Any:
        raise TypeError("a runner's key pair is not picklable")

    def open(self, sealed: bytes, context: bytes) -> dict[str, Any]:
        """The secrets sealed to this pair for `context` (a ValueError when they were not, or were changed)."""
        _, _, _, X25519PublicKey, ChaCha20Poly1305, _ = _crypto()
        if not isinstance(sealed, bytes) or len(sealed) < 32 + 12 + 16:
            raise ValueError("the sealed keys are not in the expected form")
        sender, nonce, body = sealed[:32], sealed[32:44], sealed[44:]
        try:
            shared = self._private.exchange(X25519PublicKey.from_public_bytes(sender))
            plain = ChaCha20Poly1305(_key(shared, context)).decrypt(nonce, body, context)
        except Exception:
            raise ValueError("the sealed keys did not open: not sealed to this runner, or changed on the way") from None
        data = json.loads(plain)
        if not isinstance(data, dict):
            raise ValueError("the sealed keys are not in the expected form")
        return data


def seal(public: Any, secrets: dict[str, Any], context: bytes) -> bytes:
    """`secrets` sealed to the runner whose hello carried `public`, for `context` (the batch and the life)."""
    _, _, X25519PrivateKey, X25519PublicKey, ChaCha20Poly1305, _ = _crypto()
    if not isinstance(public, bytes) or len(public) != 32:
        raise ValueError("a runner's public key is 32 bytes")
    mine = X25519PrivateKey.generate()
    shared = mine.exchange(X25519PublicKey.from_public_bytes(public))
    nonce = os.urandom(12)
    body = ChaCha20Poly1305(_key(shared, context)).encrypt(nonce, json.dumps(secrets).encode(), context)
    return _raw(mine.public_key()) + nonce + body


def check_no_secret(blob: bytes) -> None:
    """The bytes that travel hold no secret this process knows (an environment key, a key given in code, a
    credential header): one check of content, whatever in the agent holds it."""
    for value, name in _secrets.secret_values().items():
        if value.encode("utf-8") in blob:
            raise ConfigurationError(
                f"the agent would carry a secret to the cluster in its pickle (the value of {name}): something it "
                "holds (a tool's closure, its instructions, a setting) has it. Give the workers their keys through "
                "their environment, or to the model as api_key=... (sent to each worker sealed, never pickled)")


def model_secrets(model: Any) -> dict[str, Any]:
    """What the person's model holds that is a secret and never goes in a pickle: the key given in code
    (`api_key=`) and the values of its credential headers. Empty when there is none (its key, if it needs one,
    is then the workers' environment's)."""
    out: dict[str, Any] = {}
    key = getattr(model, "_api_key", None)
    if isinstance(key, Secret) and key:
        out["api_key"] = key.value
    headers = {k: v for k, v in (getattr(model, "extra_headers", None) or {}).items()
               if credential_header(k) and isinstance(v, str)}
    if headers:
        out["headers"] = headers
    return out


def strip_secrets(model: Any) -> Any:
    """A copy of `model` without what `model_secrets` returns (the copy that travels)."""
    model = copy.copy(model)
    if hasattr(model, "_api_key"):
        model._api_key = None
    if getattr(model, "extra_headers", None):
        model.extra_headers = {k: v for k, v in model.extra_headers.items() if not credential_header(k)}
    return model


def give_keys(agent: Any, secrets: dict[str, Any]) -> Any:
    """On the worker: a copy of `agent` whose model holds `secrets` (each registered as a secret here), with an
    HTTP layer of its own that sends them."""
    key = secrets.get("api_key")
    headers = secrets.get("headers") or {}
    if not (key is None or isinstance(key, str)) or not isinstance(headers, dict):
        raise ValueError("the sealed keys are not in the expected form")
    agent = copy.copy(agent)
    model = copy.copy(agent.model)
    if isinstance(key, str) and key:
        _secrets.add_secret(key, (getattr(model, "key_env", ()) or ("api_key",))[0])
        model._api_key = Secret(key)
    if headers:
        model.extra_headers = dict(getattr(model, "extra_headers", {}) or {})
        for name, value in headers.items():
            if isinstance(name, str) and isinstance(value, str):
                _secrets.add_secret(value.split()[-1] if value.split() else value, name)
                model.extra_headers[name] = value
    http = getattr(model, "http", None)
    if http is not None:
        http = copy.copy(http)
        http._client, http._client_loop = None, None
        http._headers, http._secrets = model._request_headers, model._secret_values  # this copy's, with its key
        model.http = http
    agent.model = model
    return agent


def has_key(model: Any) -> tuple[bool, str | None]:
    """On the worker: whether `model` can send its requests (a key given, or in this environment, or none
    needed), and what is wrong when it cannot (a key in the environment that is not valid)."""
    if not getattr(model, "key_required", False) or not hasattr(model, "api_key"):
        return True, None
    try:
        return model.api_key() is not None, None
    except Exception as exc:  # a key in the environment that is not valid: the message names its variable
        return False, _secrets.redact(str(exc))


def missing_key_message(model: Any, worker: str, problem: str | None = None) -> str:
    """The one message of a batch whose worker has no key for the model."""
    provider = getattr(model, "provider", "the model")
    names = " or ".join(getattr(model, "key_env", ()) or ()) or "the provider's key variable"
    if problem:
        return f"worker {worker}: {problem}; no item was run"
    return (f"no API key for {provider} on worker {worker}: set {names} in the workers' environment, or pass "
            f"api_key=... to the model (a key given in code travels to each worker sealed); no item was run")
