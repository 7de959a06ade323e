"""`TaskEnvironment`: one agentic task of the pack at a time, live in a sandbox, graded by the pack's grader.

A trainer (TRL's `environment_factory`, verl's agent loop, an OpenEnv server) builds one per rollout:

- `reset(task_id=None, seed=None)` stops the previous sandbox, starts a fresh one (bubblewrap or docker)
  with the task's files, keeping their roles: `protected` files are in the workspace and are put back
  to their bytes before any check runs; `grader` files are never in the sandbox during the episode and
  are copied in only for the grading. It returns the task's prompt, the first observation.
- The task's tools are typed methods (`bash`, `read_file`, `write_file`, `list_files`, `submit`, and one
  method per custom tool, generated from its JSON Schema), each returning the tool's text, bounded by the
  runtime's output cap, exactly what Gymwright's own harness feeds a model (`runtime.tools.ToolRunner`).
  A tool the task's environment does not enable answers an error, as in the harness. Every call is a
  step; past the environment's `max_steps` or `timeout_s`, after `submit` or once the workspace is full,
  tools answer that the episode has ended.
- `grade()` ends the episode and grades it in the same sandbox with `runtime.rollout.grade_episode`, the
  step Gymwright's previews and `python -m sandbox.runtime rollout` run: the agent's processes are ended,
  its links out of the workspace removed, protected and grader files put in place, then every check runs
  (RUBRIC.md "Scoring": an incomplete grade's `reward` is its lower bound). It returns the grade document
  (`reward`, `reward_upper`, `complete`, `passed`, per-check results) and stops the sandbox.
  `reward` (a property) and `get_reward()` (TRL's environment-owned reward) grade on first use.

Only the tool methods are public functions of the class: `reset`, `get_reward` are TRL's reserved names,
and the controls (`grade`, `close`, `tasks`, `call_tool`, `tool_schemas`) are `_Control` descriptors,
which tool collectors that list the class's functions (TRL's `inspect.getmembers(..., isfunction)`) skip,
so a model is never offered `grade` or `close` as a tool.
"""

from __future__ import annotations

import functools
import hashlib
import json
import keyword
import random
import shutil
import tempfile
import threading
import time
import types
import weakref
from pathlib import Path
from typing import Any

from .runtime.backends import get_backend
from .runtime.harness import SYSTEM_PROMPT
from .runtime.roles import plan_files
from .runtime.rollout import grade_episode
from .runtime.spec import SandboxError, SandboxSpec
from .runtime.tools import BUILTIN_TOOLS, ToolRunner, enabled_tools, openai_tool_definitions

PACK_DIR = Path(__file__).resolve().parent.parent
BACKENDS = ("bubblewrap", "docker")


class _Control:
    """A method of the environment that is not a tool. Bound on an instance as usual; on the class it is
    this object, not a function, so a collector of the class's functions does not offer it to a model."""

    def __init__(self, func):
        self.__func__ = func
        functools.update_wrapper(self, func)

    def __get__(self, instance, owner=None):
        return self if instance is None else types.MethodType(self.__func__, instance)

    def __call__(self, *args, **kwargs):
        return self.__func__(*args, **kwargs)


# -- the pack's tasks ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _pack_tasks(pack_dir: str) -> dict[str, dict]:
    """The pack's agentic tasks (a check of the rubric needs the episode: files, the sandbox or the
    trajectory), by id, from tasks.jsonl."""
    from grading.engine.checks import episode_checks

    path = Path(pack_dir) / "tasks.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pack_dir must be an unpacked Gymwright pack")
    tasks = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                document = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            if episode_checks(document.get("rubric")):
                tasks[document["id"]] = document
    return tasks


def agentic_task_ids(pack_dir: str | Path | None = None) -> list[str]:
    """The ids of the pack's agentic tasks, in task-id order."""
    return sorted(_pack_tasks(str(Path(pack_dir or PACK_DIR).resolve())))


def _read_files(folder: Path, refs, task_id: str, what: str) -> dict[str, bytes]:
    """The files a task names, from the pack's folder for them, each checked against its sha256."""
    files = {}
    for ref in refs:
        path = folder / ref.path
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise FileNotFoundError(f"task {task_id}: {what} file {ref.path!r} missing from the pack ({exc})") from None
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise ValueError(f"task {task_id}: {what} file {ref.path!r} does not match its sha256 in the task")
        files[ref.path] = data
    return files


