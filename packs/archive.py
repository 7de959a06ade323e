"""The pack archive: a pure writer and verifier, without Django (docs/formats.md, "Task pack").

A lab can rebuild a pack from tasks.jsonl alone with `build_pack`: it takes the task
documents in task-id order, one at a time, and streams them to a scratch folder —
tasks.jsonl, the parquet splits, a Harbor task folder per task — then writes the
manifest (every file's sha256 and one `content_sha256` over all of it) and the dataset
card, and packs it into a reproducible .tar.gz: entries sorted path by path (the task folders
last, spooled as tar entries while the tasks stream by), fixed mtimes, uid/gid 0, no user
names, gzip without a timestamp or file name. Building the same
tasks twice gives the same bytes except the manifest's `build` record, so the same
`content_sha256`.

Only the manifest's task list and file digests (a few dozen bytes per file) stay in
memory; task documents are dropped once written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import marshal
import math
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import uuid
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring as _json_string  # ensure_ascii=False's string encoder (C)
from pathlib import Path
from typing import Any, BinaryIO

from grading.engine import canonical_json
from grading.engine.calibration import DEFAULT_BAND
from grading.engine.checks import episode_checks
from grading.engine.gates import has_judge_checks
from grading.engine.models import GRADE_SCHEMA, RUBRIC_SCHEMA, TASK_SCHEMA

PACK_SCHEMA = "gymwright.pack/v1"
FIXED_MTIME = 1_700_000_000  # every entry's mtime: the bytes must not depend on when they were built
BUNDLE_DIR = Path(__file__).resolve().parent / "bundle"
ENGINE_DIR = Path(__file__).resolve().parent.parent / "grading" / "engine"
PARQUET_BATCH = 1000
PARQUET_BATCH_BYTES = 256 << 20  # a batch's JSON lines stay far below pyarrow's 2 GiB block
CANARY_NAMESPACE = uuid.UUID("8d3c1b52-3f0e-4d8e-9a55-5b7b9f3c2a10")
DIFFICULTY_BINS = ("unsolved", "hard", "in band", "easy", "not previewed")
HARBOR_ONLY_SHOWN = 20  # task ids the card names of those not in the parquet files


class PackError(Exception):
    """The pack cannot be built from this input (message says which task and why)."""


class BuildCancelled(Exception):
    """The build was asked to stop; nothing was published."""


@dataclasses.dataclass(frozen=True)
class PackInfo:
    slug: str
    name: str
    version: str
    description: str = ""
    licence: str = "proprietary"
    test_ratio: float = 0.1
    gymwright_version: str = "0.1.0"


@dataclasses.dataclass
class TaskItem:
    """One task to pack: its gymwright.task/v1 document, its sha256 and its last model preview's numbers."""

    document: dict
    sha256: str
    calibration: dict | None = None  # {policy, n, pass_rate, pass_at_k, mean_reward}


@dataclasses.dataclass
class BuildResult:
    manifest: dict
    sha256: str
    size: int
    content_sha256: str


def manifest_summary(manifest: dict) -> dict:
    """The manifest without its file map: what a database row keeps of a built pack (counts, difficulty,
    tasks, content_sha256, build record); `verify_pack` reads the whole manifest from the archive."""
    return {key: value for key, value in manifest.items() if key != "files"}


def split_bucket(task_id: str) -> float:
    """Where a task id hashes in [0, 1): below the test ratio it is in the test split."""
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "big") / 2**64


def split_of(task_id: str, test_ratio: float) -> str:
    """'test' or 'train', from a stable hash of the task id (the same in every version of every pack)."""
    return "test" if split_bucket(task_id) < test_ratio else "train"


def empty_split(counts: dict) -> str | None:
    """The split ("test" before "train") that holds none of a pack's tasks, or None: where every trainer's and
    `datasets`' recipe needs both (the pack page's plan, the card, export_pack's note)."""
    if not counts.get("train") and not counts.get("test"):
        return None
    return next((name for name in ("test", "train") if not counts.get(name)), None)


def test_ratio_filling_both(task_ids: Iterable[str]) -> float | None:
    """A test ratio, in hundredths, at which these tasks fill both splits: the smallest that puts one in test, or
    when that would empty train, the largest that keeps one there; None where no ratio can (a single task)."""
    buckets = sorted(split_bucket(task_id) for task_id in task_ids)
    if len(buckets) < 2:
        return None
    low, high = buckets[0], buckets[-1]  # a ratio r fills both when low < r <= high
    for ratio in ((int(low * 100) + 1) / 100, int(high * 100) / 100):
        if low < ratio <= high:
            return ratio
    return None


def canary_guid(pack_slug: str) -> str:
    return str(uuid.uuid5(CANARY_NAMESPACE, pack_slug))


def difficulty_of(calibration: dict | None, band: tuple[float, float] = DEFAULT_BAND) -> str:
    """Which histogram bin a task falls in, from its last model preview's pass rate."""
    if not calibration or calibration.get("pass_rate") is None:
        return "not previewed"
    rate = calibration["pass_rate"]
    if rate <= 0:
        return "unsolved"
    if rate < band[0]:
        return "hard"
    if rate <= band[1]:
        return "in band"
    return "easy"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_digest(manifest: dict) -> str:
    return _sha256(
        canonical_json({k: v for k, v in manifest.items() if k not in ("build", "content_sha256")}).encode("utf-8")
    )


