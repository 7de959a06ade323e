"""authoring 0010 kept an environment's judge on Environment.judge_endpoint; grading 0007 copies each choice into
grading.EnvironmentJudge before authoring 0012 drops the column, and unapplied, copies them back."""

from __future__ import annotations

import pytest

BEFORE = [("grading", "0006_grade_scoring_rule"), ("authoring", "0011_environment_judge_validation")]


@pytest.mark.django_db(transaction=True)
def test_the_choices_made_on_authoring_s_column_move_to_grading_and_back():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    user = old_apps.get_model("auth", "User").objects.create(username="old")
    Endpoint = old_apps.get_model("grading", "ModelEndpoint")
    strict = Endpoint.objects.create(name="strict", role="judge", base_url="http://127.0.0.1:1/v1", model="m")
    Environment = old_apps.get_model("authoring", "Environment")
    chose = Environment.objects.create(slug="chose", name="c", owner_id=user.pk, judge_endpoint=strict)
    Environment.objects.create(slug="default", name="d", owner_id=user.pk)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from grading.models import EnvironmentJudge

    assert list(EnvironmentJudge.objects.values_list("environment__slug", "endpoint__name")) == [("chose", "strict")]
    with connection.cursor() as cursor:
        columns = [
            column.name for column in connection.introspection.get_table_description(cursor, "authoring_environment")
        ]
    assert "judge_endpoint_id" not in columns

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)  # unapplied: the column is back, with the choice on it
    old_apps = executor.loader.project_state(BEFORE).apps
    back = old_apps.get_model("authoring", "Environment").objects.order_by("slug")
    assert list(back.values_list("slug", "judge_endpoint_id")) == [("chose", strict.pk), ("default", None)]
    assert chose.pk == back[0].pk
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
