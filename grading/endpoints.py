"""Model endpoints: which one serves a role (the admin's ModelEndpoint rows first, then env vars),
and the one factory of judge clients that dry runs and previews share."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist

from grading import engine
from grading.models import EnvironmentJudge, ModelEndpoint
from gymwright.sql import Prepared

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    base_url: str
    model: str
    api_key: str = field(repr=False)
    params: dict = field(default_factory=dict)
    source: str = "admin"  # "admin" or "environment"
    response_format: str = ModelEndpoint.ResponseFormat.AUTO


def endpoint_config_for(
    role: str, name: str | None = None, *, chosen_id: int | None = None, max_age_s: float = 0
) -> EndpointConfig | None:
    """See `_endpoint_config`; `max_age_s` > 0 answers from this process's cache when that fresh."""
    return _cached(("endpoint", role, name, chosen_id), max_age_s, lambda: _endpoint_config(role, name, chosen_id))


def _endpoint_config(role: str, name: str | None = None, chosen_id: int | None = None) -> EndpointConfig | None:
    """The endpoint for `role` ("policy" or "judge"), or None when none is configured.

    A `name` picks an admin endpoint by name (a rubric's `judge.model`); an unknown
    name falls back to `chosen_id` (the endpoint an environment's owner chose,
    `environment_judge_id`), then to the role's default. With no admin endpoint, OPENAI_BASE_URL plus
    GYMWRIGHT_JUDGE_MODEL / GYMWRIGHT_POLICY_MODEL configure one.
    """
    queryset = ModelEndpoint.objects.filter(role=role)
    endpoint = None
    if name:
        endpoint = queryset.filter(name=name).first()
    if endpoint is None and chosen_id is not None:
        endpoint = queryset.filter(pk=chosen_id).first()
    if endpoint is None:
        endpoint = queryset.filter(is_default=True).first() or (queryset.first() if queryset.count() == 1 else None)
    if endpoint is not None:
        return _endpoint_row_config(endpoint)
    model = settings.JUDGE_MODEL if role == ModelEndpoint.Role.JUDGE else settings.POLICY_MODEL
    if settings.OPENAI_BASE_URL and model:
        return EndpointConfig(
            name="environment",
            base_url=settings.OPENAI_BASE_URL,
            model=model,
            api_key=settings.OPENAI_API_KEY,
            source="environment",
        )
    return None


def _endpoint_row_config(endpoint: ModelEndpoint) -> EndpointConfig:
    """An admin endpoint's configuration, its API key read from the environment variable it names."""
    return EndpointConfig(
        name=endpoint.name,
        base_url=endpoint.base_url,
        model=endpoint.model,
        api_key=os.environ.get(endpoint.api_key_env or "OPENAI_API_KEY", ""),
        params=dict(endpoint.default_params or {}),
        response_format=endpoint.response_format,
    )


# Workers and pages read endpoint configuration through this cache (max_age_s > 0): one lookup per
# process every few seconds instead of several queries per rollout or page view. Keyed by what
# decides the answer; an admin's change reaches the other processes within max_age_s (the admin
# clears its own process's cache on save).
_cache: dict[tuple, tuple[float, Any]] = {}
_cache_lock = threading.Lock()


def _cached(key: tuple, max_age_s: float, load):
    if max_age_s <= 0:
        return load()
    # the settings that decide an answer when no admin endpoint does are part of the key
    key = (*key, settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.POLICY_MODEL, settings.JUDGE_MODEL)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    value = load()
    with _cache_lock:
        _cache[key] = (now + max_age_s, value)
    return value


def cache_clear() -> None:
    """Forget cached endpoint configuration (tests; an admin action could too)."""
    with _cache_lock:
        _cache.clear()


def _rubric_judge_model(rubric: Any) -> str | None:
    judge = rubric.get("judge") if isinstance(rubric, dict) else getattr(rubric, "judge", None)
    if judge is None:
        return None
    return judge.get("model") if isinstance(judge, dict) else getattr(judge, "model", None)


