"""Moving Review from authoring to review keeps every stored review."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@pytest.mark.django_db(transaction=True)
def test_reviews_stored_before_the_move_are_there_after_it():
    before = [("authoring", "0002_task_approved_version")]
    after = [("review", "0001_initial")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    User = old.get_model("auth", "User")
    user = User.objects.create(username="old-reviewer")
    environment = old.get_model("authoring", "Environment").objects.create(slug="e", name="e", owner=user)
    env_version = old.get_model("authoring", "EnvironmentVersion").objects.create(
        environment=environment, number=1, spec={}, sha256="0" * 64, author=user
    )
    task = old.get_model("authoring", "Task").objects.create(slug="t", title="t", environment=environment, owner=user)
    version = old.get_model("authoring", "TaskVersion").objects.create(
        task=task,
        number=1,
        spec={},
        sha256="1" * 64,
        content_sha256="2" * 64,
        environment_version=env_version,
        author=user,
    )
    old.get_model("authoring", "Review").objects.create(
        task_version=version, reviewer=user, decision="approve", comment="kept", check_comments={"c": "also kept"}
    )

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    review = new.get_model("review", "Review").objects.get()
    assert (review.comment, review.check_comments, review.decision) == ("kept", {"c": "also kept"}, "approve")
    assert review.task_version_id == version.pk
    assert "review_review" in connection.introspection.table_names()
    assert "authoring_review" not in connection.introspection.table_names()

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
