"""Grading's forms on other apps' pages."""

from __future__ import annotations

from django import forms

from grading.models import ModelEndpoint


class EnvironmentJudgeForm(forms.Form):
    """The judge endpoint an environment's tasks use, among those an admin configured (empty: the default)."""

    judge_endpoint = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.none(),
        required=False,
        label="Judge endpoint",
        empty_label="The default judge",
        error_messages={"invalid_choice": "That is not one of the configured judge endpoints; choose one listed."},
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["judge_endpoint"].queryset = ModelEndpoint.objects.filter(role=ModelEndpoint.Role.JUDGE).order_by(
            "name"
        )
