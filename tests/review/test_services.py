"""Submit and review: every transition and who may make it."""

import pytest

from authoring import services as authoring_services
from authoring.models import Task
from gymwright.errors import ConflictError, NotAllowed
from review import services
from tests.review.conftest import task_content


def test_audit_events_record_create_new_version_submit_and_approve(task, author, reviewer):
    authoring_services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="v2"))
    services.task_submit(task=task, user=author)
    services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
    from authoring.selectors import audit_events_for
    verbs = [(e.verb, e.actor.username) for e in reversed(list(audit_events_for(task)))]
    assert verbs == [("create", "alice"), ("new_version", "alice"), ("submit", "alice"), ("approve", "rita")]
    task.refresh_from_db()
    assert task.status == Task.Status.APPROVED


def test_approval_belongs_to_the_exact_version(task, author, reviewer):
    old = task.latest_version
    authoring_services.task_version_create(task=task, author=author, base_version=1,
                                           content=task_content(title="changed"))
    with pytest.raises(ConflictError):
        services.review_create(task_version=old, reviewer=reviewer, decision="approve")


def test_roles_limit_who_reviews_and_submits(task, other_author):
    with pytest.raises(NotAllowed):
        services.review_create(task_version=task.latest_version, reviewer=other_author, decision="approve")
    with pytest.raises(NotAllowed):
        services.task_submit(task=task, user=other_author)
