"""Imported Harbor and Terminal-Bench tasks run: a task folder as `harbor init` makes it (and one in
Terminal-Bench's layout) is imported, then rolled out for real in the sandbox, as a preview's worker does
(`task_files` + `run_rollout`). The oracle (solution/solve.sh) must score 1, the nop policy 0.

Harbor's verifier runs tests/test.sh from /tests and reads /logs/verifier/reward.txt, and its tests look
for the agent's work in /app (the template Dockerfile's WORKDIR). Before, the check could never pass: both
backends have a read-only root, so /logs/verifier and /tests could not be made, and /app did not exist.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest

from authoring.models import Task
from grading.engine import parse_task
from packs import importer
from sandbox.runtime import get_backend, make_policy, run_rollout
from sandbox.worker import task_files
from tests.support.harbor_tasks import CONTEXT, write_word_tally
from tests.support.services import require_bwrap, require_docker
from tests.support.venvs import harbor_bin

INSTRUCTION = "Create a file named out.txt in your working directory that contains the word hello.\n"
SOLVE = "#!/bin/bash\n\n# Use this file to solve the task.\necho hello > /app/out.txt\n"
# Harbor's template: "Use this file to verify the task and generate a reward ... output a reward to
# /logs/verifier/reward.txt".
TEST_SH = """#!/bin/bash