# -- custom tools as methods ----------------------------------------------------------------------------

_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _python_name(name: Any) -> bool:
    """`name` is a Python name as written: ASCII (Python reads other identifiers NFKC-normalised, so that
    "ſelf" is `self`) and not a keyword."""
    return isinstance(name, str) and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


def _tool_method(name: str, description: str, parameters: dict):
    """A typed method calling the custom tool `name`, with a Google-style docstring (what TRL and
    transformers build the tool's schema from); None when its name or a parameter's is not a Python
    name (the tool is then still reachable through `call_tool`)."""
    properties = parameters.get("properties") or {}
    if not isinstance(properties, dict):
        return None
    names = list(properties)
    if not all(_python_name(n) and n != "self" for n in names):
        return None
    required = [n for n in (parameters.get("required") or []) if n in properties]
    ordered = required + [n for n in names if n not in required]

    def annotation(param: str) -> str:
        schema = properties[param] if isinstance(properties[param], dict) else {}
        kind = schema.get("type")
        return _JSON_TYPES.get(kind, "str") if isinstance(kind, str) else "str"

    signature = ", ".join(
        ["self"]
        + [f"{n}: {annotation(n)}" for n in required]
        + [f"{n}: {annotation(n)} | None = None" for n in ordered if n not in required]
    )
    # The arguments by name, not from locals(): a parameter may be called `locals`.
    arguments = "{" + ", ".join(f"{n!r}: {n}" for n in ordered) + "}"
    source = (
        f"def {name}({signature}) -> str:\n"
        f"    return self.call_tool({name!r}, {{k: v for k, v in {arguments}.items() if v is not None}})\n"
    )
    namespace: dict = {}
    # the names are checked above: ASCII Python names only
    exec(compile(source, f"<tool {name}>", "exec", dont_inherit=True), {}, namespace)
    method = namespace[name]
    lines = [_one_line(description) or f"The task's {name} tool.", ""]
    if ordered:
        lines.append("Args:")
        for n in ordered:
            schema = properties[n] if isinstance(properties[n], dict) else {}
            lines.append(f"    {n}: {_one_line(schema.get('description')) or f'The {n} argument.'}")
        lines.append("")
    lines += ["Returns:", "    The tool's output."]
    method.__doc__ = "\n".join(lines)
    return method


_CLASSES: dict[tuple, type] = {}
_CLASSES_LOCK = threading.Lock()