def _indented_json(value: Any) -> bytes:
    """manifest.json and rubric.json as people read them: the bytes of `json.dumps(value, indent=1,
    sort_keys=True, ensure_ascii=False)` and a newline. The json module drops its C encoder once an indent
    is asked for, and walked every task's rubric and the manifest's 110,000 file digests in generators
    (11 % of a 10,000-task build's CPU, much of it on the critical path: py-spy); `_indented` writes the
    same text with the C string encoder, in about half the time. Anything that is not plain JSON
    data (a key that is not a string, another type, nesting too deep) goes to the json module, which
    writes it or raises as before."""
    try:
        text = _indented(value, "\n")
    except (_NotPlainJSON, RecursionError):
        return (json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    return (text + "\n").encode("utf-8")


class _NotPlainJSON(Exception):
    pass


def _indented(value: Any, newline: str) -> str:
    """`value` as json.dumps(indent=1, sort_keys=True, ensure_ascii=False) writes it, at the depth whose line
    break and indent is `newline`."""
    if type(value) is str:
        return _json_string(value)
    if type(value) is dict:
        if not value:
            return "{}"
        inner = newline + " "
        if not all(type(key) is str for key in value):
            raise _NotPlainJSON
        return (
            "{"
            + inner
            + ("," + inner).join(
                [
                    _json_string(key) + ": " + (_json_string(item) if type(item) is str else _indented(item, inner))
                    for key, item in sorted(value.items())
                ]
            )
            + newline
            + "}"
        )
    if type(value) is list or type(value) is tuple:
        if not value:
            return "[]"
        inner = newline + " "
        return (
            "["
            + inner
            + ("," + inner).join(
                [_json_string(item) if type(item) is str else _indented(item, inner) for item in value]
            )
            + newline
            + "]"
        )
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float:
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise _NotPlainJSON  # a subclass or another type: the json module's own rules


class _Scratch:
    """Writes files under the pack's root folder and remembers each file's sha256."""

    def __init__(self, root: Path):
        self.root = root
        self.digests: dict[str, str] = {}

    def write(self, relative: str, data: bytes) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.digests[relative] = _sha256(data)

    def add_existing(self, relative: str) -> None:
        digest = hashlib.sha256()
        with open(self.root / relative, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        self.digests[relative] = digest.hexdigest()


# ---------------------------------------------------------------------------------------------- grader


def grader_files() -> list[tuple[str, bytes]]:
    """The grading engine's own source files, as they are on disk (the exact code that graded the previews)."""
    files = [("grading/__init__.py", b'"""Gymwright\'s grading engine, bundled with a task pack."""\n')]
    for path in sorted(ENGINE_DIR.glob("*.py")):
        files.append((f"grading/engine/{path.name}", path.read_bytes()))
    return files


def grader_requirements(files: list[tuple[str, bytes]]) -> str:
    """requirements.txt for the bundled grader: every third-party distribution the engine's source
    (`files`, as `grader_files()` gives them) imports (found by reading it, so a new dependency
    cannot be forgotten), pinned to the version installed here, which is the one that graded the
    previews."""
    import ast
    import importlib.metadata
    import sys

    modules: set[str] = set()
    for name, data in files:
        if not name.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(data.decode("utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    distributions = importlib.metadata.packages_distributions()
    pins = set()
    for module in modules - set(sys.stdlib_module_names) - {"sre_parse", "grading"}:
        for name in distributions.get(module, []):
            pins.add(f"{name.lower()}=={importlib.metadata.version(name)}")
    return "".join(f"{pin}\n" for pin in sorted(pins))


def grader_zip(files: list[tuple[str, bytes]]) -> bytes:
    """The engine as one reproducible zip (importable with zipimport) for Harbor's verifier."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- harbor


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_string(v) for v in values) + "]"


# What the bundled grader reads to reach a judge (grading.engine.JudgeConfig.from_env). A task with judge
# checks names them in [verifier.env] as Harbor templates, resolved from the host's environment when the
# verifier runs (empty when unset: then the judge checks are unscored); a value is never written.
JUDGE_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GYMWRIGHT_JUDGE_MODEL", "GYMWRIGHT_JUDGE_MAX_CHARS")


def harbor_task_toml(document: dict, *, info: PackInfo, difficulty: str, sha256: str) -> str:
    """Harbor's task.toml (schema 1.4, as `harbor init` writes it) with a separate verifier that
    receives the agent's /workspace as an artifact, so grading never shares the agent's sandbox.
    A task with judge checks passes the judge settings to the verifier by name and lets the verifier
    (not the agent) reach the network."""
    environment = document.get("environment") or {}
    limits = environment.get("limits") or {}
    timeout = float(limits.get("timeout_s") or 600)
    network = "no-network" if (environment.get("network") or "none") == "none" else "public"
    judged = has_judge_checks(document.get("rubric") or {})
    verifier = [
        "[verifier]",
        f"timeout_sec = {max(120.0, min(timeout, 3600.0))}",
        'environment_mode = "separate"',
    ]
    if judged and network == "no-network":
        verifier.append('network_mode = "public"')  # the judge's endpoint; the agent's phase keeps none
    if judged:
        verifier += ["", "[verifier.env]"] + [f'{name} = "${{{name}:-}}"' for name in JUDGE_ENV]
    lines = [
        'schema_version = "1.4"',
        'artifacts = ["/workspace"]',
        "",
        "[task]",
        f"name = {_toml_string('gymwright/' + document['id'])}",
        f"version = {_toml_string(str(int(document.get('version') or 1)) + '.0.0')}",
        f"description = {_toml_string(document.get('title') or document['id'])}",
        "authors = []",
        f"keywords = {_toml_list(document.get('tags') or [])}",
        "",
        "[metadata]",
        f"difficulty = {_toml_string(difficulty)}",
        f"category = {_toml_string(environment.get('id') or 'default')}",
        f"gymwright_task_id = {_toml_string(document['id'])}",
        f"gymwright_task_version = {int(document.get('version') or 1)}",
        f"gymwright_task_sha256 = {_toml_string(sha256)}",
        f"gymwright_pack = {_toml_string(info.slug + ' ' + info.version)}",
        "",
        *verifier,
        "",
        "[agent]",
        f"timeout_sec = {timeout}",
        "",
        "[environment]",
        f'network_mode = "{network}"',
        "build_timeout_sec = 600.0",
        f"cpus = {int(max(1, round(float(limits.get('cpus') or 1))))}",
        f"memory_mb = {int(limits.get('memory_mb') or 2048)}",
        'os = "linux"',
        "",
    ]
    return "\n".join(lines)


VERIFIER_DOCKERFILE = """FROM python:3.12-slim
# The verifier's own image: the pack's grader and its dependencies, baked in (no downloads at trial time).
COPY . /tests/
RUN pip install --no-cache-dir -r /tests/requirements.txt
WORKDIR /workspace
"""


SETUP_SCRIPT = "/tmp/gymwright-setup.sh"


def harbor_dockerfile(document: dict, *, has_workspace_files: bool, has_env_files: bool) -> str:
    """The agent's image: the environment's image or Dockerfile, its files (/env, /workspace), then its
    setup script (environment/setup.sh), run whole by /bin/sh in /workspace as the sandbox runs it: a
    script's comments, loops and continued lines mean what they mean there."""
    environment = document.get("environment") or {}
    if environment.get("dockerfile"):
        head = environment["dockerfile"].rstrip("\n")
    else:
        head = f"FROM {environment.get('image') or 'python:3.12-slim'}"
    lines = [head, "WORKDIR /workspace"]
    if has_env_files:
        lines.append("COPY env/ /env/")
    if has_workspace_files:
        lines.append("COPY workspace/ /workspace/")
    if environment.get("setup"):
        lines += [f"COPY setup.sh {SETUP_SCRIPT}", f"RUN /bin/sh {SETUP_SCRIPT} && rm -f {SETUP_SCRIPT}"]
    return "\n".join(lines) + "\n"


def harbor_instruction(document: dict) -> str:
    """The prompt, where to work and answer, and the environment's custom tools, which Gymwright's
    harness offers as tools and a Harbor agent calls from its shell."""
    prompt = document.get("prompt") or ""
    text = (
        prompt.rstrip("\n") + "\n\n---\n\nWork in `/workspace`. When you are done, write your final answer "
        "to `/workspace/answer.txt`.\n"
    )
    tools = (document.get("environment") or {}).get("custom_tools") or []
    if tools:
        text += (
            "\nThis environment has these tools. Call one by running its command with the call's arguments "
            "as a JSON object on standard input; its standard output is the result.\n\n"
        )
        for tool in tools:
            text += (
                f"- `{tool['name']}`: {(tool.get('description') or '').strip() or 'no description'}\n"
                f"  - command: `{tool['command']}`\n"
                f"  - arguments (JSON Schema): `{canonical_json(tool.get('parameters') or {})}`\n"
            )
    return text


def harbor_solve(document: dict) -> str:
    solution = document.get("solution") or {}
    lines = ["#!/bin/bash", "# The task's reference solution.", "set -euo pipefail", "cd /workspace"]
    if solution.get("script"):
        lines.append(solution["script"])
    if solution.get("answer") is not None:
        lines.append("cat > /workspace/answer.txt <<'GYMWRIGHT_ANSWER_EOF'")
        lines.append(solution["answer"])
        lines.append("GYMWRIGHT_ANSWER_EOF")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- parquet


def _parquet_schema():
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(message)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("task_id", pa.string()),
                        ("version", pa.int64()),
                        ("sha256", pa.string()),
                        ("environment", pa.string()),
                        ("tools", pa.list_(pa.string())),
                        ("split", pa.string()),
                        ("index", pa.int64()),
                        ("response_only", pa.bool_()),
                    ]
                ),
            ),
        ]
    )


