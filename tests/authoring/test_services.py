import copy
import json

import pytest

from authoring import services
from authoring.models import ImmutableRowError, Task, TaskVersion
from gymwright.errors import ConflictError, DomainError, NotAllowed
from tests.authoring.conftest import RUBRIC, task_content


def test_creating_a_task_makes_version_one_with_the_canonical_document(task, author):
    version = task.versions.get()
    assert version.number == 1 and task.latest_version == version
    assert version.spec["schema"] == "gymwright.task/v1"
    assert version.spec["id"] == "six-times-seven" and version.spec["version"] == 1
    assert version.spec["environment"]["id"] == "shell" and version.spec["environment"]["version"] == 1
    from grading.engine import content_sha256

    assert version.sha256 == content_sha256(version.spec)
    assert [t.name for t in task.tags.all()] == ["maths"]


def test_every_change_makes_a_new_version_and_an_unchanged_save_does_not(task, author):
    v2, created = services.task_version_create(
        task=task, author=author, base_version=1, content=task_content(prompt="What is 6 × 7?")
    )
    assert created and v2.number == 2 and v2.parent.number == 1
    same, created = services.task_version_create(
        task=task, author=author, base_version=2, content=task_content(prompt="What is 6 × 7?")
    )
    assert not created and same.pk == v2.pk
    assert TaskVersion.objects.filter(task=task).count() == 2
    assert TaskVersion.objects.get(task=task, number=1).spec["prompt"] == "What is *six* times seven?"


def test_only_the_owner_or_an_admin_makes_a_new_version_of_a_task_or_an_environment(task, author, other_author, admin):
    """The pages and the API check first; the services refuse too, for every other way in (an import)."""
    with pytest.raises(NotAllowed, match="task six-times-seven belongs to alice"):
        services.task_version_create(task=task, author=other_author, base_version=1, content=task_content(title="Mine"))
    same, created = services.task_version_create(task=task, author=other_author, base_version=1, content=task_content())
    assert not created and same.number == 1  # nothing to change: nothing refused
    assert services.task_version_create(task=task, author=admin, base_version=1, content=task_content(title="Ok"))[1]
    environment = task.environment
    with pytest.raises(NotAllowed, match="environment shell belongs to alice"):
        services.environment_version_create(
            environment=environment,
            author=other_author,
            base_version=1,
            spec={"network": "none", "setup": "echo changed"},
        )
    assert environment.versions.count() == 1


def test_a_version_row_can_never_be_updated(task):
    version = task.latest_version
    version.spec = {"tampered": True}
    with pytest.raises(ImmutableRowError):
        version.save()
    with pytest.raises(ImmutableRowError):
        TaskVersion.objects.filter(pk=version.pk).update(spec={})
    version.refresh_from_db()
    assert version.spec["prompt"] == "What is *six* times seven?"


def test_saving_on_an_outdated_version_is_a_conflict_and_overwrites_nothing(task, author, other_author):
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="Mine first"))
    with pytest.raises(ConflictError) as excinfo:
        services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="Stale"))
    assert excinfo.value.extra["latest_version"] == 2
    task.refresh_from_db()
    assert task.latest_version.number == 2 and task.latest_version.spec["title"] == "Mine first"


def test_an_invalid_rubric_is_refused_with_the_json_pointer_of_the_bad_value(task, author):
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][1]["pattern"] = "("
    with pytest.raises(DomainError) as excinfo:
        services.task_version_create(task=task, author=author, base_version=1, content=task_content(rubric=rubric))
    pointers = [d["pointer"] for d in excinfo.value.details]
    assert "/rubric/checks/1/pattern" in pointers
    assert task.versions.count() == 1


def test_duplicate_check_ids_point_at_the_second_one(task, author):
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][1]["id"] = "says_42"
    with pytest.raises(DomainError) as excinfo:
        services.task_version_create(task=task, author=author, base_version=1, content=task_content(rubric=rubric))
    assert "/rubric/checks/1/id" in [d["pointer"] for d in excinfo.value.details]


def test_a_bad_first_version_leaves_no_task_behind(author, environment):
    with pytest.raises(DomainError):
        services.task_create(
            slug="broken",
            environment=environment,
            author=author,
            content=task_content(rubric={"schema": "gymwright.rubric/v1", "checks": []}),
        )
    assert not Task.objects.filter(slug="broken").exists()


