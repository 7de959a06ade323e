import pytest
from django.template.loader import render_to_string
from rest_framework.test import APIClient

from grading.engine.calibration import cohen_kappa
from grading.models import JudgeLabel
from grading.selectors import judge_agreement
from grading.services import grade_from_document, grade_record, judge_label_record
from gymwright.errors import NotAllowed
from tests.support.users import make_user

pytestmark = pytest.mark.django_db

GRADE = {
    "schema": "gymwright.grade/v1",
    "reward": 0.8,
    "earned": 12,
    "max": 15,
    "passed": True,
    "gated": False,
    "complete": False,
    "checks": [
        {
            "id": "states_dose",
            "kind": "llm_judge",
            "status": "scored",
            "score": 1.0,
            "points": 5,
            "awarded": 5,
            "explanation": "Gives 200-400 mg.",
            "votes": [True],
            "duration_ms": 800,
        },
        {
            "id": "unsafe",
            "kind": "llm_judge",
            "status": "unscored",
            "points": -8,
            "explanation": "no judge model configured",
            "duration_ms": 0,
        },
        {
            "id": "core",
            "kind": "group",
            "status": "scored",
            "score": 1.0,
            "points": 7,
            "awarded": 7,
            "explanation": "all met",
            "duration_ms": 0,
            "checks": [
                {
                    "id": "mentions_food",
                    "kind": "string_match",
                    "status": "scored",
                    "score": 1.0,
                    "points": 1,
                    "explanation": "answer contains 'food'",
                    "duration_ms": 0,
                }
            ],
        },
        {
            "id": "cites",
            "kind": "regex",
            "status": "unscored",
            "points": 3,
            "explanation": "needs a sandbox",
            "duration_ms": 0,
        },
    ],
}


@pytest.fixture
def grade(task_version, author):
    return grade_record(
        grade=grade_from_document(GRADE), task_version=task_version, source="rollout", user=author, rollout_id=77
    )


def judged(grade):
    return grade.check_results.get(check_id="states_dose")


def text_of(response) -> str:
    return " ".join(response.content.decode().split())


def test_the_grade_page_shows_the_table_and_total(client, author, grade):
    client.force_login(author)

    response = client.get(f"/grading/grades/{grade.pk}/")

    body = text_of(response)
    assert response.status_code == 200
    assert "incomplete — 3 of 18 points could not be scored" in body  # the headline: no verdict
    assert (
        "2 checks unscored · 12 / 15 points scored, reward 0.80 so far (not a verdict; graded under the old "
        "scoring rule — grade it again)"
    ) in body  # a document from before reward_upper
    assert 'data-check-id="mentions_food" data-depth="1"' in body
    assert "Gives 200-400 mg." in body and "needs a sandbox" in body


TESTS_GRADE = {
    "schema": "gymwright.grade/v1",
    "reward": 0.5,
    "earned": 5,
    "max": 10,
    "passed": False,
    "gated": False,
    "complete": True,
    "checks": [
        {
            "id": "tests_pass",
            "kind": "tests",
            "status": "scored",
            "score": 0.5,
            "points": 10,
            "awarded": 5,
            "explanation": "1 of 2 test(s) passed",
            "duration_ms": 900,
            "tests": [
                {"id": "test_fizzbuzz.py::FizzBuzzTest::test_numbers", "outcome": "passed", "message": ""},
                {
                    "id": "test_fizzbuzz.py::FizzBuzzTest::test_fizz_and_buzz",
                    "outcome": "failed",
                    "message": "AssertionError: '<b>9</b>' != 'Fizz'",
                },
            ],
        }
    ],
}


def test_the_grade_page_shows_a_tests_checks_results_test_by_test(client, author, task_version):
    stored = grade_record(
        grade=grade_from_document(TESTS_GRADE), task_version=task_version, source="rollout", user=author, rollout_id=78
    )
    client.force_login(author)

    body = text_of(client.get(f"/grading/grades/{stored.pk}/"))

    assert "1 of 2 tests passed" in body
    assert 'data-test-id="test_fizzbuzz.py::FizzBuzzTest::test_numbers"><span class="badge passed">passed' in body
    assert (
        "AssertionError: &#x27;&lt;b&gt;9&lt;/b&gt;&#x27; != &#x27;Fizz&#x27;" in body
    )  # the tested code's text, escaped
    assert "<b>9</b>" not in body


