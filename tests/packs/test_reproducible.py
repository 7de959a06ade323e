"""A pack is reproducible: the same selection, built in another database (a second PostgreSQL database, migrated,
its tasks imported from the first one's pack and previewed again through the same services), is the same pack:
every file byte for byte but the manifest's build record, and the same content_sha256."""

from __future__ import annotations

import contextlib
import json
import tarfile
from collections import defaultdict

import pytest
from django.core.management import call_command

from authoring import services as authoring_services
from tests.packs.conftest import make_approved
from tests.support.openai_server import OpenAIServer, tool_call
from tests.support.services import require_postgres
from tests.support.users import make_user

pytestmark = [pytest.mark.bubblewrap, pytest.mark.postgres]

PREVIEWED = {"repro-0": ("42", "42"), "repro-1": ("42", "41"), "repro-2": ("41", "41")}  # each rollout's answer


@contextlib.contextmanager
def another_database(suffix: str):
    """The default connection pointed at a new, migrated database on the same server for the duration (and this
    process's caches of database rows emptied both ways); dropped afterwards."""
    from django.contrib.contenttypes.models import ContentType
    from django.db import connections

    from grading.endpoints import cache_clear

    require_postgres("a second database is made on the PostgreSQL server of the test database")
    connection = connections["default"]
    original = connection.settings_dict["NAME"]
    name = f"{original}_{suffix}"[:63]

    def switch(to: str) -> None:
        connection.close()
        connection.settings_dict["NAME"] = to
        ContentType.objects.clear_cache()
        cache_clear()

    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    switch(name)
    try:
        call_command("migrate", verbosity=0)
        yield name
    finally:
        switch(original)
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def model_previews(*, author, server) -> None:
    """A model preview of two rollouts of each task of PREVIEWED, through the preview service and the rollout job
    (Celery, eager): the calibration evidence a pack carries."""
    from authoring.models import Task
    from grading.endpoints import cache_clear
    from grading.models import ModelEndpoint
    from sandbox import services as sandbox_services
    from sandbox.models import PreviewRun

    ModelEndpoint.objects.create(
        name="agent",
        role="policy",
        base_url=server.base_url,
        model="policy-model",
        api_key_env="",
        default_params={"temperature": 0},
    )
    ModelEndpoint.objects.create(
        name="judge", role="judge", base_url=server.base_url, model="judge-model", api_key_env=""
    )
    cache_clear()  # as an admin's save does: the approvals before looked the judge up, and found none
    for slug in PREVIEWED:
        preview_run = sandbox_services.preview_run_create(
            task_version=Task.objects.get(slug=slug).approved_version, user=author, policy="model", n=2
        )
        preview_run.refresh_from_db()
        assert preview_run.status == PreviewRun.Status.DONE, preview_run.rollouts.values("status", "error")


def scripted_model():
    """The policy answers each task's rollouts in turn as PREVIEWED says; the judge finds the criterion met."""
    turns: dict[str, int] = defaultdict(int)

    def handler(body):
        if body["model"] == "judge-model":
            return '{"met": true, "explanation": "it says how"}'
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        slug = next(slug for slug in PREVIEWED if f"({slug})" in str(prompt))
        answer = PREVIEWED[slug][turns[slug] % 2]
        turns[slug] += 1
        return {"content": None, "tool_calls": [tool_call("submit", {"answer": f"six times seven is {answer}"})]}

    return handler


def members(path) -> dict[str, tuple]:
    """Every member of a .tar.gz: its header fields and bytes."""
    with tarfile.open(path) as tar:
        return {
            member.name: (
                member.type,
                member.mode,
                member.mtime,
                member.uid,
                member.gid,
                member.uname,
                member.linkname,
                tar.extractfile(member).read() if member.isfile() else None,
            )
            for member in tar
        }


