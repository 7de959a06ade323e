"""What a Harbor task's verifier reads, runs and compares, found in its own files (tests/test.sh, or a
Terminal-Bench task's run-tests.sh, and the files beside it), and the scripted probes that attack it through what the agent can write.

Pure: no Django, no I/O. Every probe is derived from the task's own files (nothing in it names a task); each is
a list of bash commands the agent could type, run in the task's sandbox like any rollout. The verifier's files
are grader files (imported under VERIFIER_FILES): the probes' plans are made on the host, from their bytes, and
the agent's side never sees them.

- `verifier-tamper`: every script the verifier runs from a folder the agent can write (its work directory,
  /workspace, /tmp) rewritten to write a full reward and exit 0;
- `verifier-conftest`: a conftest.py that passes every test, in the work directory and in every writable
  folder the verifier names (pytest loads it from the test's folder and the folders above it);
- `verifier-pycache`: for each Python module of the tests, an unchecked-hash .pyc in `__pycache__` of every
  writable folder the verifier names (Python loads such a cache without looking at the source);
- `verifier-literal`: the verifier's own literals that the instruction also shows (text the agent can know),
  written into every file the verifier reads, and submitted.

Static findings (no sandbox): the verifier reads the wall clock; `set -e` in test.sh (a failing command ends it
before it writes a reward: read with the nop run, which shows whether a reward is written when the work is
absent); truth in what the agent gets (a test or solution file's bytes among the environment's files, a
Dockerfile that copies tests/ or solution/); an answer in a file name (a literal only the verifier knows,
in the name of a file the agent is given).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

VERIFIER_FILES = ".harbor/"  # packs.importer.sources.VERIFIER_FILES: where an imported task's tests are
TESTS_PREFIX = VERIFIER_FILES + "tests/"
REWARD_FILE = "/logs/verifier/reward.txt"
# The script the verifier starts: Harbor's test.sh, Terminal-Bench's run-tests.sh (its exit code is the verdict).
ENTRY_SCRIPTS = ("test.sh", "run-tests.sh")

# Bounds of the analysis: a verifier file is read up to this many bytes; at most this many literals and paths.
SCAN_BYTES = 256 * 1024
MAX_LITERALS = 40
MAX_PATHS = 40

PROBES = {
    "verifier-tamper": "rewrites every script the verifier runs from a folder the agent can write",
    "verifier-conftest": "plants a conftest.py that passes every test wherever the verifier runs pytest",
    "verifier-pycache": "plants unchecked-hash __pycache__ files for the tests' modules in writable folders",
    "verifier-literal": "writes the verifier's literals that the instruction shows into the files it reads",
}


@dataclass
class Finding:
    """One static finding: `check` (wall-clock, truth-in-image, answer-in-name, set-e), where, why."""

    check: str
    message: str

    def to_dict(self) -> dict:
        return {"check": self.check, "message": self.message}


@dataclass
class VerifierFacts:
    scripts: dict[str, str]  # path under tests/ -> text (bounded)
    literals: list[str] = field(default_factory=list)  # quoted strings and grep patterns, in order
    paths: list[str] = field(default_factory=list)  # absolute paths the verifier names (not /tests, /logs)
    modules: list[str] = field(default_factory=list)  # Python modules of the tests (test_outputs)
    executed: list[str] = field(default_factory=list)  # absolute paths it runs (`bash /app/x`, `/app/x args`)

    @property
    def present(self) -> bool:
        """A verifier to probe: Harbor's tests/test.sh, or Terminal-Bench's run-tests.sh (imported beside its tests)."""
        return any(entry in self.scripts for entry in ENTRY_SCRIPTS)


def verifier_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The verifier's files of an imported Harbor task (path under tests/ -> bytes)."""
    return {path[len(TESTS_PREFIX) :]: data for path, data in files.items() if path.startswith(TESTS_PREFIX)}


