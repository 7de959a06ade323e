"""Scripts run as written: a task's reference solution and its environment's setup script run as a file
by the interpreter their `#!` line names (`#!/bin/bash` gets bash, `set -euo pipefail` and all), and one
without a `#!` line by bash, as Harbor runs a task's scripts, or by sh in an image that has no bash.

The interpreter is started by name with the script's path, never by executing the file: /tmp may be
mounted noexec, and no mode bit is stored with a task's script.
"""

from __future__ import annotations

import hashlib
import re
import shlex

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SHEBANG_MAX_CHARS = 255  # Linux reads at most this much of a #! line (BINPRM_BUF_SIZE, 256 bytes)


def shebang_argv(script: str) -> list[str] | None:
    """The interpreter and its one optional argument a script's `#!` line names, as Linux reads it (all
    that follows the interpreter's name is one argument), or None when it has none."""
    if not script.startswith("#!"):
        return None
    line = script[2:].split("\n", 1)[0][:SHEBANG_MAX_CHARS].strip().rstrip("\r")
    if not line:
        return None
    interpreter, _, argument = line.replace("\t", " ").partition(" ")
    argument = argument.strip()
    return [interpreter, argument] if argument else [interpreter]


def interpreter_command(script: str, path: str) -> str:
    """The shell words that run the script at `path` as written (see the module)."""
    argv = shebang_argv(script)
    if argv is not None:
        return " ".join(shlex.quote(word) for word in [*argv, path])
    quoted = shlex.quote(path)
    return f"if command -v bash >/dev/null 2>&1; then bash {quoted}; else sh {quoted}; fi"


def script_command(script: str, *, name: str = "script", env: dict[str, str] | None = None) -> str:
    """A `/bin/sh -c` command line that writes `script` to a file under /tmp and runs it as written (see the
    module), with `env` exported to it, then removes the file; its exit code is the script's."""
    digest = hashlib.sha256(script.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    delimiter = f"GYMWRIGHT_{name.upper()}_{digest}"
    while delimiter in script:
        delimiter += "_"
    body = script if script.endswith("\n") else script + "\n"
    argv = shebang_argv(script)
    if argv is not None:
        run = " ".join(shlex.quote(word) for word in argv) + ' "$gw_script"'
    else:
        run = 'if command -v bash >/dev/null 2>&1; then bash "$gw_script"; else sh "$gw_script"; fi'
    exports = "".join(
        f"export {key}={shlex.quote(str(value))}\n" for key, value in (env or {}).items() if _ENV_NAME.match(key)
    )
    return (
        f"gw_script=$(mktemp /tmp/gymwright-{name}.XXXXXX) || exit 126\n"
        f"cat > \"$gw_script\" <<'{delimiter}'\n{body}{delimiter}\n"
        f"{exports}"
        f"{run}\n"
        "gw_code=$?\n"
        'rm -f "$gw_script"\n'
        "exit $gw_code\n"
    )