def judge_config_for(rubric: Any, *, environment, max_age_s: float = 0):
    """The engine's JudgeConfig for a task's judge checks, or None when no judge endpoint is configured.

    The one resolver every grading of a task uses (dry runs, previews, example answers, gates): the
    rubric's `judge.model` when it names a judge endpoint, else the one `environment` (the task's;
    None for a rubric of no task) chose, else the default judge. `max_age_s` > 0 answers from this
    process's cache when it is that fresh (workers)."""
    rubric_model = _rubric_judge_model(rubric)
    chosen_id = environment_judge_id(environment)
    return _cached(("judge", rubric_model, chosen_id), max_age_s, lambda: _judge_config(rubric_model, chosen_id))


def environment_judge_id(environment) -> int | None:
    """The id of the judge endpoint `environment`'s owner chose (grading.EnvironmentJudge), or None. Read afresh, one
    query (none when the caller loaded it with select_related("judge_choice")): a choice counts at once in every
    process, as when it was a column of the environment; what the cache keeps is the chosen endpoint's configuration,
    by its id, like every endpoint's."""
    if environment is None or getattr(environment, "pk", None) is None:
        return None
    if type(environment).judge_choice.is_cached(environment):
        try:
            return environment.judge_choice.endpoint_id
        except ObjectDoesNotExist:  # loaded: no choice
            return None
    chosen = _environment_judge(environment_id=environment.pk)
    return chosen[0] if chosen else None


# compiled once per process (gymwright.sql): the task page's gates ask on every view (at most one row: the
# environment is the choice's key)
_environment_judge = Prepared(
    lambda environment_id: EnvironmentJudge.objects.filter(environment_id=environment_id).values_list(
        "endpoint_id", flat=True
    ),
    environment_id=int,
)


def _judge_endpoint(endpoint: EndpointConfig) -> engine.JudgeEndpoint:
    """The engine's view of a judge endpoint: its address, model, key, response_format mode and max_tokens (its
    default_params' whole number, else the engine's default)."""
    max_tokens = endpoint.params.get("max_tokens")
    extra = {"max_tokens": max_tokens} if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) else {}
    return engine.JudgeEndpoint(
        base_url=endpoint.base_url,
        model=endpoint.model,
        api_key=endpoint.api_key,
        response_format=endpoint.response_format,
        **extra,
    )


def _judge_config(rubric_model: str | None, chosen_id: int | None = None):
    endpoint = endpoint_config_for("judge", name=rubric_model, chosen_id=chosen_id)
    if endpoint is None:
        return None
    # A check or a judge panel may name any configured judge endpoint (`"model": "strict-judge"`,
    # `"panel": ["strict-judge", "other-provider"]`): each is called at its own address, with its own key,
    # response_format mode and max_tokens; any other name uses the default (a panel member: no verdict).
    endpoints = {}
    for row in ModelEndpoint.objects.filter(role=ModelEndpoint.Role.JUDGE):
        try:
            endpoints[row.name] = _judge_endpoint(_endpoint_row_config(row))
        except ValueError as exc:
            # A row the admin form would refuse (written straight to the database): it serves no judge, and a
            # panel naming it is missing that vote; every other rubric's judge still works.
            log.warning("judge endpoint %r is left out: %s", row.name, exc)
    default = _judge_endpoint(endpoint)
    if rubric_model:
        endpoints[rubric_model] = default
    # One cache directory for every worker (settings.JUDGE_CACHE_DIR, shared storage
    # when workers run on several hosts): the same question is asked of the model once.
    return engine.JudgeConfig(
        base_url=endpoint.base_url,
        model=endpoint.model,
        api_key=endpoint.api_key,
        concurrency=settings.JUDGE_CONCURRENCY,
        timeout_s=settings.JUDGE_TIMEOUT_S,
        max_retries=settings.JUDGE_MAX_RETRIES,
        deadline_s=settings.JUDGE_DEADLINE_S,
        grade_deadline_s=settings.JUDGE_GRADE_DEADLINE_S,
        max_text_chars=settings.JUDGE_MAX_CHARS,
        cache_dir=str(settings.JUDGE_CACHE_DIR) if settings.JUDGE_CACHE_DIR else None,
        endpoints=endpoints,
        # a judge panel's members must be configured judge endpoints: an author cannot name any model the
        # provider sells on the admin's key
        models_only=True,
        response_format=default.response_format,
        max_tokens=default.max_tokens,
    )