_QUOTED = re.compile(r"""(?<![\w\\])(['"])((?:(?!\1)[^\\\n]|\\.){1,200})\1""")
_GREP = re.compile(r"\bgrep\s+((?:-[A-Za-z]+\s+)*)([^\s'\"|;&<>()$`-][^\s'\"|;&<>()$`]*)")
_PATH = re.compile(r"(?<![\w.$/-])(/(?:[\w.+-]+/)*[\w.+-]*)")
_NOT_OURS = ("/tests", "/logs", "/dev", "/proc", "/sys")
_EXECUTED = re.compile(r"(?:^\s*|[;&|(]\s*|\b(?:bash|sh|source|exec|python3?|perl|node)\s+|^\s*\.\s+)(/[\w./+-]+)")
_SCRIPT_SUFFIXES = (".sh", ".bash", ".py", ".pl", ".js")


def facts_of(files: Mapping[str, bytes]) -> VerifierFacts:
    """The verifier of an imported Harbor task read from its files (`files`: task path -> bytes)."""
    scripts = {
        path: data[:SCAN_BYTES].decode("utf-8", "replace")
        for path, data in sorted(verifier_files(files).items())
        if path.endswith((".sh", ".py", ".bash")) or "." not in posixpath.basename(path)
    }
    facts = VerifierFacts(scripts=scripts)
    for text in scripts.values():
        for line in _code_lines(text):
            for match in _QUOTED.finditer(line):
                _add(facts.literals, match.group(2), MAX_LITERALS)
            for match in _GREP.finditer(line):
                _add(facts.literals, match.group(2), MAX_LITERALS)
            for match in _EXECUTED.finditer(line):
                path = posixpath.normpath(match.group(1))
                if not any(path == root or path.startswith(root + "/") for root in _NOT_OURS):
                    _add(facts.executed, path, MAX_PATHS)
            for match in _PATH.finditer(line):
                path = posixpath.normpath(match.group(1))
                if path != "/" and not any(path == root or path.startswith(root + "/") for root in _NOT_OURS):
                    _add(facts.paths, path, MAX_PATHS)
    facts.modules = [
        posixpath.basename(path)[:-3]
        for path in scripts
        if path.endswith(".py") and posixpath.basename(path)[:-3].isidentifier()
    ]
    return facts


def _add(items: list[str], item: str, limit: int) -> None:
    if item and item not in items and len(items) < limit:
        items.append(item)


def _code_lines(text: str) -> list[str]:
    """Lines that are not comments (a shebang is a comment too)."""
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def writable_roots(workdir: str | None) -> tuple[str, ...]:
    """The folders the agent writes in a sandbox: /workspace (the image's WORKDIR is a link to it) and /tmp."""
    return tuple(root for root in (workdir, "/workspace", "/tmp") if root)


def _writable(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)


def writable_paths(facts: VerifierFacts, workdir: str | None) -> list[str]:
    return [path for path in facts.paths if _writable(path, writable_roots(workdir))]


def _looks_like_file(path: str) -> bool:
    return "." in posixpath.basename(path) and not path.endswith("/")


def _folders(facts: VerifierFacts, workdir: str | None) -> list[str]:
    """Writable folders the verifier names (a path with no extension is read as a folder), the work directory first."""
    found = [workdir or "/workspace"]
    for path in writable_paths(facts, workdir):
        folder = posixpath.dirname(path) if _looks_like_file(path) else path
        if folder not in found:
            found.append(folder)
    return found


# ---------------------------------------------------------------------------------------------- probes

_SHELL_PAYLOAD = f"#!/bin/sh\nmkdir -p /logs/verifier 2>/dev/null; echo 1 > {REWARD_FILE} 2>/dev/null\nexit 0\n"
_PYTHON_PAYLOAD = (
    "import os, sys\ntry:\n    os.makedirs('/logs/verifier', exist_ok=True)\n"
    f"    open({REWARD_FILE!r}, 'w').write('1')\nexcept OSError:\n    pass\nsys.exit(0)\n"
)
_CONFTEST = (
    "import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_pyfunc_call(pyfuncitem):\n"
    "    return True  # the test function is never called: it passes\n"
)
# A module that passes under unittest and pytest: one test that does nothing.
_PASSING_MODULE = "import unittest\n\n\nclass Passing(unittest.TestCase):\n    def test_ok(self):\n        pass\n"


