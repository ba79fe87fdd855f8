"""What keeps the person's secrets, page and machine safe from everything nbagent reads that someone else wrote.

    secrets        credential values known to the process; `redact` finds them whole, in pieces, reversed, encoded
                   (its first looks, which call a text clean only where the full search would find nothing: `_first_look`)
    shapes         what a credential looks like (key prefixes, URLs with passwords, connection strings, DSNs...)
    gate           the one secret gate: what a tool may derive from (screened text), which live values ask first
    hidden         the one source of hidden characters (hidden.json): `visible`, `terminal_safe`, `ANY_HIDDEN`
    sanitize       what reaches the page (an allowlist HTML sanitizer) and the terminal (no control sequences)
    sandbox        the OS wall around shell commands (bubblewrap, or Landlock in `sandbox_linux`; without a mount
                   namespace, protected paths are copied and put back after each command: `sandbox_restore`)
    protected      which writes ask first, by what a path does (hidden, environments, executables, configuration)
    reach          places no tool reaches (the sandbox's secret places; home's hidden entries from a home workspace)
    trust          the person's trust store and session key, kept outside the workspace
    signing        signed, chained lines for what nbagent stores and reads back

The rule: this wing is the bottom of nbagent. It imports nothing else from nbagent (the standard library
and its own modules only), so everything above can use it, and no change above can weaken it.
"""

from __future__ import annotations

from .protected import PROTECTED_PATHS, protected_reason, write_reason
from .sandbox import SandboxPolicy, sandbox_backend, sandbox_command, sandbox_policy
from .sanitize import sanitize_html, terminal_safe, visible
from .secrets import add_secret, redact, redact_exception, redact_value, secret_values
from .signing import seal, signer, unseal
from .trust import config_dir, is_trusted, session_key

__all__ = [
    "PROTECTED_PATHS",
    "SandboxPolicy",
    "add_secret",
    "config_dir",
    "is_trusted",
    "protected_reason",
    "redact",
    "redact_exception",
    "redact_value",
    "sandbox_backend",
    "sandbox_command",
    "sandbox_policy",
    "sanitize_html",
    "seal",
    "secret_values",
    "session_key",
    "signer",
    "terminal_safe",
    "unseal",
    "visible",
    "write_reason",
]
