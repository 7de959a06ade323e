"""The pack commands as a lab scripts them (docs/formats.md, "Command-line contract"): what each leaves
behind when it refuses, and what it says on a database that is not the server's."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from packs import services
from packs.models import PackVersion, TaskPack


@pytest.mark.django_db
def test_a_refused_export_leaves_no_new_pack_behind(approved_tasks, tmp_path):
    with pytest.raises(CommandError, match="No approved task") as failure:
        call_command("export_pack", "fresh-pack", "--tag", "no-such-tag", "--out", str(tmp_path / "p.tar.gz"))
    assert failure.value.returncode == 1
    assert not TaskPack.objects.filter(slug="fresh-pack").exists()
    assert not (tmp_path / "p.tar.gz").exists()


@pytest.mark.django_db
def test_an_export_that_changes_nothing_says_so_and_builds_the_next_version(approved_tasks, tmp_path, capsys):
    call_command("export_pack", "cli-pack", "--tag", "maths", "--out", str(tmp_path / "1.tar.gz"))
    assert "note:" not in capsys.readouterr().err
    with patch.object(services.builds, "pack_version_plan", wraps=services.pack_version_plan) as planned:
        call_command("export_pack", "cli-pack", "--tag", "maths", "--out", str(tmp_path / "2.tar.gz"))
    assert planned.call_count == 1  # planned once: a second plan of 10,000 tasks cost 0.4 s of the build
    printed = capsys.readouterr()
    assert "note: Nothing changed since 1.0.0" in printed.err and "cli-pack 1.0.1: 12 tasks" in printed.out
    assert "split is empty" not in printed.err
    assert list(
        PackVersion.objects.filter(pack__slug="cli-pack").order_by("version").values_list("version", "status")
    ) == [("1.0.0", "ready"), ("1.0.1", "ready")]


@pytest.mark.django_db
def test_an_export_with_an_empty_split_says_so_and_names_a_ratio_that_fills_both(approved_tasks, tmp_path, capsys):
    from packs.archive import test_ratio_filling_both

    call_command(
        "export_pack",
        "two",
        "--task",
        "task-01",
        "--task",
        "task-02",
        "--test-ratio",
        "0",
        "--out",
        str(tmp_path / "1.tar.gz"),
    )
    both = test_ratio_filling_both(["task-01", "task-02"])
    assert (
        f"note: the test split is empty (a trainer's validation set cannot be): --test-ratio {both} puts tasks "
        "in both" in capsys.readouterr().err
    )
    call_command(
        "export_pack",
        "two",
        "--task",
        "task-01",
        "--task",
        "task-02",
        "--test-ratio",
        str(both),
        "--out",
        str(tmp_path / "2.tar.gz"),
    )
    assert "split is empty" not in capsys.readouterr().err


@pytest.mark.django_db
@pytest.mark.parametrize("command", [["export_pack", "some-pack", "--out", "x.tar.gz"], ["import_tasks", "rows.csv"]])
def test_a_database_without_the_tables_is_named_instead_of_a_traceback(command, tmp_path, monkeypatch):
    """A new data folder, or another DATABASE_URL than the server's: the command opens a database with no
    tables. (Here the test database loses its pack and user tables inside the test's transaction.)"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.csv").write_text("prompt,answer\nWhat is 6 x 7?,42\n")
    with connection.cursor() as cursor:
        for table in ("packs_taskpack", "auth_user"):
            cursor.execute(
                f"ALTER TABLE {connection.ops.quote_name(table)} RENAME TO {connection.ops.quote_name(table + '_away')}"
            )
    with pytest.raises(CommandError) as failure:
        call_command(*command)
    message = str(failure.value)
    assert "has no Gymwright tables" in message and "manage.py migrate" in message, message
    assert connection.settings_dict["NAME"] in message
    assert failure.value.returncode == 1


def test_verify_pack_on_an_unpacked_folder_says_what_it_checks(tmp_path):
    # an unpacked pack is not a damaged archive: the command says it checks the .tar.gz
    (tmp_path / "demo-1.0.0").mkdir()
    with pytest.raises(CommandError, match=r"is a folder: verify_pack checks the pack's \.tar\.gz") as failed:
        call_command("verify_pack", str(tmp_path / "demo-1.0.0"))
    assert failed.value.returncode == 1