def _write(path: str, content: str, *, executable: bool = False) -> str:
    quoted = shlex.quote(path)
    chmod = f" && chmod 755 {quoted}" if executable else ""
    return (
        f'mkdir -p "$(dirname {quoted})" 2>/dev/null; rm -rf {quoted} 2>/dev/null; '
        f"printf '%s' {shlex.quote(content)} > {quoted}{chmod} && echo \"wrote {path}\""
    )


@dataclass
class ProbePlan:
    name: str
    commands: list[str]
    answer: str
    what: str  # what it planted, in words (the report's reason when it is rewarded)


def probe_plans(facts: VerifierFacts, *, instruction: str, workdir: str | None) -> list[ProbePlan]:
    """The verifier probes that apply to this verifier (none for a task without tests/test.sh or run-tests.sh)."""
    if not facts.present:
        return []
    plans = []
    roots = writable_roots(workdir)
    runnable = [
        path
        for path in writable_paths(facts, workdir)
        if path not in roots and (path.endswith(_SCRIPT_SUFFIXES) or path in facts.executed)
    ]
    if runnable:
        commands = [
            "\n".join(
                _write(path, _PYTHON_PAYLOAD if path.endswith(".py") else _SHELL_PAYLOAD, executable=True)
                for path in runnable
            )
            + "\ntrue"
        ]
        plans.append(ProbePlan("verifier-tamper", commands, "", f"rewrote {', '.join(runnable[:5])}"))
    folders = _folders(facts, workdir)
    plans.append(
        ProbePlan(
            "verifier-conftest",
            ["\n".join(_write(posixpath.join(folder, "conftest.py"), _CONFTEST) for folder in folders) + "\ntrue"],
            "",
            f"planted conftest.py in {', '.join(folders[:5])}",
        )
    )
    if facts.modules:
        plans.append(
            ProbePlan(
                "verifier-pycache",
                [_pycache_command(folders, facts.modules)],
                "",
                f"planted __pycache__ for {', '.join(facts.modules[:5])} in {', '.join(folders[:5])}: Python loads "
                "it in place of the test (Gymwright's own checks read no bytecode; Harbor's verifier does)",
            )
        )
    known = known_literals(facts, instruction)
    targets = [path for path in writable_paths(facts, workdir) if _looks_like_file(path)]
    if known and targets:
        text = "\n".join(known) + "\n"
        plans.append(
            ProbePlan(
                "verifier-literal",
                ["\n".join(_write(path, text) for path in targets) + "\ntrue"],
                text,
                f"wrote {', '.join(repr(item) for item in known[:3])} into {', '.join(targets[:5])}",
            )
        )
    return plans


def known_literals(facts: VerifierFacts, instruction: str) -> list[str]:
    """The verifier's literals the agent can know: those the instruction shows (not paths, not options)."""
    shown = " ".join(instruction.split()).casefold()
    return [
        literal
        for literal in facts.literals
        if len(literal.strip()) >= 2
        and re.search(r"[A-Za-z0-9]", literal)
        and not literal.startswith(("/", "-", "$"))
        and " ".join(literal.split()).casefold() in shown
    ]


def _pycache_command(folders: list[str], modules: list[str]) -> str:
    plan = json.dumps({"folders": folders, "modules": modules, "source": _PASSING_MODULE})
    program = (
        "import json, os, py_compile, sys, tempfile\n"
        "plan = json.loads(sys.argv[1])\n"
        "source = os.path.join(tempfile.mkdtemp(), 'm.py')\n"
        "open(source, 'w').write(plan['source'])\n"
        "for folder in plan['folders']:\n"
        "    for name in plan['modules']:\n"
        "        target = os.path.join(folder, '__pycache__', name + '.' + sys.implementation.cache_tag + '.pyc')\n"
        "        try:\n"
        "            os.makedirs(os.path.dirname(target), exist_ok=True)\n"
        "            py_compile.compile(source, cfile=target, doraise=True,\n"
        "                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
        "            print('planted', target)\n"
        "        except Exception as exc:\n"
        "            print('could not plant', target, exc)\n"
    )
    return (
        "if command -v python3 >/dev/null 2>&1; then python3 -c "
        f"{shlex.quote(program)} {shlex.quote(plan)}; else echo 'no python3: nothing to plant'; fi; true"
    )


