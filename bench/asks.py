"""How often a person is asked about a shell command: today's design against "the sandbox is the wall".

    python bench/asks.py [--show]

Today, a command runs without asking when the classifier (`_readonly.read_only_problem`) shows that it
only reads; anything else is asked. The other design (Codex's): where a sandbox runs, every command first
runs without asking in the `read-only` sandbox; one that needs to write or reach the network fails there,
and the model asks to run it with more, so the person is asked then. This counts, over the commands of
the docs' pages on the built-in tools (docs/guide/tools.md from "Built-in tools" on, docs/security.md from
"Configuration that runs programs" on) and of the tests (`sh("...")`, `command=...`, and the parametrized command lists), how many
each design would ask about: today by the classifier; the other by running each command in the read-only
sandbox of a scratch workspace (bubblewrap when there, else Landlock) and counting those that fail on a
write or the network. Commands that could hurt a shared machine (fork bombs, long sleeps) are left out.
It also reports the size of what the classifier still decides under the other design.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nbagent.safety.sandbox import prepare, sandbox_backend  # noqa: E402
from nbagent.toolbox._readonly import read_only_problem  # noqa: E402
from nbagent.toolbox._workspace import Workspace  # noqa: E402

_UNSAFE = re.compile(r":\|:|while true|sleep [0-9]{2}|\byes\b|/dev/tcp|fork|\bdd\b|nohup|setsid|&\s*$|disown|curl|wget")
_NEEDS_MORE = ("Read-only file system", "Permission denied", "Operation not permitted", "Network is unreachable",
               "Could not resolve", "unable to create", "cannot create", "could not lock")


DOC_SECTIONS = (("docs/guide/tools.md", "## Built-in tools"), ("docs/security.md", "## Configuration that runs programs"))
"""Where the docs show agent commands: each page from that heading to its end."""


def docs_commands() -> list[str]:
    text = ""
    for page, heading in DOC_SECTIONS:
        page_text = (ROOT / page).read_text()
        text += page_text[page_text.index(heading):] + "\n"
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        words = span.split()
        if not words or "(" in span or "=" in words[0] or span.startswith(("%", "-", "$", ".", "/", "~")):
            continue
        if words[0] in ("git", "ls", "cat", "grep", "pytest", "rm", "sort", "head", "find", "wc", "echo", "make",
                        "pip", "touch", "mkdir", "sed", "tail", "diff", "python", "npm", "du"):
            found.append(span)
    return list(dict.fromkeys(found))


def test_commands() -> list[str]:
    found: list[str] = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if "jupyter" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "sh" and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    found.append(node.args[0].value)
                for kw in node.keywords:
                    if kw.arg == "command" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        found.append(kw.value.value)
                if name == "parametrize" and path.name in ("test_readonly.py", "test_shellwords.py") and len(node.args) > 1:
                    for elt in getattr(node.args[1], "elts", []):
                        if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                            found.append(elt.value)
    return [c for c in dict.fromkeys(found) if c.strip()]


def scratch() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="nbagent-asks-"))
    (ws / "notes.md").write_text("hello notes\n")
    (ws / "notes.txt").write_text("alpha\nbeta\n")
    (ws / "data.txt").write_text("b\na\nc\n")
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("print(1)\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=ws, env=env, capture_output=True)
    return ws


def needs_more(command: str, ws: Path) -> bool:
    prepared = prepare(["bash", "-c", command], workspace=ws, policy="read-only")
    try:
        args, how = prepared.how_to_start()
        proc = subprocess.run(args, cwd=ws, env={**os.environ, **prepared.env}, capture_output=True, timeout=5,
                              stdin=subprocess.DEVNULL, **how)
    except subprocess.TimeoutExpired:
        return True  # still waiting (on the network, most often): counted as asked
    finally:
        prepared.cleanup()
    err = proc.stderr.decode(errors="replace")
    return proc.returncode != 0 and any(s in err for s in _NEEDS_MORE)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--show", action="store_true", help="list the commands whose answer differs")
    opts = parser.parse_args()
    backend = sandbox_backend()
    print(f"backend: {backend.name}")
    if not backend.available:
        print("no sandbox here: the other design does not apply (the classifier decides, as today)")
        return
    for corpus, commands in (("docs", docs_commands()), ("tests", test_commands())):
        commands = [c for c in commands if not _UNSAFE.search(c) and "\x00" not in c]
        today = new = 0
        differ = []
        for command in commands:
            ws = scratch()
            try:
                asked_today = read_only_problem(command, Workspace(ws), None, sandboxed=True) is not None
                asked_new = needs_more(command, ws)
            finally:
                shutil.rmtree(ws, ignore_errors=True)
            today += asked_today
            new += asked_new
            if asked_today != asked_new:
                differ.append((asked_today, asked_new, command))
        print(f"{corpus}: {len(commands)} commands; asked today {today}, under the sandbox-is-the-wall design {new}")
        if opts.show:
            for a, b, c in differ:
                print(f"   today {'ask' if a else 'auto'} -> {'ask' if b else 'auto'}: {c!r}")
    sizes = {}
    for name in ("_readonly.py", "_getopt.py", "_readprograms.py", "_gitreads.py", "_readpaths.py", "_shellwords.py",
                 "_subcommands.py", "_shellrules.py", "_runsprograms.py", "_readdeny.py", "_secretreads.py"):
        sizes[name] = (ROOT / "nbagent" / "toolbox" / name).read_text().count("\n")
    print("lines:", ", ".join(f"{k} {v}" for k, v in sizes.items()))


if __name__ == "__main__":
    main()