def judge_client_for(rubric: Any, *, environment, max_age_s: float = 0):
    """A JudgeClient for `rubric` (see `judge_config_for`), or None when unconfigured (judge checks are then
    unscored, never faked)."""
    config = judge_config_for(rubric, environment=environment, max_age_s=max_age_s)
    return engine.JudgeClient(config) if config is not None else None


def judge_environment_of(task_version) -> Any:
    """The environment whose judge choice grades `task_version` (its task's), or None. A task the version does not
    hold yet is not loaded onto it: a caller that changes the task (a submit) keeps its own copy the one shown."""
    if task_version is None:
        return None
    from authoring.models import Environment, TaskVersion

    if TaskVersion.task.is_cached(task_version):
        return task_version.task.environment
    # its judge choice with it: judge_config_for asks for no more
    return Environment.objects.select_related("judge_choice").filter(tasks__id=task_version.task_id).first()


@dataclass(frozen=True)
class JudgeHelp:
    """Who can give a task's judge checks a judge, and where (the gate that fails for want of one says it)."""

    text: str
    link: str
    link_text: str


def judge_help(environment, *, max_age_s: float = 0) -> JudgeHelp:
    """When no judge resolves for `environment`'s tasks: if judge endpoints are configured, its owner (or an
    admin) chooses one on the environment's page; if none is, the users who can add one in the admin, by name.
    `max_age_s` > 0 answers from this process's cache when that fresh, as the endpoints' configuration is (the
    task page's gates ask on every view of a task whose judge checks have no judge: two queries, one of them the
    admins' permissions, which cost more to compile than to run)."""
    key = (environment.pk, environment.slug, environment.owner_id) if environment is not None else None
    return _cached(("judge-help", key), max_age_s, lambda: _judge_help(environment))


def _judge_help(environment) -> JudgeHelp:
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    names = list(ModelEndpoint.objects.filter(role=ModelEndpoint.Role.JUDGE).values_list("name", flat=True)[:11])
    if names and environment is not None:
        shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
        owner = environment.owner.get_username() if environment.owner_id else "nobody"
        return JudgeHelp(
            text=f"{owner}, the owner of environment {environment.slug} (or an admin), can choose one of the "
            f"configured judge endpoints ({shown}) for its tasks on the environment's page, then run the gates.",
            link=reverse("authoring:environment_detail", args=[environment.slug]) + "#judge",
            link_text=f"Choose the judge of {environment.slug}",
        )
    admins = list(
        get_user_model()
        .objects.with_perm("grading.add_modelendpoint", include_superusers=True)
        .filter(is_active=True, is_staff=True)
        .order_by("username")
        .values_list("username", flat=True)[:11]
    )
    who = ", ".join(admins[:10]) + (", …" if len(admins) > 10 else "")
    what = "No judge endpoint is configured" if not names else "This task's rubric has no environment to choose one"
    if not admins:
        return JudgeHelp(
            text=f"{what}, and no user can add one: make an admin (manage.py createsuperuser), who adds one "
            "(role Judge) under Admin → Model endpoints, then run the gates.",
            link="",
            link_text="",
        )
    return JudgeHelp(
        text=f"{what}: an admin ({who}) can add one (role Judge) under Admin → Model endpoints, then run the gates.",
        link=reverse("admin:grading_modelendpoint_add"),
        link_text="Add a judge endpoint (admins)",
    )