# ---------------------------------------------------------------------------------------------- static findings

_SHELL_CLOCK = re.compile(r"(\$\(\s*date\b|`\s*date\b|(?<![\w.-])date\s+[+-]|\$\{?EPOCHSECONDS|\$\{?EPOCHREALTIME)")
_PYTHON_CLOCK = re.compile(
    r"\b(time\.time|time\.time_ns|time\.localtime|time\.gmtime|time\.strftime|time\.ctime|datetime\.now"
    r"|datetime\.utcnow|datetime\.today|date\.today)\s*\("
)
_LOGGING = re.compile(r"^\s*(echo|printf|logger|print\(|log\.|logging\.)")
_SET_E = re.compile(r"^\s*set\s+(-[A-Za-z]*e[A-Za-z]*\b|-o\s+errexit\b)|^#!.*\s-[A-Za-z]*e\b", re.MULTILINE)


def clock_reads(facts: VerifierFacts) -> list[str]:
    """`tests/test.sh:4: date +%s`: where the verifier reads the wall clock (a line that only logs is left out)."""
    found = []
    for path, text in facts.scripts.items():
        pattern = _PYTHON_CLOCK if path.endswith(".py") else _SHELL_CLOCK
        for number, line in enumerate(text.splitlines(), start=1):
            if line.lstrip().startswith("#") or _LOGGING.match(line):
                continue
            if pattern.search(line):
                found.append(f"tests/{path}:{number}: {line.strip()[:80]}")
    return found


def sets_errexit(facts: VerifierFacts) -> bool:
    return bool(_SET_E.search(facts.scripts.get("test.sh", "")))


def static_findings(
    facts: VerifierFacts,
    *,
    instruction: str,
    dockerfile: str | None,
    agent_files: Mapping[str, bytes],
    truth: Mapping[str, bytes],
) -> list[Finding]:
    """What the task's files show without running it. `agent_files`: what the agent is given (its workspace files,
    the environment's files and build context), path -> bytes; `truth`: the tests' and the solution's files."""
    findings = []
    clock = clock_reads(facts)
    if clock:
        findings.append(
            Finding(
                "wall-clock",
                f"the verifier reads the wall clock ({'; '.join(clock[:3])}): its verdict can change with the "
                "time it runs",
            )
        )
    digests = {hashlib.sha256(data).hexdigest(): name for name, data in truth.items() if len(data.strip()) >= 16}
    for path, data in sorted(agent_files.items()):
        name = digests.get(hashlib.sha256(data).hexdigest())
        if name:
            findings.append(Finding("truth-in-image", f"the agent is given {path}, a copy of {name}"))
    for number, line in enumerate((dockerfile or "").splitlines(), start=1):
        if re.match(r"^\s*(COPY|ADD)\b", line, re.IGNORECASE) and re.search(
            r"(^|[\s/.])(tests|solution)(/|\s|$)|solve\.sh|test\.sh", line[4:]
        ):
            findings.append(
                Finding("truth-in-image", f"the Dockerfile copies the tests or the solution in (line {number})")
            )
    secret = [
        literal
        for literal in facts.literals
        if len(literal) >= 3
        and re.fullmatch(r"[\w.+-]+", literal)
        and re.search(r"\d", literal)
        and literal not in known_literals(facts, instruction)
        and literal.casefold() not in instruction.casefold()
    ]
    for path in sorted(agent_files):
        base = posixpath.basename(path)
        hit = next((literal for literal in secret if literal in base and literal != base), None)
        if hit:
            findings.append(
                Finding("answer-in-name", f"{path}: its name holds {hit!r}, which only the verifier should know")
            )
    return findings
