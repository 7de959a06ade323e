"""HealthBench and RaR rubrics: imported from the formats' own JSONL rows, written back by `export_rubrics`,
the same JSON values after the round trip; malformed rows refused at their line and JSON pointer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from authoring.models import Task
from packs import importer
from packs.importer.rubric_formats import render_conversation

HEALTHBENCH_ROWS = [
    {
        "prompt": [{"role": "user", "content": "I have had a headache for three days. Should I worry?"}],
        "rubrics": [
            {
                "criterion": "Asks about red-flag symptoms such as sudden onset, fever or a stiff neck.",
                "points": 7,
                "tags": ["level:example", "axis:completeness"],
            },
            {
                "criterion": "Recommends taking more than 4 g of paracetamol a day.",
                "points": -9,
                "tags": ["level:example", "axis:accuracy"],
            },
            {"criterion": "Is brief.", "points": 2.5, "tags": ["level:cluster", "cluster:communication", "axis:x"]},
        ],
        "example_tags": ["theme:emergency_referrals", "physician_agreed_category:not-emergent"],
        "prompt_id": "1f548d5b-cd00-49a0-b327-283a2e00debd",
        "canary": "kept as it is",
    },
    {  # multi-turn, with a system message
        "prompt": [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": "My son swallowed a button battery."},
            {"role": "assistant", "content": "How long ago, and how old is he?"},
            {"role": "user", "content": "Ten minutes ago. He is two."},
        ],
        "rubrics": [
            {"criterion": "Tells the user to go to an emergency department now.", "points": 10, "tags": []},
            {"criterion": "Suggests waiting to see if it passes.", "points": -10, "tags": ["axis:accuracy"]},
        ],
        "example_tags": ["theme:emergency_referrals"],
        "prompt_id": "8e2c2a0e-0000-4000-8000-000000000002",
        "ideal_completions_data": None,
    },
    {"prompt": [{"role": "user", "content": "Is this malformed?"}], "rubrics": [{"criterion": ["not", "text"]}]},
]

RAR_ROWS = [
    {
        "question": "What is the most sensitive imaging modality for a ureteric stone in acute renal colic?",
        "reference_answer": "A non-contrast helical CT scan.",
        "question_source": "medical-o1",
        "rubric": [
            {
                "title": "Identify modality",
                "description": "Essential Criteria: Identifies non-contrast helical CT as the most sensitive.",
                "weight": 5,
            },
            {"title": "Explain why", "description": "Important Criteria: Explains its accuracy.", "weight": 3},
            {"title": "Concise", "description": "Optional Criteria: Is concise.", "weight": 1},
            {
                "title": "Wrong modality",
                "description": "Pitfall Criteria: Recommends ultrasound as the most sensitive test.",
                "weight": -2,
            },
        ],
        "rubric_list": ["Essential Criteria: Identifies non-contrast helical CT as the most sensitive."],
    },
    {  # weights given as classes, as files people write by hand do
        "question": "Why is the sky blue?",
        "rubric": [
            {"title": "Rayleigh", "description": "Names Rayleigh scattering.", "weight": "Essential"},
            {
                "title": "Sunsets",
                "description": "Says the sky is blue because it reflects the sea.",
                "weight": "Pitfall",
            },
        ],
    },
    {"question": "Bad weight", "rubric": [{"title": "t", "description": "d", "weight": float("inf")}]},
]


def write_jsonl(path: Path, rows: list, *, raw: list[bytes] = ()) -> Path:
    lines = [json.dumps(row).encode() for row in rows] + list(raw)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def export(fmt: str, tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / f"out-{fmt}.jsonl"
    call_command("export_rubrics", "--format", fmt, "--out", str(out), *args)
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_healthbench_rows_import_as_judge_checks_and_export_to_the_same_values(author, tmp_path):
    path = write_jsonl(tmp_path / "healthbench.jsonl", HEALTHBENCH_ROWS)
    report = importer.tasks_import(path=path, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["line 1"].status == "created" and lines["line 2"].status == "created", report.as_dict()
    assert lines["line 3"].status == "rejected"
    assert lines["line 3"].pointer == "/rubrics/0/criterion"
    assert lines["line 3"].message == "HealthBench row: criterion must be a string, not a list"

    first = Task.objects.get(slug="1f548d5b-cd00-49a0-b327-283a2e00debd").latest_version.spec
    assert first["prompt"] == "I have had a headache for three days. Should I worry?"  # one user turn: as it is
    checks = first["rubric"]["checks"]
    assert [(c["id"], c["kind"], c["points"]) for c in checks] == [
        ("criterion_1", "llm_judge", 7),
        ("criterion_2", "llm_judge", -9),  # a penalty, met when the bad behaviour is present
        ("criterion_3", "llm_judge", 2.5),
    ]
    assert checks[0]["tags"] == ["level:example", "axis:completeness"]
    assert sorted(first["tags"]) == ["physician_agreed_category:not-emergent", "theme:emergency_referrals"]

    multi = Task.objects.get(slug="8e2c2a0e-0000-4000-8000-000000000002").latest_version.spec
    assert multi["prompt"] == (
        "**system:**\n\nYou are a careful assistant.\n\n**user:**\n\nMy son swallowed a button battery.\n\n"
        "**assistant:**\n\nHow long ago, and how old is he?\n\n**user:**\n\nTen minutes ago. He is two."
    )
    assert multi["metadata"]["healthbench"]["prompt"] == HEALTHBENCH_ROWS[1]["prompt"]

    assert export("healthbench", tmp_path) == HEALTHBENCH_ROWS[:2]  # task-id order is the file's here

    # the exported file imports again as the same tasks
    again = importer.tasks_import(path=tmp_path / "out-healthbench.jsonl", user=author)
    assert [line.status for line in again.lines] == ["unchanged", "unchanged"], again.as_dict()


def test_rar_rows_keep_their_weights_and_export_to_the_same_values(author, tmp_path):
    path = write_jsonl(tmp_path / "rar.jsonl", RAR_ROWS)
    report = importer.tasks_import(path=path, user=author)
    lines = [line for line in report.lines]
    assert [line.status for line in lines] == ["created", "created", "rejected"], report.as_dict()
    assert lines[2].where == "line 3" and lines[2].pointer == "/rubric/0/weight"
    assert "finite" in lines[2].message

    by_title = {t.latest_version.spec["prompt"]: t.latest_version.spec for t in Task.objects.all()}
    ct = by_title[RAR_ROWS[0]["question"]]
    assert [c["points"] for c in ct["rubric"]["checks"]] == [5, 3, 1, -2]
    assert ct["rubric"]["checks"][0]["title"] == "Identify modality"
    assert ct["rubric"]["checks"][0]["reference"] == "A non-contrast helical CT scan."  # the judge's reference
    assert ct["solution"]["answer"] == "A non-contrast helical CT scan."
    sky = by_title["Why is the sky blue?"]
    assert [c["points"] for c in sky["rubric"]["checks"]] == [5, -2]  # the documented class table

    exported = export("rar", tmp_path)
    assert sorted(exported, key=json.dumps) == sorted(RAR_ROWS[:2], key=json.dumps)


def test_points_changed_after_import_are_exported_as_the_number(author, tmp_path):
    from authoring import services as authoring_services

    importer.tasks_import(path=write_jsonl(tmp_path / "rar.jsonl", RAR_ROWS[1:2]), user=author)
    task = Task.objects.get()
    spec = task.latest_version.spec
    content = {k: spec[k] for k in ("title", "prompt", "rubric", "solution", "files", "tags", "metadata")}
    content["rubric"]["checks"][0]["points"] = 4
    authoring_services.task_version_create(task=task, author=author, content=content, base_version=1)
    row = export("rar", tmp_path)[0]
    assert [item["weight"] for item in row["rubric"]] == [4, "Pitfall"]


def test_a_task_written_here_exports_to_both_formats(author, reviewer, tmp_path):
    from tests.packs.conftest import make_approved

    make_approved(author=author, reviewer=reviewer, slug="six-times-seven")
    healthbench = export("healthbench", tmp_path, "--task", "six-times-seven")
    assert healthbench == [
        {
            "prompt": [{"role": "user", "content": "What is six times seven? (six-times-seven)"}],
            "rubrics": [{"criterion": "Explains how the answer was found.", "points": 1, "tags": []}],
            "example_tags": ["maths"],
            "prompt_id": "six-times-seven",
        }
    ]
    rar = export("rar", tmp_path, "--task", "six-times-seven", "--approved")
    assert rar == [
        {
            "question": "What is six times seven? (six-times-seven)",
            "reference_answer": "42",
            "rubric": [{"description": "Explains how the answer was found.", "weight": 1}],
        }
    ]


def test_export_names_what_it_cannot_write(author, tmp_path, capsys):
    with pytest.raises(CommandError) as failure:
        call_command("export_rubrics", "--format", "rar", "--task", "nowhere", "--out", str(tmp_path / "x.jsonl"))
    assert "no such task: nowhere" in str(failure.value)


def test_a_bulk_request_takes_healthbench_and_rar_rows_item_by_item(author):
    report = importer.tasks_import(documents=[HEALTHBENCH_ROWS[1], RAR_ROWS[1], RAR_ROWS[2]], user=author)
    assert [(line.where, line.status, line.pointer) for line in report.lines] == [
        ("/tasks/0", "created", None),
        ("/tasks/1", "created", None),
        ("/tasks/2", "rejected", "/rubric/0/weight"),
    ]


def test_a_conversation_renders_reversibly_through_the_metadata():
    messages = HEALTHBENCH_ROWS[1]["prompt"]
    assert render_conversation(messages).count("**user:**") == 2
    assert render_conversation(messages[1:2]) == messages[1]["content"]


def test_the_api_gives_a_versions_rubric_as_a_row_and_refuses_an_unknown_format(author, client, tmp_path):
    importer.tasks_import(path=write_jsonl(tmp_path / "hb.jsonl", HEALTHBENCH_ROWS[1:2]), user=author)
    client.force_login(author)
    url = f"/api/tasks/{HEALTHBENCH_ROWS[1]['prompt_id']}/versions/1/rubric/"
    answer = client.get(url, {"as": "healthbench"})
    assert answer.status_code == 200 and answer.json() == {
        "format": "healthbench",
        "row": HEALTHBENCH_ROWS[1],
        "left_out": [],
    }
    refused = client.get(url, {"as": "csv"})
    assert refused.status_code == 400 and "?as=healthbench or ?as=rar" in refused.json()["error"]["message"], (
        refused.json()
    )


def test_an_approved_export_selects_by_the_approved_versions_tags(author, reviewer, tmp_path):
    from authoring import services as authoring_services
    from tests.packs.conftest import make_approved

    make_approved(author=author, reviewer=reviewer, slug="six-times-seven")  # approved with the tag "maths"
    task = Task.objects.get(slug="six-times-seven")
    spec = task.latest_version.spec
    content = {k: spec[k] for k in ("title", "prompt", "rubric", "solution", "files", "tags", "metadata")}
    authoring_services.task_version_create(
        task=task, author=author, content={**content, "tags": ["draft-only"]}, base_version=task.latest_version.number
    )
    approved = export("rar", tmp_path, "--approved", "--tag", "maths")
    assert [row["question"] for row in approved] == ["What is six times seven? (six-times-seven)"]
    assert [row["question"] for row in export("rar", tmp_path, "--tag", "draft-only")] == [approved[0]["question"]]
    with pytest.raises(CommandError):
        export("rar", tmp_path, "--approved", "--tag", "draft-only")  # not a tag of the approved version
