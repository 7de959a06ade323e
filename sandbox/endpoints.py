"""Which model endpoint to use for a role: the admin's ModelEndpoint rows first, then env vars."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from django.conf import settings

from sandbox.models import ModelEndpoint


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    base_url: str
    model: str
    api_key: str
    params: dict = field(default_factory=dict)
    source: str = "admin"  # "admin" or "environment"


def endpoint_config_for(role: str, name: str | None = None) -> EndpointConfig | None:
    """The endpoint for `role` ("policy" or "judge"), or None when none is configured.

    A `name` picks an admin endpoint by name (a rubric's `judge.model`); an unknown
    name falls back to the role's default. With no admin endpoint, OPENAI_BASE_URL
    plus GYMWRIGHT_JUDGE_MODEL / GYMWRIGHT_POLICY_MODEL configure one.
    """
    queryset = ModelEndpoint.objects.filter(role=role)
    endpoint = None
    if name:
        endpoint = queryset.filter(name=name).first()
    if endpoint is None:
        endpoint = queryset.filter(is_default=True).first() or (queryset.first() if queryset.count() == 1 else None)
    if endpoint is not None:
        return EndpointConfig(
            name=endpoint.name,
            base_url=endpoint.base_url,
            model=endpoint.model,
            api_key=os.environ.get(endpoint.api_key_env or "OPENAI_API_KEY", ""),
            params=dict(endpoint.default_params or {}),
        )
    model = settings.JUDGE_MODEL if role == ModelEndpoint.Role.JUDGE else settings.POLICY_MODEL
    if settings.OPENAI_BASE_URL and model:
        return EndpointConfig(name="environment", base_url=settings.OPENAI_BASE_URL, model=model,
                              api_key=settings.OPENAI_API_KEY, source="environment")
    return None