def test_the_same_selection_built_in_another_database_with_the_same_previews_is_the_same_pack(
    transactional_db, sandbox_dir, eager_celery, settings, tmp_path, django_user_model, capsys
):
    from authoring.models import AuditEvent, TaskVersion
    from packs.models import PackVersion

    author = make_user(django_user_model, "alice", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    script = authoring_services.blob_store(data=b"#!/bin/sh\nexit 0\n")
    table = authoring_services.blob_store(data=b"a,b\n1,2\n")
    for index in range(5):
        make_approved(
            author=author,
            reviewer=reviewer,
            slug=f"repro-{index}",
            files=[
                {"path": "data/table.csv", "sha256": table.sha256, "role": "protected"},
                {"path": "checks/grade.sh", "sha256": script.sha256, "role": "grader"},
            ]
            if index % 2
            else None,
        )
    with OpenAIServer() as server:
        server.handler = scripted_model()
        model_previews(author=author, server=server)
        first_out = tmp_path / "first.tar.gz"
        call_command("export_pack", "repro", "--tag", "maths", "--test-ratio", "0.4", "--out", str(first_out))
        first = PackVersion.objects.get(pack__slug="repro")
        first_shas = dict(TaskVersion.objects.values_list("task__slug", "sha256"))

        settings.MEDIA_ROOT = tmp_path / "second-media"  # another deployment: not even the blobs are shared
        with another_database("second") as name:
            assert not TaskVersion.objects.exists() and not PackVersion.objects.exists()
            admin = make_user(django_user_model, "adam", "admin")
            capsys.readouterr()
            call_command("import_tasks", str(first_out), "--approve-as", admin.username)
            printed = capsys.readouterr().out
            assert "5 imported, 0 rejected, approved as adam" in printed and "line 1: created repro-0 v1" in printed
            assert dict(TaskVersion.objects.values_list("task__slug", "sha256")) == first_shas
            roles = {
                entry["path"]: entry.get("role")
                for entry in TaskVersion.objects.get(task__slug="repro-1").spec["files"]
            }
            assert roles == {"data/table.csv": "protected", "checks/grade.sh": "grader"}
            assert AuditEvent.objects.filter(verb="approve", data__approve_as=True).count() == 5
            model_previews(author=make_user(django_user_model, "alma", "author"), server=server)
            second_out = tmp_path / "second.tar.gz"
            call_command("export_pack", "repro", "--tag", "maths", "--test-ratio", "0.4", "--out", str(second_out))
            second = PackVersion.objects.get(pack__slug="repro")
            assert second.verifications.get().ok is True
            assert "files" not in second.manifest  # the row keeps the manifest without its file map; the archive has it
        assert name.endswith("_second")

    assert second.version == first.version == "1.0.0"
    assert second.content_sha256 == first.content_sha256
    one, two = members(first_out), members(second_out)
    assert sorted(one) == sorted(two) and len(one) > 40
    manifest_name = "repro-1.0.0/manifest.json"
    assert [name for name in one if one[name] != two[name]] == [manifest_name]
    manifests = [json.loads(side[manifest_name][-1]) for side in (one, two)]
    builds = [manifest.pop("build") for manifest in manifests]
    assert builds[0]["created_at"] != builds[1]["created_at"]
    assert manifests[0] == manifests[1]
    # the preview evidence is among what was compared: each previewed task's numbers, from the same services
    calibration = json.loads(one["repro-1.0.0/calibration.json"][-1])["tasks"]
    assert {slug: (calibration[slug]["pass_rate"], calibration[slug]["mean_reward"]) for slug in PREVIEWED} == {
        "repro-0": (1, 1),
        "repro-1": (0.5, pytest.approx(2 / 3)),
        "repro-2": (0, pytest.approx(1 / 3)),
    }
    assert calibration["repro-3"] is None and calibration["repro-4"] is None
    assert manifests[0]["difficulty"] == {"unsolved": 1, "hard": 0, "in band": 1, "easy": 1, "not previewed": 2}
    assert {task["split"] for task in manifests[0]["tasks"]} == {"train", "test"}