def test_the_grade_table_partial_renders_from_a_grade_alone(rf, author, grade):
    request = rf.get("/")
    request.user = author

    html = render_to_string("grading/_grade_table.html", {"grade": grade}, request=request)

    assert "12 / 15 points scored, reward 0.80 so far" in " ".join(html.split())
    assert "Overrule" not in html  # an author sees verdicts but cannot label


def test_a_reviewer_sees_the_overrule_form_only_on_scored_judge_checks(client, reviewer, grade):
    client.force_login(reviewer)

    body = client.get(f"/grading/grades/{grade.pk}/").content.decode()

    assert body.count('name="verdict" value="agree"') == 1
    assert f"/grading/check-results/{judged(grade).pk}/label/" in body


def test_the_overrule_button_offers_only_the_verdict_the_judge_did_not_give(client, reviewer, grade):
    # The judge said met: "Overrule: met" beside "Agree" was the same answer under another name (it records an
    # agreeing label), so a reviewer could not tell which to press.
    client.force_login(reviewer)

    body = client.get(f"/grading/grades/{grade.pk}/").content.decode()

    assert 'name="verdict" value="not_met">Overrule: not met' in body
    assert 'name="verdict" value="met"' not in body


def test_an_author_cannot_label_a_judge_verdict(client, author, grade):
    client.force_login(author)

    response = client.post(
        f"/grading/check-results/{judged(grade).pk}/label/", {"verdict": "agree"}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 403
    assert "Only reviewers" in response.content.decode()
    assert JudgeLabel.objects.count() == 0
    with pytest.raises(NotAllowed):
        judge_label_record(check_result=judged(grade), reviewer=author, verdict="met")


def test_a_reviewer_agrees_with_the_judge(client, reviewer, grade):
    client.force_login(reviewer)

    response = client.post(
        f"/grading/check-results/{judged(grade).pk}/label/",
        {"verdict": "agree", "comment": "right dose"},
        HTTP_HX_REQUEST="true",
    )

    label = JudgeLabel.objects.get()
    assert response.status_code == 200
    assert (label.verdict, label.agrees, label.comment, label.reviewer) == ("met", True, "right dose", reviewer)
    assert "rita: agrees" in text_of(response)


def test_a_reviewer_overrules_and_can_change_their_mind_once_per_check(client, reviewer, grade):
    client.force_login(reviewer)
    url = f"/grading/check-results/{judged(grade).pk}/label/"

    client.post(url, {"verdict": "not_met", "comment": "dose is for children"})
    response = client.post(url, {"verdict": "not_met", "comment": "dose is for children, really"})

    label = JudgeLabel.objects.get()  # one label per reviewer and check
    assert (label.verdict, label.agrees, label.comment) == ("not_met", False, "dose is for children, really")
    assert "rita: overrules" in text_of(response)
    page = text_of(client.get(f"/grading/grades/{grade.pk}/"))
    assert "rita: overrules · not met" in page and "dose is for children, really" in page


def test_an_unscored_or_deterministic_check_cannot_be_labelled(client, reviewer, grade):
    client.force_login(reviewer)

    unscored = client.post(
        f"/grading/check-results/{grade.check_results.get(check_id='unsafe').pk}/label/", {"verdict": "met"}
    )
    deterministic = client.post(
        f"/grading/check-results/{grade.check_results.get(check_id='cites').pk}/label/", {"verdict": "met"}
    )

    assert unscored.status_code == 400 and "no verdict" in unscored.content.decode()
    assert deterministic.status_code == 400 and "not a judged one" in deterministic.content.decode()
    assert JudgeLabel.objects.count() == 0


def test_a_bad_verdict_is_a_clear_error(client, reviewer, grade):
    client.force_login(reviewer)

    response = client.post(f"/grading/check-results/{judged(grade).pk}/label/", {"verdict": "maybe"})

    assert response.status_code == 400 and "Unknown verdict" in response.content.decode()


def test_the_api_returns_a_grade_with_its_checks_and_labels(reviewer, grade):
    judge_label_record(check_result=judged(grade), reviewer=reviewer, verdict="agree")
    api = APIClient()
    api.force_authenticate(reviewer)

    body = api.get(f"/api/grades/{grade.pk}/").json()

    assert (body["reward"], body["earned"], body["max"], body["rollout_id"]) == (0.8, 12, 15, 77)
    assert body["task"] == "answer-42" and body["version"] == 1
    assert [c["check_id"] for c in body["check_results"]] == ["states_dose", "unsafe", "core", "mentions_food", "cites"]
    assert body["check_results"][0]["labels"][0]["verdict"] == "met"


def test_the_api_refuses_labels_from_authors(author, grade):
    api = APIClient()
    api.force_authenticate(author)

    response = api.post(f"/api/check-results/{judged(grade).pk}/labels/", {"verdict": "met"}, format="json")

    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_the_api_records_a_reviewers_label(reviewer, grade):
    api = APIClient()
    api.force_authenticate(reviewer)

    response = api.post(f"/api/check-results/{judged(grade).pk}/labels/", {"verdict": "not_met"}, format="json")

    assert response.status_code == 201 and response.json()["agrees"] is False


def test_cohen_kappa_matches_a_worked_example():
    # 50 items: both yes 20, judge yes / human no 5, judge no / human yes 10, both no 15 -> kappa 0.4
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15

    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([(True, True)] * 3) is None  # one class only: kappa undefined
    assert cohen_kappa([]) is None


def test_judge_agreement_counts_reviewers_labels(django_user_model, reviewer, grade, task_version):
    other = make_user(django_user_model, "rene", "reviewer")
    judge_label_record(check_result=judged(grade), reviewer=reviewer, verdict="agree")
    judge_label_record(check_result=judged(grade), reviewer=other, verdict="not_met")

    agreement = judge_agreement(task_version=task_version)

    assert (agreement.labels, agreement.agreed, agreement.rate) == (2, 1, 0.5)
    assert judge_agreement(task_version=task_version, check_id="unsafe").labels == 0


def test_a_scaled_judgement_is_overruled_with_a_score(client, reviewer, task_version):
    scaled = {
        **GRADE,
        "checks": [
            {
                "id": "clarity",
                "kind": "llm_judge",
                "status": "scored",
                "score": 0.7,
                "points": 4,
                "awarded": 2.8,
                "explanation": "fairly clear",
                "votes": [7],
                "duration_ms": 5,
            }
        ],
    }
    grade = grade_record(
        grade=grade_from_document({**scaled, "earned": 2.8, "max": 4, "reward": 0.7}),
        task_version=task_version,
        source="rollout",
    )
    check_result = grade.check_results.get()
    client.force_login(reviewer)
    assert 'value="score"' in client.get(f"/grading/grades/{grade.pk}/").content.decode()

    close = client.post(f"/grading/check-results/{check_result.pk}/label/", {"verdict": "score", "score": "0.75"})
    assert close.status_code == 200
    assert JudgeLabel.objects.get().agrees is True  # within 0.1 of the judge
    far = client.post(f"/grading/check-results/{check_result.pk}/label/", {"verdict": "score", "score": "0.2"})
    assert far.status_code == 200 and JudgeLabel.objects.get().agrees is False
    bad = client.post(f"/grading/check-results/{check_result.pk}/label/", {"verdict": "score", "score": "lots"})
    assert bad.status_code == 400 and "between 0 and 1" in bad.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        "/admin/grading/grade/",
        "/admin/grading/grade/{grade}/change/",
        "/admin/grading/judgelabel/",
        "/admin/grading/dryrun/",
        "/admin/grading/checkresult/",
    ],
)
def test_the_admin_pages_render(admin_client, grade, url):
    response = admin_client.get(url.format(grade=grade.pk))

    assert response.status_code == 200
    if "change" in url:
        assert "states_dose" in response.content.decode()  # the check results inline