def test_unknown_files_and_path_traversal_are_refused(task, author):
    with pytest.raises(DomainError) as excinfo:
        services.task_version_create(
            task=task,
            author=author,
            base_version=1,
            content=task_content(files=[{"path": "a.txt", "sha256": "0" * 64}]),
        )
    assert excinfo.value.details[0]["pointer"] == "/files/0/sha256"
    for bad in ("../etc/passwd", "/etc/passwd", "a/../../b", "a\\b", ""):
        with pytest.raises(DomainError):
            services.safe_relative_path(bad)
    assert services.safe_relative_path("data/./x.csv") == "data/x.csv"


def test_blobs_are_stored_once_by_content(db):
    first = services.blob_store(data=b"hello")
    second = services.blob_store(data=b"hello")
    assert first.pk == second.pk and first.size == 5
    assert services.blob_read(sha256=first.sha256) == b"hello"


def test_a_blob_whose_file_is_gone_is_written_again_when_its_bytes_come_back(db):
    """A row whose file is missing (a media folder restored without it, another folder on the same database) was
    returned as it was, and every rollout reading it failed with FileNotFoundError."""
    import hashlib

    from authoring.models import Blob

    blob = services.blob_store(data=b"kept bytes")
    blob.file.storage.delete(blob.file.name)
    again = services.blob_store(data=b"kept bytes")
    assert again.pk == blob.pk and services.blob_read(sha256=blob.sha256) == b"kept bytes"
    assert services.blob_store(data=b"kept bytes").file.name == blob.file.name  # the row's own name, kept
    nameless = Blob.objects.create(sha256=hashlib.sha256(b"other").hexdigest(), size=5, file="")  # no file at all
    assert services.blob_store(data=b"other").pk == nameless.pk
    assert services.blob_read(sha256=nameless.sha256) == b"other"


def test_only_authors_and_admins_create_tasks(reviewer, environment):
    with pytest.raises(NotAllowed):
        services.task_create(slug="x", environment=environment, author=reviewer, content=task_content())


def test_environment_versions_are_immutable_and_conflict_checked(environment, author):
    version, created = services.environment_version_create(
        environment=environment, author=author, base_version=1, spec={"network": "none", "setup": "echo hi"}
    )
    assert created and version.number == 2
    with pytest.raises(ConflictError):
        services.environment_version_create(
            environment=environment, author=author, base_version=1, spec={"network": "none", "setup": "echo stale"}
        )
    with pytest.raises(DomainError) as excinfo:
        services.environment_version_create(
            environment=environment, author=author, base_version=2, spec={"network": "sometimes"}
        )
    assert excinfo.value.details[0]["pointer"].startswith("/network")


def test_a_task_version_pins_the_environment_version_it_was_saved_with(task, author, environment):
    services.environment_version_create(
        environment=environment, author=author, base_version=1, spec={"network": "none", "setup": "echo v2"}
    )
    v2, _ = services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="t2"))
    assert task.versions.get(number=1).environment_version.number == 1
    assert v2.environment_version.number == 2 and v2.spec["environment"]["setup"] == "echo v2"


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_saves_on_the_same_base_make_one_version_and_one_conflict(author, environment):
    """Real threads, real database: the row lock serialises them; neither overwrites the other."""
    import threading

    from django.db import close_old_connections

    from tests.support.services import require_postgres

    require_postgres("row locks (SQLite has none)")
    task = services.task_create(slug="race", environment=environment, author=author, content=task_content())
    barrier = threading.Barrier(2)
    outcomes = []

    def save(title):
        try:
            barrier.wait()
            services.task_version_create(task=task, author=author, base_version=1, content=task_content(title=title))
            outcomes.append("saved")
        except ConflictError:
            outcomes.append("conflict")
        finally:
            close_old_connections()

    threads = [threading.Thread(target=save, args=(title,)) for title in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict", "saved"]
    assert task.versions.count() == 2


def test_crlf_line_ends_in_multi_line_text_are_saved_as_lf(author, environment):
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"].append(
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Shows the\r\nworking\rstep by step."}
    )
    task = services.task_create(
        slug="crlf",
        environment=environment,
        author=author,
        content=task_content(
            prompt="Line one\r\nLine two\rLine three",
            rubric=rubric,
            solution={"script": "echo 42\r\necho done", "answer": "42\r\n"},
        ),
    )
    spec = task.latest_version.spec
    assert spec["prompt"] == "Line one\nLine two\nLine three"
    assert spec["solution"] == {"script": "echo 42\necho done", "answer": "42\n"}
    assert spec["rubric"]["checks"][2]["criterion"] == "Shows the\nworking\nstep by step."
    # What a rubric pattern or expected value says is left exactly as written.
    assert spec["rubric"]["checks"][0]["expected"] == "42"