class _SplitWriter:
    """One parquet file written in row batches. Each batch reaches pyarrow as JSON lines read by its
    JSON reader against the schema: the same table and the same file bytes as `Table.from_pylist`
    (a test compares them), without converting every value through Python objects, and without
    pandas, which pyarrow imports for any array built from a Python list (0.4 s of a build's
    start). A pandas frame cost 3× more again and gave nothing: the schema carries no pandas
    metadata."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[bytes] = []
        self.size = 0
        self.count = 0
        self.writer = None

    def add(self, row: dict) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.lines.append(line)
        self.size += len(line) + 1
        self.count += 1
        if len(self.lines) >= PARQUET_BATCH or self.size >= PARQUET_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        import pyarrow.json as pa_json
        import pyarrow.parquet as pq

        schema = _parquet_schema()
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, schema, compression="zstd")
        if self.lines:
            data = b"\n".join(self.lines) + b"\n"
            # one block for the batch: a row must fit in a block, and any row fits this one
            table = pa_json.read_json(
                io.BytesIO(data),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
                parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
            )
            self.writer.write_table(table)
            self.lines, self.size = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


def parquet_row(document: dict, *, sha256: str, info: PackInfo, split: str, index: int) -> dict:
    environment = document.get("environment") or {}
    return {
        "data_source": f"gymwright/{info.slug}",
        "prompt": [{"role": "user", "content": document.get("prompt") or ""}],
        "ability": environment.get("id") or "default",
        "reward_model": {"style": "rubric", "ground_truth": document["id"]},
        "extra_info": {
            "task_id": document["id"],
            "version": int(document.get("version") or 1),
            "sha256": sha256,
            "environment": environment.get("id") or "default",
            "tools": list(environment.get("tools") or []),
            # Always true: a task whose rubric needs its episode has no parquet row (response_only_task).
            "split": split,
            "index": index,
            "response_only": True,
        },
    }


def response_only_task(document: dict) -> bool:
    """Whether a response alone grades the task: every check of its rubric reads the answer (none reads the
    agent's files, runs in its sandbox or reads its trajectory: `episode_checks`). Only such tasks have rows
    in data/*.parquet, which trainers' reward functions grade from the response text; the others ship as
    Harbor tasks (tasks/<id>/), whose verifier grades the whole episode. Graded from a sentence, their
    episode checks would be unscored and a reply that skipped the work would earn their reward's rest."""
    return not episode_checks(document.get("rubric"))


# ---------------------------------------------------------------------------------------------- dataset card


def _empty_split_note(counts: dict) -> str:
    empty = empty_split(counts["parquet"])
    if empty is None:
        return ""
    if not counts[empty]:
        head = f"**The {empty} split is empty**: no task's id hashed into it at this ratio"
    else:
        head = (
            f"**The {empty} split of `data/*.parquet` is empty**: its {counts[empty]} "
            f"task{' needs' if counts[empty] == 1 else 's need'} the agent's episode (Harbor only, below)"
        )
    return f"\n\n{head}. " + (
        "Evaluate on `train` (Inspect: `-T split=train`; verl, which refuses an empty validation set: "
        "`data.val_files=$PWD/data/train.parquet`), or build the pack with another test ratio."
        if empty == "test"
        else "Train on `test`, or build the pack with another test ratio."
    )


# Hugging Face's licence identifiers (https://huggingface.co/docs/hub/repositories-licenses) that a pack's
# SPDX-style licence may name; any other licence is `other`, with its name.
HF_LICENCES = frozenset(
    (
        "apache-2.0",
        "mit",
        "openrail",
        "bigscience-openrail-m",
        "creativeml-openrail-m",
        "bigscience-bloom-rail-1.0",
        "bigcode-openrail-m",
        "afl-3.0",
        "artistic-2.0",
        "bsl-1.0",
        "bsd",
        "bsd-2-clause",
        "bsd-3-clause",
        "bsd-3-clause-clear",
        "c-uda",
        "cc",
        "cc0-1.0",
        "cc-by-2.0",
        "cc-by-2.5",
        "cc-by-3.0",
        "cc-by-4.0",
        "cc-by-sa-3.0",
        "cc-by-sa-4.0",
        "cc-by-nc-2.0",
        "cc-by-nc-3.0",
        "cc-by-nc-4.0",
        "cc-by-nd-4.0",
        "cc-by-nc-nd-3.0",
        "cc-by-nc-nd-4.0",
        "cc-by-nc-sa-2.0",
        "cc-by-nc-sa-3.0",
        "cc-by-nc-sa-4.0",
        "cdla-sharing-1.0",
        "cdla-permissive-1.0",
        "cdla-permissive-2.0",
        "wtfpl",
        "ecl-2.0",
        "epl-1.0",
        "epl-2.0",
        "eupl-1.1",
        "agpl-3.0",
        "gfdl",
        "gpl",
        "gpl-2.0",
        "gpl-3.0",
        "lgpl",
        "lgpl-2.1",
        "lgpl-3.0",
        "isc",
        "lppl-1.3c",
        "ms-pl",
        "mpl-2.0",
        "odc-by",
        "odbl",
        "openrail++",
        "osl-3.0",
        "postgresql",
        "ofl-1.1",
        "ncsa",
        "unlicense",
        "zlib",
        "pddl",
        "lgpl-lr",
        "deepfloyd-if-license",
        "llama2",
        "llama3",
        "llama3.1",
        "llama3.2",
        "llama3.3",
        "gemma",
        "unknown",
        "other",
    )
)
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)


def _yaml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def card_front_matter(*, info: PackInfo, counts: dict) -> str:
    """The Hugging Face dataset card's YAML header: licence, name, categories, size, and the parquet
    splits as the `default` config, so that `datasets.load_dataset(<unpacked pack>)` reads them. A split
    with no parquet rows is left out: `datasets` refuses a split with no rows."""
    licence = (info.licence or "").strip().lower()
    lines = ["---"]
    if licence in HF_LICENCES:
        lines.append(f"license: {licence}")
    else:
        name = (
            "-".join(
                part for part in "".join(c if c.isalnum() or c in ".-" else "-" for c in licence).split("-") if part
            )
            or "unknown"
        )
        lines += ["license: other", f"license_name: {_yaml_string(name)}"]
    size = next((label for bound, label in SIZE_CATEGORIES if counts["tasks"] < bound), "n>10M")
    splits = [name for name in ("train", "test") if counts["parquet"][name]] or ["train"]
    lines += [
        f"pretty_name: {_yaml_string(info.name)}",
        "task_categories:",
        "- text-generation",
        "- reinforcement-learning",
        "tags:",
        "- gymwright",
        "- rubric",
        "- agents",
        "- rl-environments",
        "size_categories:",
        f"- {size}",
        "configs:",
        "- config_name: default",
        "  data_files:",
    ]
    for name in splits:
        lines += [f"  - split: {name}", f"    path: data/{name}.parquet"]
    return "\n".join(lines + ["---", ""])


def _harbor_only_note(counts: dict, harbor_only: list[str]) -> str:
    if not harbor_only:
        return ""
    shown = ", ".join(f"`{task_id}`" for task_id in harbor_only[:HARBOR_ONLY_SHOWN])
    more = f" and {len(harbor_only) - HARBOR_ONLY_SHOWN} more" if len(harbor_only) > HARBOR_ONLY_SHOWN else ""
    parquet = counts["parquet"]["train"] + counts["parquet"]["test"]
    return f"""
**{len(harbor_only)} of {counts["tasks"]} tasks are Harbor tasks only, not rows of `data/*.parquet`** ({shown}{more}):
their rubrics check the agent's workspace files, run commands or python checks in its sandbox, or read its
trajectory, which no reward function can grade from a response. Graded from the response text, those checks
would be left out and a reply that skipped the work would earn the rest, so the parquet files (and
`inspect_task.py`) hold only the {parquet} task{"" if parquet == 1 else "s"} that a response alone grades.
Run the others as Harbor tasks (`tasks/<id>/`), whose verifier grades the whole episode in a sandbox.
"""


def dataset_card(
    *, info: PackInfo, counts: dict, histogram: Counter, environments: Counter, harbor_only: list[str] = ()
) -> str:
    top = f"{info.slug}-{info.version}"
    parquet = counts["parquet"]
    val = "test" if parquet["test"] else "train"  # verl refuses an empty validation set
    inspect_split = (
        "            # the test split; -T split=all for every task"
        if parquet["test"]
        else " -T split=train   # the test split is empty"
    )
    rows = "\n".join(f"| {name} | {histogram.get(name, 0)} |" for name in DIFFICULTY_BINS)
    environment_rows = "\n".join(f"| {name} | {count} |" for name, count in sorted(environments.items()))
    low, high = DEFAULT_BAND
    return (
        card_front_matter(info=info, counts=counts)
        + f"""
# {info.name} — version {info.version}

{info.description or "A Gymwright task pack."}

Tasks written and reviewed in Gymwright, exported as an immutable pack: each task is a prompt,
the sandbox it runs in, a reference solution and a rubric of checks. `manifest.json` pins every
task version and the sha256 of every file (Gymwright's `manage.py verify_pack {top}.tar.gz` checks the
archive; any sha256 tool checks the unpacked files).

## Counts

| split | tasks | in data/*.parquet (graded from a response) |
| --- | --- | --- |
| train | {counts["train"]} | {parquet["train"]} |
| test | {counts["test"]} | {parquet["test"]} |
| total | {counts["tasks"]} | {parquet["train"] + parquet["test"]} |

Held-out split: a stable hash of the task id (test ratio {info.test_ratio:g}); a task stays in
the same split in every version of the pack.{_empty_split_note(counts)}

| environment | tasks |
| --- | --- |
{environment_rows or "| (none) | 0 |"}

## Difficulty

From each task's last model preview (`calibration.json`; not previewed = no model was previewed on it: oracle,
nop and probe previews check a task, they do not measure its difficulty): unsolved = no
rollout passed, hard = pass rate below {low:.0%}, in band = {low:.0%}–{high:.0%}, easy = above {high:.0%}.

| difficulty | tasks |
| --- | --- |
{rows}

## Files

- `tasks.jsonl`: one `{TASK_SCHEMA}` document per line (re-importable into Gymwright).
- `data/train.parquet`, `data/test.parquet`: the tasks a response alone grades, as verl RLHFDataset
  columns (`data_source`, `prompt` as chat messages, `ability`, `reward_model` = {{"style": "rubric",
  "ground_truth": task id}}, `extra_info`).
- `tasks/<id>/`: Harbor task folders for every task (instruction.md, task.toml, environment/, solution/, tests/).
- `grader/`: the grading engine that graded the previews (`pip install -r grader/requirements.txt`).
- `reward.py`: reward functions for verl and TRL.
- `inspect_task.py`: an Inspect task over the pack, scored by the same grader.
- `calibration.json`: per task, the last model preview's policy, n, pass rate, pass@k, mean reward.

## Use it

Unpack: `tar xzf {top}.tar.gz && cd {top}`. Judge checks call the OpenAI-compatible endpoint
in `OPENAI_BASE_URL` / `OPENAI_API_KEY` with the model in `GYMWRIGHT_JUDGE_MODEL`; without one
they are unscored (the reward says so) and the reward covers the other checks.
{_harbor_only_note(counts, harbor_only)}
Hugging Face `datasets`: `load_dataset("path/to/{top}")` gives the splits above (those with tasks),
from the header of this card (a path that names the folder: `datasets` cannot name a dataset `"."`).

verl (0.9; verl's own config keys, `reward.custom_reward_function`, which main_ppo reads):

```sh
python -m verl.trainer.main_ppo data.train_files=$PWD/data/train.parquet data.val_files=$PWD/data/{val}.parquet \\
  reward.custom_reward_function.path=$PWD/reward.py reward.custom_reward_function.name=compute_score ...
```

`compute_score` returns numbers only, the same for every response (verl stacks each into an array
over the batch and logs its mean): `score` (the reward: an incomplete grade's lower bound),
`score_upper` (the reward had every unscored check been met), `passed`, `complete`, `gated` (0 or 1) and
`unscored` (how many checks could not be scored, e.g. judge checks without a judge;
`reward.grade_response(task_id, text)` names them). Any response string gets a score.

TRL (1.16, GRPO):

```python
import sys; sys.path.insert(0, ".")
from datasets import load_dataset
from reward import trl_reward
from trl import GRPOConfig, GRPOTrainer
train = load_dataset("parquet", data_files={{"train": "data/train.parquet"}})["train"]
trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=trl_reward,
                      args=GRPOConfig(output_dir="out"), train_dataset=train)
```

`trl_reward` gives `None` to a completion none of whose checks could be scored (TRL gives it no
advantage) and logs `gymwright/incomplete` and `gymwright/unscorable`.

Harbor: `harbor run -p tasks/<id> -a <agent> -m <model>` (each folder passes `harbor lint`). The
verifier runs in its own container (`tests/Dockerfile`, the agent's `/workspace` arrives as an
artifact); `tests/test.sh` runs the bundled grader and writes `/logs/verifier/reward.json`
(`reward`, `passed`, `complete`, `unscored`) and `reward.txt`. A task with judge checks passes
`OPENAI_BASE_URL`, `OPENAI_API_KEY` and `GYMWRIGHT_JUDGE_MODEL` from the host to its verifier
(`[verifier.env]`, by name) and gives the verifier network access to reach the judge.

Inspect (`pip install inspect_ai openai -r grader/requirements.txt`):

```sh
inspect eval inspect_task.py --model openai/<model>{inspect_split}
inspect eval inspect_task.py --model openai-api/vllm/<model>   # an OpenAI-compatible server: VLLM_BASE_URL, VLLM_API_KEY
```

Each task is a sample; the score is the rubric's reward (mean and stderr over samples).

## Licence

{info.licence}

## Canary

Evaluation data: do not train on the test split. canary GUID {canary_guid(info.slug)}
"""
    )


# ---------------------------------------------------------------------------------------------- build


def _task_files(document: dict) -> Iterator[tuple[str, str, str, str]]:
    """(where, path, sha256, role) for every file a task names; where is 'task' or 'env'."""
    for entry in (document.get("environment") or {}).get("files") or []:
        yield "env", entry["path"], entry["sha256"], entry.get("role") or "workspace"
    for entry in document.get("files") or []:
        yield "task", entry["path"], entry["sha256"], entry.get("role") or "workspace"


def build_pack(
    *,
    out: BinaryIO | str | Path,
    info: PackInfo,
    tasks: Iterable[TaskItem],
    read_blob: Callable[[str], bytes],
    scratch_dir: str | Path,
    build_record: dict | None = None,
    progress: Callable[[int], None] | None = None,
) -> BuildResult:
    """Write the pack for `tasks` (sorted by task id, each id once) as a .tar.gz to `out`.

    One pass over the tasks, streaming: each task's line of tasks.jsonl, its parquet row and its
    calibration are written to `scratch_dir`, while a second process (`_Renderer`) renders its
    Harbor folder once, hashes its files and writes them as compressed tar entries to a spool file
    there: the build's two halves on two cores. Then the manifest (which needs every digest) and the
    dataset card are written, and the archive is assembled in path order: the top files, then the
    spooled task folders, joined into one gzip stream. Files shared by every task (the grader, the
    verifier scripts) are stored once and hard-linked.
    `read_blob(sha256)` returns a file's bytes. `progress(done)` is called as tasks are written
    and as the archive is compressed (it may raise BuildCancelled). `scratch_dir` must be a
    folder this build owns; what the build writes there is removed at the end. Raises PackError
    for bad input.
    """
    top = f"{info.slug}-{info.version}"
    scratch_dir = Path(scratch_dir)
    root = scratch_dir / top
    spool_path = scratch_dir / f"{top}.tasks.tar.deflate"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    renderer = None
    try:
        renderer = _Renderer(top=top, info=info, spool_path=spool_path, log_path=scratch_dir / f"{top}.renderer.log")
        manifest, spool = _write_tasks(
            root=root, top=top, info=info, tasks=tasks, read_blob=read_blob, renderer=renderer, progress=progress
        )
        manifest["build"] = dict(build_record or {})
        (root / "manifest.json").write_bytes(_indented_json(manifest))
        sha256, size = _write_tar(
            root=root, top=top, out=out, spool=spool, total=len(manifest["tasks"]), progress=progress
        )
        return BuildResult(manifest=manifest, sha256=sha256, size=size, content_sha256=manifest["content_sha256"])
    finally:
        if renderer is not None:
            renderer.stop()
        shutil.rmtree(root, ignore_errors=True)
        spool_path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- renderer

RENDER_BATCH = 64  # tasks per message to the renderer
PIPE_BYTES = 1 << 20
_CODE_ROOT = Path(__file__).resolve().parent.parent  # where `packs` and `grading` import from


@dataclasses.dataclass
class _Spool:
    """The renderer's output: the task folders as raw deflate, and the digest of every file in them."""

    path: Path
    crc: int  # CRC-32 of the uncompressed tar entries
    size: int  # their length
    digests: dict[str, str]
    requirements: bytes  # grader/requirements.txt and grader/grader.pyz, made by the renderer from the
    grader_pyz: bytes  # engine files it was sent


class _Renderer:
    """A second process that renders the task folders: each task's Harbor files, their digests,
    their tar entries, compressed, and the grader's zip and requirements. This process meanwhile
    reads the tasks, writes tasks.jsonl, the calibration and the parquet splits, and renders each
    rubric.json, which evens out the two processes' shares (profiled with py-spy on both), as `tar
    czf` is two processes too. Messages are plain
    data (`marshal`: no code can ride along) over a pipe, whose bounded buffer holds this process
    back when the renderer falls behind, so memory stays flat."""

    def __init__(self, *, top: str, info: PackInfo, spool_path: Path, log_path: Path):
        self.top, self.info, self.spool_path = top, info, spool_path
        self.log = open(log_path, "w+b")
        self.log_path = log_path
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": str(_CODE_ROOT) + (os.pathsep + path if path else "")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from packs.archive import _render_main; _render_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
        )
        try:  # a deeper pipe than the default 64 KiB, so that neither side waits on the other's pace per batch
            import fcntl

            fcntl.fcntl(self.process.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (ImportError, AttributeError, OSError):  # not Linux, or above /proc/sys/fs/pipe-max-size
            pass
        self.batch: list[tuple] = []
        self.finished = False

    def _send(self, message) -> None:
        try:
            _send_message(self.process.stdin, message)
        except (BrokenPipeError, OSError):
            self._failed()

    def _failed(self):
        self.process.wait()
        self.log.seek(0)
        said = self.log.read().decode("utf-8", "replace").strip().splitlines()
        raise PackError(
            "rendering the task folders failed: " + (said[-1] if said else f"exit {self.process.returncode}")
        )

    def start(self, *, engine: list[tuple[str, bytes]]) -> None:
        """`engine`: the grader's files (`grader_files()`), which the renderer zips and reads the
        requirements of (half a second that would otherwise hold up the tasks)."""
        self._send(
            {"top": self.top, "info": dataclasses.asdict(self.info), "spool": str(self.spool_path), "engine": engine}
        )

    def add(self, task: tuple) -> None:
        """(document, sha256, difficulty, its canonical JSON line, its rubric.json, {sha256: bytes} of its files)"""
        self.batch.append(task)
        if len(self.batch) >= RENDER_BATCH:
            self._send(self.batch)
            self.batch = []

    def finish(self) -> _Spool:
        if self.batch:
            self._send(self.batch)
            self.batch = []
        self._send(None)
        self.process.stdin.close()
        try:
            result = _receive(self.process.stdout)
        except (EOFError, ValueError, TypeError):
            self._failed()
        # Its last message came whole: the build goes on while the process exits (stop() waits for it), which
        # freeing its tables of every file took 40 ms of the build's critical path.
        self.finished = True
        return _Spool(
            path=self.spool_path,
            crc=result["crc"],
            size=result["size"],
            digests=result["digests"],
            requirements=result["requirements"],
            grader_pyz=result["grader_pyz"],
        )

    def stop(self) -> None:
        """Wait for the renderer to exit after its last message, or end it if it still works (the build failed or
        was cancelled)."""
        if self.process.poll() is None:
            try:
                if self.finished:
                    self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass
        self.log.close()
        self.log_path.unlink(missing_ok=True)


def _send_message(sink, message) -> None:
    data = marshal.dumps(message)
    sink.write(struct.pack("<Q", len(data)) + data)
    sink.flush()


def _receive(source) -> Any:
    """One message (`_send_message`): its length, then its marshal bytes, read whole: marshal.load
    reads a file object a few bytes at a time (the renderer's last message, the digest of every file,
    took 0.15 s that way)."""
    head = source.read(8)
    if len(head) != 8:
        raise EOFError("the build process stopped")
    return marshal.loads(source.read(struct.unpack("<Q", head)[0]))


def _render_main() -> None:
    """The renderer process (`_Renderer`): its work from stdin, the spool's CRC, length and file
    digests to stdout."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    config = _receive(source)
    top, info = config["top"], PackInfo(**config["info"])
    engine = [tuple(file) for file in config["engine"]]
    requirements, grader_pyz = grader_requirements(engine).encode(), grader_zip(engine)
    shared = _Shared(requirements, grader_pyz)
    first = dict(shared.first)
    digests: dict[str, str] = {}
    with open(config["spool"], "wb") as handle:
        deflate = _DeflateSink(handle)
        spool = _TarWriter(deflate)
        while True:
            batch = _receive(source)
            if batch is None:
                break
            for document, sha256, difficulty, line, rubric_json, blobs in batch:
                _render_task(
                    spool=spool,
                    digests=digests,
                    first=first,
                    shared=shared,
                    top=top,
                    info=info,
                    document=document,
                    sha256=sha256,
                    difficulty=difficulty,
                    line=line,
                    rubric_json=rubric_json,
                    blobs=blobs,
                )
        spool.flush()
        deflate.close(final=False)
    _send_message(
        sink,
        {
            "crc": deflate.crc,
            "size": deflate.size,
            "digests": digests,
            "requirements": requirements,
            "grader_pyz": grader_pyz,
        },
    )


# The share of the progress bar for writing the tasks; the rest is compressing the archive.
WRITE_SHARE = 0.8


class _Shared:
    """The bytes every Harbor task folder carries, with their digests computed once."""

    def __init__(self, requirements: bytes, grader_pyz: bytes):
        self.files = {
            "tests/Dockerfile": VERIFIER_DOCKERFILE.encode(),
            "tests/grade.py": (BUNDLE_DIR / "harbor_grade.py").read_bytes(),
            "tests/grader.pyz": grader_pyz,
            "tests/requirements.txt": requirements,
            "tests/test.sh": (BUNDLE_DIR / "test.sh").read_bytes(),
        }
        self.digests = {name: _sha256(data) for name, data in self.files.items()}
        self.executable = {"tests/test.sh"}
        # where each shared file is stored once: the grader's own copies, else the first task's
        self.first = {"tests/grader.pyz": "grader/grader.pyz", "tests/requirements.txt": "grader/requirements.txt"}


def _write_tasks(
    *, root: Path, top: str, info: PackInfo, tasks: Iterable[TaskItem], read_blob, renderer: _Renderer, progress
) -> tuple[dict, _Spool]:
    """The top files under `root`, every task's Harbor folder through `renderer`; the manifest and the spool."""
    scratch = _Scratch(root)
    engine = grader_files()
    renderer.start(engine=engine)
    for name, data in engine:
        scratch.write(f"grader/{name}", data)
    scratch.write("reward.py", (BUNDLE_DIR / "reward.py").read_bytes())
    scratch.write("inspect_task.py", (BUNDLE_DIR / "inspect_task.py").read_bytes())

    splits = {name: _SplitWriter(root / "data" / f"{name}.parquet") for name in ("train", "test")}
    histogram: Counter = Counter()
    environments: Counter = Counter()
    harbor_only: list[str] = []
    entries: list[dict] = []
    previous_id = None
    with open(root / "tasks.jsonl", "wb") as jsonl, open(root / "calibration.json", "wb") as calibration_file:
        calibration_file.write(b'{"schema": "gymwright.calibration/v1", "tasks": {')
        for done, item in enumerate(tasks, start=1):
            document = item.document
            task_id = document.get("id")
            if not isinstance(task_id, str) or not task_id:
                raise PackError(f"task number {done} has no id")
            if previous_id is not None and task_id <= previous_id:
                raise PackError(f"task {task_id!r} is duplicated or out of order (after {previous_id!r})")
            previous_id = task_id
            split = split_of(task_id, info.test_ratio)
            difficulty = difficulty_of(item.calibration)
            histogram[difficulty] += 1
            environments[(document.get("environment") or {}).get("id") or "default"] += 1
            entries.append(
                {"id": task_id, "version": int(document.get("version") or 1), "sha256": item.sha256, "split": split}
            )
            if response_only_task(document):
                splits[split].add(
                    parquet_row(document, sha256=item.sha256, info=info, split=split, index=splits[split].count)
                )
            else:
                harbor_only.append(task_id)
            blobs = {}
            for _, path, sha256, _ in _task_files(document):
                if sha256 not in blobs:
                    data = read_blob(sha256)
                    if _sha256(data) != sha256:
                        raise PackError(f"task {task_id}: file {path!r} does not match its sha256")
                    blobs[sha256] = data
            line = canonical_json(document).encode("utf-8")  # tasks.jsonl and tests/task.json: serialised once
            jsonl.write(line + b"\n")
            calibration_file.write(
                (b"" if done == 1 else b",")
                + b"\n"
                + json.dumps(task_id).encode()
                + b": "
                + canonical_json(item.calibration).encode()
            )
            # rubric.json is rendered here: it evens out the two processes' shares
            rubric_json = _indented_json(document.get("rubric"))
            renderer.add((document, item.sha256, difficulty, line, rubric_json, blobs))
            if progress is not None:
                progress(int(done * WRITE_SHARE))
        calibration_file.write(b"\n}}\n")
    for writer in splits.values():
        writer.close()
    # what needs only this process's files first, while the renderer works off what it was sent
    for name in ("tasks.jsonl", "calibration.json", "data/train.parquet", "data/test.parquet"):
        scratch.add_existing(name)
    split_counts = Counter(entry["split"] for entry in entries)
    counts = {
        "tasks": len(entries),
        "train": split_counts["train"],
        "test": split_counts["test"],
        "parquet": {"train": splits["train"].count, "test": splits["test"].count},
    }
    scratch.write(
        "README.md",
        dataset_card(
            info=info, counts=counts, histogram=histogram, environments=environments, harbor_only=harbor_only
        ).encode("utf-8"),
    )
    spool = renderer.finish()
    scratch.write("grader/requirements.txt", spool.requirements)
    scratch.write("grader/grader.pyz", spool.grader_pyz)
    scratch.digests.update(spool.digests)
    manifest = {
        "schema": PACK_SCHEMA,
        "name": info.name,
        "slug": info.slug,
        "version": info.version,
        "description": info.description,
        "licence": info.licence,
        "gymwright_version": info.gymwright_version,
        "schemas": {"task": TASK_SCHEMA, "rubric": RUBRIC_SCHEMA, "grade": GRADE_SCHEMA},
        "counts": counts,
        "test_ratio": info.test_ratio,
        "difficulty": {name: histogram.get(name, 0) for name in DIFFICULTY_BINS},
        "canary": canary_guid(info.slug),
        "tasks": entries,
        "files": dict(sorted(scratch.digests.items())),
    }
    manifest["content_sha256"] = _manifest_digest(manifest)
    return manifest, spool


def _render_task(
    *,
    spool: _TarWriter,
    digests: dict,
    first: dict,
    shared: _Shared,
    top: str,
    info: PackInfo,
    document: dict,
    sha256: str,
    difficulty: str,
    line: bytes,
    rubric_json: bytes,
    blobs: dict,
) -> None:
    """One task's Harbor folder as tar entries into `spool`, each file's digest into `digests`; files
    shared by every task are stored in the first and hard-linked from the others (`first`)."""
    task_id = document["id"]
    items = [
        (relative, data, executable, digest, None)
        for relative, data, executable, digest in _harbor_files(
            document,
            sha256_of_task=sha256,
            info=info,
            difficulty=difficulty,
            read_blob=blobs.__getitem__,
            task_json=line,
            rubric_json=rubric_json,
        )
    ]
    items += [
        (f"tasks/{task_id}/{name}", data, name in shared.executable, shared.digests[name], name)
        for name, data in shared.files.items()
    ]
    items.sort(key=lambda entry: _path_key(entry[0]))
    for relative, data, executable, digest, shared_name in items:
        digests[relative] = digest or _sha256(data)
        arcname = f"{top}/{relative}"
        if shared_name is not None and shared_name in first:
            spool.add_link(arcname, f"{top}/{first[shared_name]}", executable=executable)
            continue
        if shared_name is not None:
            first[shared_name] = relative
        spool.add_bytes(arcname, data, executable=executable)


def _harbor_files(
    document: dict,
    *,
    sha256_of_task: str,
    info: PackInfo,
    difficulty: str,
    read_blob,
    task_json: bytes,
    rubric_json: bytes,
) -> list[tuple[str, bytes, bool, str | None]]:
    """A task's own Harbor files as (path in the pack, bytes, executable, sha256 when already known).
    `task_json` is the task's canonical JSON (tests/task.json), `rubric_json` its rubric.json."""
    base = f"tasks/{document['id']}"
    files: list[tuple[str, bytes, bool, str | None]] = []
    has_env = has_workspace = False
    for where, path, sha256, role in _task_files(document):
        data = read_blob(sha256)
        if _sha256(data) != sha256:
            raise PackError(f"task {document['id']}: file {path!r} does not match its sha256")
        if where == "env":
            # Under /env in the verifier too (its own image), for the checks; a grader-role one only there.
            files.append((f"{base}/tests/env-files/{path}", data, False, sha256))
            if role != "grader":
                files.append((f"{base}/environment/env/{path}", data, False, sha256))
                has_env = True
            continue
        files.append((f"{base}/files/{path}", data, False, sha256))
        if role in ("grader", "protected"):
            # Restored by the verifier after the episode (protected ones over the agent's copy).
            files.append((f"{base}/tests/grader-files/{path}", data, False, sha256))
        if role != "grader":
            files.append((f"{base}/environment/workspace/{path}", data, False, sha256))
            has_workspace = True
    files += [
        (f"{base}/instruction.md", harbor_instruction(document).encode("utf-8"), False, None),
        (
            f"{base}/task.toml",
            harbor_task_toml(document, info=info, difficulty=difficulty, sha256=sha256_of_task).encode("utf-8"),
            False,
            None,
        ),
        (
            f"{base}/environment/Dockerfile",
            harbor_dockerfile(document, has_workspace_files=has_workspace, has_env_files=has_env).encode(),
            False,
            None,
        ),
        (f"{base}/solution/solve.sh", harbor_solve(document).encode("utf-8"), True, None),
        *(
            [(f"{base}/environment/setup.sh", document["environment"]["setup"].encode("utf-8"), False, None)]
            if (document.get("environment") or {}).get("setup")
            else []
        ),
        (f"{base}/rubric.json", rubric_json, False, None),
        (f"{base}/tests/task.json", task_json, False, None),
    ]
    return files


def _path_key(relative: str) -> list[str]:
    return relative.split("/")


# The level is not part of the format (the manifest's digests are over the unpacked files), but
# level 1 does not pay here: measured side by side on 3,000 tasks the whole build took 1.7–2.3 s
# of CPU at level 1 against 2.0 s at level 6 (the archive is mostly tar headers, zero padding and
# repeated text, which deflate matches quickly at any level), for an archive 41 % larger.
COMPRESSLEVEL = 6
COPY_CHUNK = 1 << 20


def _write_tar(*, root: Path, top: str, out, spool: _Spool, total: int, progress) -> tuple[str, int]:
    """The reproducible .tar.gz: entries in path order (component by component; the task folders,
    spooled in that order, last), fixed mtimes, uid/gid 0, no names, gzip without timestamp or
    file name. One gzip member whose deflate stream is three pieces compressed apart: the top files
    (here), the spooled task folders (by the renderer), the end of the tar. Returns (sha256, size)."""
    own = not hasattr(out, "write")
    handle = open(out, "wb") if own else out
    hashing = _HashingWriter(handle)
    try:
        hashing.write(_GZIP_HEADER)
        head = _DeflateSink(hashing)
        tar = _TarWriter(head)
        names = sorted((path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()), key=_path_key)
        for relative in names:
            tar.add_bytes(f"{top}/{relative}", (root / relative).read_bytes(), executable=False)
        tar.flush()
        head.close(final=False)
        compressed = spool.path.stat().st_size
        copied = 0
        with open(spool.path, "rb") as spooled:
            while chunk := spooled.read(COPY_CHUNK):
                hashing.write(chunk)
                copied += len(chunk)
                if progress is not None:
                    progress(int(total * WRITE_SHARE + total * (1 - WRITE_SHARE) * copied / max(1, compressed)))
        tail = _DeflateSink(hashing)
        tail.write(_tar_end(tar.offset + spool.size))
        tail.close(final=True)
        crc = crc32_combine(crc32_combine(head.crc, spool.crc, spool.size), tail.crc, tail.size)
        hashing.write(struct.pack("<II", crc, (head.size + spool.size + tail.size) & 0xFFFFFFFF))
    finally:
        if own:
            handle.close()
    return hashing.digest.hexdigest(), hashing.size


# What gzip.GzipFile(filename="", mtime=0) writes at level 6: deflate, no flags, no timestamp, no
# extra flags, OS unknown.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


class _DeflateSink:
    """Raw deflate to a binary handle, with the CRC-32 and length of what went in. Pieces compressed
    apart (the last one closed final, the others with a sync flush) are one valid deflate stream
    when joined, as pigz joins its pieces; `crc32_combine` gives the whole one's CRC-32."""

    def __init__(self, handle):
        self.handle = handle
        self.compressor = zlib.compressobj(COMPRESSLEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
        self.crc = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.handle.write(self.compressor.compress(data))

    def close(self, *, final: bool) -> None:
        self.handle.write(self.compressor.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH))


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _gf2_square(matrix: list[int]) -> list[int]:
    return [_gf2_times(matrix, matrix[row]) for row in range(32)]


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc1 = crc32(A), crc2 = crc32(B) and len(B): zlib's crc32_combine
    (not in Python's zlib module), squaring the operator that appends a zero bit."""
    if length2 <= 0:
        return crc1
    operator = [0xEDB88320] + [1 << row for row in range(31)]  # appends one zero bit to a CRC's message
    operator = _gf2_square(_gf2_square(_gf2_square(operator)))  # one zero byte
    while length2:  # B's length in bytes, bit by bit: the operator for 1, 2, 4, ... bytes
        if length2 & 1:
            crc1 = _gf2_times(operator, crc1)
        length2 >>= 1
        if length2:
            operator = _gf2_square(operator)
    return crc1 ^ crc2


_NAME_MAX = 100  # longer names and link targets take tarfile's GNU long-name blocks
_ZERO_ID = b"0000000\0"
_MTIME_FIELD = b"%011o\0" % FIXED_MTIME


def _tar_header(arcname: str, *, size: int, mode: int, typeflag: bytes, linkname: str = "") -> bytes:
    """The GNU-format header `tarfile` writes for an entry with our fixed metadata (mtime, uid/gid 0,
    no user names), byte for byte, without a TarInfo, its copy and its field-by-field packing: the
    fields that never change per mode and type are joined and summed once (110,000 entries a pack)."""
    name = arcname.encode("utf-8", "surrogateescape")
    link = linkname.encode("utf-8", "surrogateescape")
    if len(name) > _NAME_MAX or len(link) > _NAME_MAX or size >= 8**11:
        info = _tar_info(arcname)
        info.mode, info.size, info.type, info.linkname = mode, size, typeflag, linkname
        return info.tobuf(tarfile.GNU_FORMAT, tarfile.ENCODING, "surrogateescape")
    fixed = _HEADER_FIXED.get((mode, typeflag))
    if fixed is None:
        ids = b"%07o\0" % (mode & 0o7777) + _ZERO_ID + _ZERO_ID
        # the checksum counts its own field as eight spaces
        fixed = _HEADER_FIXED[(mode, typeflag)] = (ids, sum(ids + _MTIME_FIELD + b"        " + typeflag + _GNU_TAIL))
    size_field = b"%011o\0" % size
    checksum = fixed[1] + sum(name) + sum(size_field) + sum(link)
    return b"".join(
        (
            name.ljust(100, b"\0"),
            fixed[0],
            size_field,
            _MTIME_FIELD,
            b"%06o\0 " % checksum,
            typeflag,
            link.ljust(100, b"\0"),
            _GNU_TAIL,
        )
    )


_GNU_TAIL = tarfile.GNU_MAGIC + bytes(247)
_HEADER_FIXED: dict[tuple[int, bytes], tuple[bytes, int]] = {}


def _tar_info(arcname: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname)
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _TarWriter:
    """Tar entries (regular files and hard links) to a binary handle, in large writes; `close`
    ends the archive as `tarfile` does (two zero blocks, then zeros to a 10240-byte record)."""

    def __init__(self, handle):
        self.handle = handle
        self.offset = 0
        self.parts: list[bytes] = []
        self.pending = 0

    def _put(self, data: bytes) -> None:
        self.parts.append(data)
        self.pending += len(data)
        self.offset += len(data)
        if self.pending >= COPY_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.handle.write(b"".join(self.parts))
            self.parts, self.pending = [], 0

    def add_bytes(self, arcname: str, data: bytes, *, executable: bool) -> None:
        self._put(_tar_header(arcname, size=len(data), mode=0o755 if executable else 0o644, typeflag=tarfile.REGTYPE))
        self._put(data)
        remainder = len(data) % tarfile.BLOCKSIZE
        if remainder:
            self._put(bytes(tarfile.BLOCKSIZE - remainder))

    def add_link(self, arcname: str, target: str, *, executable: bool) -> None:
        # extractors chmod the shared inode with the link's mode
        self._put(
            _tar_header(arcname, size=0, mode=0o755 if executable else 0o644, typeflag=tarfile.LNKTYPE, linkname=target)
        )

    def close(self) -> None:
        self._put(_tar_end(self.offset))
        self.flush()


def _tar_end(offset: int) -> bytes:
    """What `tarfile` ends an archive of `offset` bytes with: two zero blocks, then zeros to a
    10240-byte record."""
    end = tarfile.BLOCKSIZE * 2
    return bytes(end + (-(offset + end)) % tarfile.RECORDSIZE)


class _HashingWriter(io.RawIOBase):
    def __init__(self, handle):
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.handle.write(data)
        self.digest.update(data)
        self.size += len(data)
        return len(data)


# ---------------------------------------------------------------------------------------------- verify


@dataclasses.dataclass
class Verification:
    ok: bool
    problems: list[str]
    manifest: dict | None
    files_checked: int


def verify_pack(source: str | Path | BinaryIO, *, max_bytes: int = 8 << 30) -> Verification:
    """Check a pack archive: readable gzip/tar, safe member names, no links leaving the pack, every
    file's sha256 and the manifest's content_sha256. Streams; at most `max_bytes` are unpacked."""
    problems: list[str] = []
    digests: dict[str, str] = {}
    manifest_bytes = None
    top = None
    total = 0
    try:
        tar = (
            tarfile.open(source, mode="r:gz")
            if not hasattr(source, "read")
            else tarfile.open(fileobj=source, mode="r|gz")
        )
        with tar:
            names: dict[str, str] = {}
            for member in tar:
                name = member.name
                first, _, relative = name.partition("/")
                if top is None:
                    top = first
                if name.startswith("/") or ".." in name.split("/") or first != top:
                    problems.append(f"{name}: outside the pack folder")
                    continue
                if member.isdir():
                    continue
                if member.islnk():
                    target = member.linkname
                    if target not in names:
                        problems.append(f"{name}: hard link to {target!r}, which is not an earlier file of the pack")
                    else:
                        digests[relative] = names[target]
                    continue
                if not member.isfile():
                    problems.append(f"{name}: not a regular file (symlink, device or fifo)")
                    continue
                total += member.size
                if total > max_bytes:
                    problems.append(f"{name}: the pack unpacks to more than {max_bytes} bytes; stopped")
                    break
                handle = tar.extractfile(member)
                digest = hashlib.sha256()
                data = bytearray() if relative == "manifest.json" else None
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                    if data is not None and len(data) < (64 << 20):
                        data.extend(chunk)
                if data is not None:
                    manifest_bytes = bytes(data)
                digests[relative] = names[name] = digest.hexdigest()
    except (tarfile.TarError, OSError, EOFError, zlib_error()) as exc:
        problems.append(f"the archive is damaged: {exc}")
        return Verification(False, problems, None, len(digests))
    if manifest_bytes is None:
        problems.append("manifest.json: missing")
        return Verification(False, problems, None, len(digests))
    try:
        manifest = json.loads(manifest_bytes)
        listed = manifest["files"]
        assert isinstance(listed, dict)
    except (ValueError, KeyError, AssertionError, TypeError):
        problems.append("manifest.json: not a pack manifest")
        return Verification(False, problems, None, len(digests))
    digests.pop("manifest.json", None)
    for relative, expected in sorted(listed.items()):
        actual = digests.get(relative)
        if actual is None:
            problems.append(f"{relative}: listed in the manifest, missing from the archive")
        elif actual != expected:
            problems.append(f"{relative}: sha256 {actual} does not match the manifest's {expected}")
    for relative in sorted(set(digests) - set(listed)):
        problems.append(f"{relative}: in the archive, not in the manifest")
    if manifest.get("content_sha256") != _manifest_digest(manifest):
        problems.append("manifest.json: content_sha256 does not match the manifest's content")
    expected_top = f"{manifest.get('slug')}-{manifest.get('version')}"
    if top != expected_top:  # a renamed or repacked folder: not the pack its manifest names
        problems.append(f"{top}/: the pack's folder, where its manifest names {expected_top}/")
    return Verification(not problems, problems, manifest, len(digests))


def zlib_error():
    import zlib

    return zlib.error