# Use this file to verify the task and generate a reward.
if grep -qx hello /app/out.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def harbor_task(
    root: Path, name: str, *, test_sh: str = TEST_SH, solve: str = SOLVE, dockerfile: str | None = None
) -> Path:
    """A task folder made by `harbor tasks init`, filled in as its comments ask."""
    done = subprocess.run(
        [harbor_bin(), "tasks", "init", f"acme/{name}", "-p", str(root), "--no-pytest"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = root / name
    assert (folder / "environment" / "Dockerfile").read_text().rstrip().endswith("WORKDIR /app")
    (folder / "instruction.md").write_text(INSTRUCTION)
    (folder / "solution" / "solve.sh").write_text(solve)
    (folder / "tests" / "test.sh").write_text(test_sh)
    if dockerfile is not None:
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    return folder


def rollout(slug: str, policy: str, backend):
    """One rollout of the task's latest version, as a preview's worker runs it."""
    version = Task.objects.get(slug=slug).latest_version
    task = parse_task(version.spec)
    files, env_files = task_files(version)
    result = run_rollout(task, policy=make_policy(policy, task=task), backend=backend, files=files, env_files=env_files)
    assert result.error is None, result.error
    return result


def docker_backend():
    from tests.support.images import busybox_image

    client = require_docker()
    image = busybox_image(client)
    # Harbor's scripts start with #!/bin/bash; the test image is busybox (built here, nothing pulled), whose
    # sh stands in for it. The WORKDIR has a file from the image, which the agent finds in its workspace.
    dockerfile = (
        f"FROM {image}\nRUN printf '#!/bin/sh\\nexec /bin/sh \"$@\"\\n' > /bin/bash && chmod 755 /bin/bash\n"
        "\nWORKDIR /app\nRUN echo from-the-image > /app/seed.txt\n"
    )
    return get_backend("docker", client=client, default_image=image), dockerfile


@pytest.fixture(params=["bubblewrap", "docker"])
def backend_and_dockerfile(request):
    if request.param == "bubblewrap":
        require_bwrap()
        return get_backend("bubblewrap"), None  # the template's Dockerfile: bubblewrap reads only its WORKDIR
    return docker_backend()


def test_an_imported_harbor_task_passes_with_its_solution_and_fails_without(author, tmp_path, backend_and_dockerfile):
    backend, dockerfile = backend_and_dockerfile
    harbor_task(tmp_path / "harbor", "say-hello", dockerfile=dockerfile)
    report = importer.tasks_import(path=tmp_path / "harbor", user=author)
    assert [line.status for line in report.lines] == ["created"], report.as_dict()

    oracle = rollout("say-hello", "oracle", backend)
    assert oracle.grade.complete and oracle.grade.passed and oracle.grade.reward == 1.0, oracle.grade
    assert oracle.workspace_files["out.txt"] == b"hello\n"  # /app/out.txt is the workspace's
    assert ".harbor/tests/test.sh" not in oracle.workspace_files  # the tests arrive after the episode
    if backend.name == "docker":  # what the image had in its WORKDIR
        assert oracle.workspace_files["seed.txt"] == b"from-the-image\n"

    nop = rollout("say-hello", "nop", backend)
    assert nop.grade.complete and nop.grade.reward == 0 and not nop.grade.passed, nop.grade
    [check] = nop.grade.checks
    assert "reward.txt: 0" in check.explanation, check.explanation


def test_an_imported_terminal_bench_task_passes_with_its_solution_and_fails_without(
    author, tmp_path, backend_and_dockerfile
):
    """Terminal-Bench runs run-tests.sh with TEST_DIR=/tests (its tests beside it) from the image's WORKDIR."""
    backend, dockerfile = backend_and_dockerfile
    folder = tmp_path / "tb" / "hello-file"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text(
        "instruction: |\n  " + INSTRUCTION + "difficulty: easy\nmax_test_timeout_sec: 60\n"
    )
    (folder / "Dockerfile").write_text(
        dockerfile or "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest\nWORKDIR /app\n"
    )
    (folder / "solution.sh").write_text("echo hello > out.txt\n")
    (folder / "run-tests.sh").write_text("#!/bin/bash\nsh $TEST_DIR/check_output.sh\n")
    (folder / "tests" / "check_output.sh").write_text("grep -qx hello /app/out.txt\n")
    report = importer.tasks_import(path=tmp_path / "tb", user=author)
    assert [line.status for line in report.lines] == ["created"], report.as_dict()

    oracle = rollout("hello-file", "oracle", backend)
    assert oracle.grade.passed and oracle.grade.reward == 1.0, oracle.grade
    nop = rollout("hello-file", "nop", backend)
    assert nop.grade.complete and nop.grade.reward == 0, nop.grade
    assert "run-tests.sh exited with 2" in nop.grade.checks[0].explanation  # grep: no out.txt


@pytest.mark.parametrize(
    "written, passes",
    [
        ("1", True),
        ("0.5", False),
        ("", False),
        ("1 or so", False),
        ('{"reward": 1, "style": 1.0}', True),
        ('{"reward": 1, "style": 0.5}', False),
    ],
)
def test_a_harbor_reward_passes_only_when_it_is_full(author, tmp_path, written, passes):
    """reward.txt holds one number; reward.json (which Harbor reads first) named rewards. The command check
    passes or fails: the full reward (every reward at least 1) passes; a fraction, an empty file or text fails."""
    require_bwrap()
    name = "reward.json" if written.startswith("{") else "reward.txt"
    harbor_task(
        tmp_path / "harbor", "rewarded", test_sh=f"#!/bin/bash\nprintf '%s' '{written}' > /logs/verifier/{name}\n"
    )
    importer.tasks_import(path=tmp_path / "harbor", user=author)
    result = rollout("rewarded", "nop", get_backend("bubblewrap"))
    assert result.grade.passed is passes, result.grade.checks[0].explanation


# bash as written: dash (the host's /bin/sh, which bubblewrap runs) refused `set -o pipefail` ("Illegal option
# -o pipefail"), so 15 of 15 real solutions failed; and a script without a #! line runs under bash, as in Harbor.
PIPEFAIL_SOLVE = "#!/bin/bash\nset -euo pipefail\ntrue | true\nif [[ -d /app ]]; then echo hello > /app/out.txt; fi\n"
# pipefail is in force, not ignored: the pipeline fails, so the script stops before it writes.
PIPEFAIL_STOPS = "#!/bin/bash\nset -euo pipefail\nfalse | true\necho hello > /app/out.txt\n"
NO_SHEBANG = "set -euo pipefail\n[[ -d /app ]] && echo hello > /app/out.txt\n"


def test_a_harbor_tasks_scripts_run_as_written_on_both_backends(author, tmp_path, backend_and_dockerfile):
    backend, dockerfile = backend_and_dockerfile
    for name, solve in (("pipefail", PIPEFAIL_SOLVE), ("stops", PIPEFAIL_STOPS), ("no-shebang", NO_SHEBANG)):
        harbor_task(tmp_path / "harbor", name, solve=solve, dockerfile=dockerfile)
    report = importer.tasks_import(path=tmp_path / "harbor", user=author)
    assert [line.status for line in report.lines] == ["created"] * 3, report.as_dict()
    for name, passes in (("pipefail", True), ("stops", False), ("no-shebang", True)):
        result = rollout(name, "oracle", backend)
        assert result.grade.passed is passes, (name, result.trajectory[-3:], result.grade.checks[0].explanation)
        assert ("out.txt" in result.workspace_files) is passes
        assert "Illegal option" not in json.dumps(result.trajectory)


def test_a_harbor_tasks_build_context_builds_and_its_settings_reach_its_scripts_on_docker(author, tmp_path):
    """The word-tally task (tests/support/harbor_tasks.py), as real datasets' tasks are: its Dockerfile COPYs and
    ADDs from its build context into its WORKDIR (/app) and elsewhere in the image; its solve.sh is #!/bin/bash
    with `set -euo pipefail` and needs TALLY_LABEL from [solution.env]; its test.sh needs TALLY_MODE from
    [verifier.env] and a checker the build put in the image. The oracle scores 1, the nop policy 0."""
    from tests.support.images import busybox_bash_image

    client = require_docker()
    base = busybox_bash_image(client)
    write_word_tally(tmp_path / "dataset", base=base)
    report = importer.tasks_import(path=tmp_path / "dataset", user=author)
    assert [line.status for line in report.lines] == ["created"], [line.text() for line in report.lines]
    backend = get_backend("docker", client=client, default_image=base)

    oracle = rollout("word-tally", "oracle", backend)
    assert oracle.grade.passed and oracle.grade.reward == 1.0, oracle.grade.checks[0].explanation
    assert oracle.workspace_files["summary.txt"] == b"words: 5\n"
    assert oracle.workspace_files["words.txt"] == CONTEXT["data/words.txt"].encode()  # COPY into the WORKDIR
    nop = rollout("word-tally", "nop", backend)
    assert nop.grade.complete and nop.grade.reward == 0, nop.grade


def test_the_exported_tests_run_in_the_tasks_own_image_as_harbor_runs_them(author, admin, tmp_path, settings):
    """The re-export, run as Harbor runs a trial: the image built from the exported environment/ (its Dockerfile
    and build context as they came), solution/ at /solution run with [solution.env], tests/ at /tests, and
    tests/test.sh run from the WORKDIR with [verifier.env]; the reward it writes is 1, and 0 without the
    solution."""
    import docker.errors
    from django.core.management import call_command

    from tests.support.images import busybox_bash_image

    client = require_docker()
    base = busybox_bash_image(client)
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    write_word_tally(tmp_path / "dataset", base=base)
    importer.tasks_import(path=tmp_path / "dataset", user=author, approve_as=admin)
    call_command("export_pack", "harbor-run", "--out", str(tmp_path / "pack.tar.gz"))
    with tarfile.open(tmp_path / "pack.tar.gz") as tar:
        tar.extractall(tmp_path / "out", filter="data")
    (pack,) = (tmp_path / "out").iterdir()
    task = pack / "tasks" / "word-tally"
    config = tomllib.loads((task / "task.toml").read_text())

    image, _ = client.images.build(path=str(task / "environment"), rm=True, forcerm=True, network_mode="none")
    try:
        for solved, reward in ((True, "1"), (False, "0")):
            container = client.containers.create(
                image.id, ["sleep", "300"], network_disabled=True, labels={"gymwright.test-container": "1"}
            )
            try:
                container.start()
                container.put_archive("/", _tar_of({"tests": task / "tests", "solution": task / "solution"}))
                if solved:
                    done = container.exec_run(
                        ["bash", "/solution/solve.sh"], environment=config["solution"]["env"], workdir="/app"
                    )
                    assert done.exit_code == 0, done.output
                verifier_env = {k: v for k, v in config["verifier"]["env"].items() if "${" not in v}
                done = container.exec_run(["bash", "/tests/test.sh"], environment=verifier_env, workdir="/app")
                assert done.exit_code == 0, done.output
                written = container.exec_run(["cat", "/logs/verifier/reward.txt"]).output.decode().strip()
                assert written == reward, (solved, written)
            finally:
                container.remove(force=True)
    finally:
        try:
            client.images.remove(image.id, force=True)
        except docker.errors.APIError:
            pass


def _tar_of(folders: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, folder in folders.items():
            tar.add(folder, arcname=name)
    return buffer.getvalue()