def test_the_same_prompt_with_crlf_line_ends_is_no_new_version(author, environment):
    task = services.task_create(
        slug="lf", environment=environment, author=author, content=task_content(prompt="First line\nSecond line")
    )
    version, created = services.task_version_create(
        task=task, author=author, content=task_content(prompt="First line\r\nSecond line"), base_version=1
    )
    assert created is False and version.number == 1


def test_an_environments_setup_script_and_dockerfile_are_saved_with_lf(author):
    environment = services.environment_create(
        slug="crlf-env",
        name="CRLF",
        author=author,
        spec={"network": "none", "setup": "pip install x\r\necho ok\r\n", "dockerfile": "FROM python:3.12\r\nRUN true"},
    )
    spec = environment.latest_version.spec
    assert spec["setup"] == "pip install x\necho ok\n" and spec["dockerfile"] == "FROM python:3.12\nRUN true"
    same, created = services.environment_version_create(
        environment=environment,
        author=author,
        base_version=1,
        spec={"network": "none", "setup": "pip install x\necho ok\n", "dockerfile": "FROM python:3.12\nRUN true"},
    )
    assert created is False and same.number == 1


@pytest.mark.parametrize(
    "document",
    [
        {
            "schema": "gymwright.task/v1",
            "id": "a",
            "version": 3,
            "title": 'ü "q"',
            "prompt": "p\n",
            "environment": {"id": "e", "version": 1.0},
            "files": [],
            "solution": {"answer": "1.0"},
            "rubric": {"pass_threshold": 1.0},
            "tags": [],
            "metadata": {"z": 2.5},
        },
        {"version": 2},
        {"id": "a", "version": True},  # not an int: serialised twice
        {"zzz": 1, "version": 1},  # a key after "version": serialised twice
    ],
)
def test_a_task_document_is_serialised_once_for_both_of_its_hashes(document):
    from authoring.services.documents import _document_hashes
    from grading.engine import canonical_json, content_sha256

    hashes = _document_hashes(document)
    assert (hashes.sha256, hashes.content_sha256) == (
        content_sha256(document),
        content_sha256({k: v for k, v in document.items() if k != "version"}),
    )
    # the text stored for the document is its canonical JSON, unless that changed a number (1.0 became 1)
    integral_float = document.get("environment", {}).get("version") == 1.0 and "rubric" in document
    assert hashes.text == (None if integral_float else canonical_json(document))
    assert hashes.text is None or json.loads(hashes.text) == document


def test_environment_defaults_come_from_the_task_format_alone(author):
    """One source of defaults (grading.engine.models): the form, a partial spec, the runtime and the tools."""
    from authoring.forms import EnvironmentForm
    from grading.engine.models import BUILTIN_TOOLS, DEFAULT_TOOLS, Limits
    from sandbox.runtime import tools as runtime_tools
    from sandbox.runtime.spec import SandboxSpec

    limits = Limits()
    saved = services.environment_create(slug="defaults", name="D", author=author, spec={}).latest_version.spec
    assert saved["limits"] == {
        "cpus": limits.cpus,
        "memory_mb": limits.memory_mb,
        "timeout_s": limits.timeout_s,
        "max_steps": limits.max_steps,
    }
    assert saved["tools"] == list(DEFAULT_TOOLS)
    partial = services.environment_create(
        slug="partial", name="P", author=author, spec={"limits": {"cpus": 2}}
    ).latest_version.spec
    runtime = SandboxSpec.from_environment(partial)
    assert (runtime.cpus, runtime.memory_mb, runtime.max_steps) == (2, limits.memory_mb, limits.max_steps)
    assert SandboxSpec().tools == DEFAULT_TOOLS and SandboxSpec().memory_mb == limits.memory_mb
    form = EnvironmentForm()
    assert form.fields["memory_mb"].initial == limits.memory_mb and form.fields["max_steps"].initial == limits.max_steps
    assert list(form.fields["tools"].initial) == list(DEFAULT_TOOLS)
    assert (
        [name for name, _ in form.fields["tools"].choices] == list(BUILTIN_TOOLS) == list(runtime_tools.BUILTIN_TOOLS)
    )