def _with_custom_tools(cls: type, pack_dir: str) -> type:
    """`cls`, or a subclass of it with one method per custom tool of the pack's agentic tasks (cached)."""
    key = (cls, pack_dir)
    with _CLASSES_LOCK:
        if key in _CLASSES:
            return _CLASSES[key]
        methods = {}
        for document in _pack_tasks(pack_dir).values():
            for tool in (document.get("environment") or {}).get("custom_tools") or []:
                name = tool.get("name")
                if not _python_name(name):
                    continue
                if name.startswith("_") or name in methods or hasattr(cls, name):
                    continue
                method = _tool_method(name, tool.get("description") or "", tool.get("parameters") or {})
                if method is not None:
                    methods[name] = method
        sub = cls
        if methods:
            sub = type(
                cls.__name__, (cls,), {**methods, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
            )
        _CLASSES[key] = sub
        return sub


# -- the environment ----------------------------------------------------------------------------------------


class TaskEnvironment:
    """One agentic task of the pack at a time, in its own sandbox. See the module's docstring."""

    def __new__(cls, pack_dir=None, *args, **kwargs):
        # TRL lists the tools on the instance's class: the pack's custom tools are methods of a subclass.
        return object.__new__(_with_custom_tools(cls, str(Path(pack_dir or PACK_DIR).resolve())))

    def __init__(
        self,
        pack_dir: str | Path | None = None,
        backend: str = "bubblewrap",
        task_id: str | None = None,
        *,
        image: str | None = None,
        backend_options: dict | None = None,
        judge: Any = None,
    ):
        """`pack_dir`: the unpacked pack (default: the folder above env/). `backend`: "bubblewrap" or
        "docker" (or a started runtime Backend); `backend_options` go to its constructor (docker:
        `default_image`...). `task_id`: the task every `reset()` without one plays (default: the one
        `reset` is given, else one drawn from `seed`). `image`: the sandbox image for every task (docker),
        instead of the task's. `judge`: a grading.engine JudgeClient for llm_judge checks; default: from
        OPENAI_BASE_URL, OPENAI_API_KEY and GYMWRIGHT_JUDGE_MODEL when set (else judge checks are
        unscored, and the reward is the lower bound)."""
        self.pack_dir = Path(pack_dir or PACK_DIR).resolve()
        self._documents = _pack_tasks(str(self.pack_dir))
        if task_id is not None and task_id not in self._documents:
            raise ValueError(self._unknown(task_id))
        if isinstance(backend, str):
            if backend not in BACKENDS and backend != "bwrap":
                raise ValueError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
            backend = get_backend(backend, **(backend_options or {}))
        self._backend = backend
        self._default_task = task_id
        self._image = image
        if judge is None:
            from grading.engine import JudgeClient, JudgeConfig

            config = JudgeConfig.from_env()
            judge = JudgeClient(config) if config is not None else None
        self._judge = judge
        self._random = random.Random()
        self._sandbox = None
        self._finalizer = None
        self._task = None
        self._grade: dict | None = None
        self._clear()

    # -- lifecycle -------------------------------------------------------------------------------------

    def reset(self, task_id: str | None = None, seed: int | None = None, **kwargs) -> str:
        """Start an episode of `task_id` (default: the environment's task, else one of `tasks()` drawn
        with `seed`) in a fresh sandbox and return its prompt. Other keyword arguments (a dataset row's
        columns, as TRL passes them) are ignored."""
        self._stop()
        self._clear()
        ids = sorted(self._documents)
        if task_id is None:
            task_id = self._default_task
        if task_id is None:
            if not ids:
                raise ValueError(f"the pack in {self.pack_dir} has no agentic task")
            chooser = random.Random(seed) if seed is not None else self._random
            task_id = ids[chooser.randrange(len(ids))]
        if task_id not in self._documents:
            raise ValueError(self._unknown(task_id))
        from grading.engine import parse_task

        document = self._documents[task_id]
        task = parse_task(document)
        folder = self.pack_dir / "tasks" / task_id
        files = _read_files(folder / "files", task.files, task_id, "task")
        # a Dockerfile's build context beside it (environment/); the rest of the environment's files where the
        # verifier reads them (tests/gymwright/ beside the tests of a task that came in as Harbor)
        build = [ref for ref in task.environment.files if ref.role == "build"]
        others = [ref for ref in task.environment.files if ref.role != "build"]
        env_folder = folder / "tests" / "env-files"
        if not env_folder.is_dir() and (folder / "tests" / "gymwright" / "env-files").is_dir():
            env_folder = folder / "tests" / "gymwright" / "env-files"
        env_files = _read_files(env_folder, others, task_id, "environment")
        context = _read_files(folder / "environment", build, task_id, "build context")
        spec = SandboxSpec.from_environment(task.environment, image=self._image)
        if context:
            spec = spec.with_overrides(build_context=tuple(sorted(context.items())))
        plan = plan_files(task, files, env_files)
        sandbox = self._backend.start(spec, files=plan.agent_files, env_files=plan.agent_env_files)
        self._sandbox = sandbox
        self._finalizer = weakref.finalize(self, _stop_quietly, sandbox)
        self._task, self._spec, self._plan = task, spec, plan
        self._runner = ToolRunner(sandbox, spec)
        self._deadline = time.monotonic() + spec.timeout_s
        system = SYSTEM_PROMPT.format(network="network access" if spec.network_allowed else "no network access")
        self._trajectory = [{"role": "system", "content": system}, {"role": "user", "content": task.prompt}]
        return task.prompt

    @_Control
    def close(self) -> None:
        """Stop the sandbox (an ungraded episode is dropped). Safe to call twice."""
        self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._stop()

    # -- tools -------------------------------------------------------------------------------------------

    def bash(self, command: str) -> str:
        """Run a shell command (/bin/sh -c) in the sandbox, in /workspace. Processes do not outlive it.

        Args:
            command: The shell command line.

        Returns:
            The exit code, then stdout and stderr (each truncated past a limit).
        """
        return self._call("bash", {"command": command}).content

    def read_file(self, path: str) -> str:
        """Read a text file from the sandbox.

        Args:
            path: A path relative to /workspace, or absolute under /workspace, /tmp or /env.

        Returns:
            The file's text (truncated past a limit), or an error.
        """
        return self._call("read_file", {"path": path}).content

    def write_file(self, path: str, content: str) -> str:
        """Write a text file in the sandbox, creating its folders; replaces an existing file.

        Args:
            path: A path relative to /workspace, or absolute under /workspace or /tmp.
            content: The file's whole text.

        Returns:
            How many bytes were written, or an error.
        """
        return self._call("write_file", {"path": path, "content": content}).content

    def list_files(self, path: str = ".") -> str:
        """List the files in the workspace.

        Args:
            path: A folder relative to /workspace (default: all of it).

        Returns:
            One path relative to /workspace per line.
        """
        outcome = self._call("list_files", {})
        prefix = str(path or ".").strip()
        prefix = prefix.removeprefix("/workspace").strip("/")
        while prefix.startswith("./"):
            prefix = prefix[2:]
        if outcome.is_error or prefix in ("", "."):
            return outcome.content
        lines = [line for line in outcome.content.splitlines() if line == prefix or line.startswith(prefix + "/")]
        return "\n".join(lines) if lines else f"(no files under {prefix})"

    def submit(self, answer: str) -> str:
        """Submit your final answer and end the episode. Call it exactly once, when done.

        Args:
            answer: The final answer.

        Returns:
            A confirmation.
        """
        return self._call("submit", {"answer": answer}).content

    @_Control
    def call_tool(self, name: str, arguments: dict | str | None = None) -> str:
        """Call any tool of the current task by name (built-in or custom) with its arguments (a dict or a
        JSON object's text); the tool's text, or an error a model can act on."""
        return self._call(name, arguments).content

    @_Control
    def tool_schemas(self, task_id: str | None = None) -> list[dict]:
        """The task's tools (default: the current task's) as OpenAI function definitions."""
        if task_id is None and self._task is not None:
            return openai_tool_definitions(self._runner.tools.values())
        from grading.engine import parse_task

        task_id = task_id or self._default_task
        if task_id not in self._documents:
            raise ValueError(self._unknown(task_id))
        return openai_tool_definitions(
            enabled_tools(SandboxSpec.from_environment(parse_task(self._documents[task_id]).environment))
        )

    def _call(self, name: str, arguments):
        from .runtime.tools import ToolOutcome

        if self._task is None:
            raise RuntimeError("no episode: call reset() first")
        if self._stop_reason is None:
            if self._steps >= self._spec.max_steps:
                self._stop_reason = "max_steps"
            elif time.monotonic() >= self._deadline:
                self._stop_reason = "timeout"
        if self._stop_reason is not None:
            return ToolOutcome(f"error: the episode has ended ({self._stop_reason}); no more tool calls", is_error=True)
        self._steps += 1
        step = self._steps
        call_id = f"call_{step}"
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False, default=str)
        self._trajectory.append(
            {
                "role": "assistant",
                "step": step,
                "content": None,
                "tool_calls": [{"id": call_id, "name": name, "arguments": raw}],
                "usage": None,
                "duration_ms": 0,
            }
        )
        time_left = max(0.1, self._deadline - time.monotonic())
        outcome = self._runner.run(name, arguments if arguments is not None else {}, time_left_s=time_left)
        self._trajectory.append(
            {
                "role": "tool",
                "step": step,
                "tool_call_id": call_id,
                "name": name,
                "arguments": raw,
                "content": outcome.content,
                "is_error": outcome.is_error,
                "duration_ms": outcome.duration_ms,
                "exec": outcome.exec,
            }
        )
        if outcome.submitted:
            self._answer = outcome.answer or ""
            self._stop_reason = "submitted"
        elif getattr(self._sandbox, "limit_hit", None):
            note = f"[gymwright] the episode was stopped: {self._sandbox.limit_hit}"
            self._trajectory.append({"role": "system", "step": step, "content": note})
            self._stop_reason = "workspace_full"
        return outcome

    # -- grading ---------------------------------------------------------------------------------------------

    @_Control
    def grade(self, answer: str | None = None) -> dict:
        """End the episode and grade it in its sandbox with the pack's grader; the grade document (`reward`:
        the lower bound when incomplete, `reward_upper`, `complete`, `passed`, `checks`...). `answer` is the
        final answer when the agent did not `submit` one (e.g. a trainer's last message). Graded once: later
        calls return the same grade. A sandbox that fails while grading earns 0 (`error` says why)."""
        if self._grade is not None:
            return json.loads(json.dumps(self._grade))
        if self._task is None:
            raise RuntimeError("no episode to grade: call reset() first")
        if self._sandbox is None:
            self._grade = _failed_grade("the episode was closed before it was graded")
            return json.loads(json.dumps(self._grade))
        if self._answer is None and answer is not None:
            self._answer = str(answer)
        self._stop_reason = self._stop_reason or "graded"
        work = tempfile.mkdtemp(prefix="gymwright-env-")
        try:
            graded = grade_episode(
                self._task,
                self._sandbox,
                self._plan,
                answer=self._answer or "",
                trajectory=self._trajectory,
                judge=self._judge,
                work_dir=Path(work),
            )
            self._grade = graded.grade.to_document()
        except SandboxError as exc:
            self._grade = _failed_grade(f"the sandbox failed while grading: {exc.message}")
        except Exception as exc:  # noqa: BLE001 - a grader bug: the episode earns nothing, and says why
            self._grade = _failed_grade(f"grading failed: {type(exc).__name__}: {exc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
            self._stop()
        return json.loads(json.dumps(self._grade))

    @property
    def reward(self) -> float:
        """The episode's reward (grading it first if need be): RUBRIC.md's lower bound."""
        return float(self.grade()["reward"])

    def get_reward(self) -> float:  # TRL's environment-owned reward (a reserved name: not a tool)
        return self.reward

    # -- facts -----------------------------------------------------------------------------------------------

    @_Control
    def tasks(self) -> list[str]:
        """The pack's agentic task ids, in order."""
        return sorted(self._documents)

    @property
    def task_id(self) -> str | None:
        return self._task.id if self._task is not None else None

    @property
    def task(self) -> dict | None:
        """The current task's gymwright.task/v1 document."""
        return self._documents.get(self._task.id) if self._task is not None else None

    @property
    def system_prompt(self) -> str:
        """The system message Gymwright's harness gives a model (where it works, the network, `submit`)."""
        return self._trajectory[0]["content"] if self._trajectory else SYSTEM_PROMPT.format(network="no network access")

    @property
    def trajectory(self) -> list[dict]:
        """The episode so far, in the harness's trajectory format (what `trajectory` checks read)."""
        return [dict(item) for item in self._trajectory]

    @property
    def answer(self) -> str | None:
        return self._answer

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason

    @property
    def steps(self) -> int:
        return self._steps

    # -- internals -------------------------------------------------------------------------------------------

    def _clear(self) -> None:
        self._task = self._spec = self._plan = self._runner = None
        self._trajectory: list[dict] = []
        self._answer: str | None = None
        self._stop_reason: str | None = None
        self._steps = 0
        self._deadline = 0.0
        self._grade = None

    def _stop(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if sandbox is not None:
            _stop_quietly(sandbox)
        if self._task is not None and self._stop_reason is None:
            self._stop_reason = "closed"

    def _unknown(self, task_id) -> str:
        ids = sorted(self._documents)
        shown = ", ".join(ids[:10]) + (f" (and {len(ids) - 10} more)" if len(ids) > 10 else "")
        return (
            f"{task_id!r} is not an agentic task of the pack in {self.pack_dir} (its agentic tasks: {shown or 'none'})"
        )


def _stop_quietly(sandbox) -> None:
    try:
        sandbox.stop()
    except Exception:  # noqa: BLE001 - stopping is best effort; `python -m env.runtime reap` cleans up
        pass


def _failed_grade(error: str) -> dict:
    return {
        "reward": 0.0,
        "reward_upper": 0.0,
        "earned": 0.0,
        "max": 0.0,
        "passed": False,
        "gated": False,
        "complete": False,
        "checks": [],
        "error": error,
    }


__all__ = ["BUILTIN_TOOLS", "TaskEnvironment", "agentic_task_ids"]
