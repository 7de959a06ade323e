"""An environment's calibration settings, set by its owner (or an admin) on the environment page's Calibration panel
and through PATCH /api/environments/<slug>/: when a judged check counts as validated and whether one that is not
blocks (authoring's Environment fields, authoring.services.environment_calibration_set), and the blind rule
(review's BlindRule: below which Spearman, over how many scored rollouts, a task is flagged). Each field's name is
the API's and the error's pointer; each change is audited on the environment."""

from __future__ import annotations

from django.db import transaction
from rest_framework import serializers

from accounts import permissions
from authoring.models import AuditEvent, Environment
from authoring.services import audit_record, environment_calibration_set, not_yours, settings_apply
from grading.engine import calibration
from review.models import BlindRule

#: API field -> (BlindRule field, the words that name it).
BLIND_FIELDS = {
    "blind_min_correlation": ("min_correlation", "Spearman below which a task is flagged"),
    "blind_min_scored": ("min_scored", "Rollouts scored blind before a task is judged"),
}


@transaction.atomic
def blind_rule_set(
    *, environment: Environment, user, min_correlation: float | None = None, min_scored: int | None = None
) -> BlindRule:
    """Change `environment`'s blind rule (None: unchanged; the defaults until a row exists); its owner or an admin.
    A bad value is a DomainError at its API field's pointer. Audited when anything changed."""
    if not permissions.can_edit_environment(user, environment):
        raise not_yours(environment, "environment", pointer="/blind_min_correlation")
    rule = BlindRule.objects.select_for_update().filter(environment=environment).first()
    if rule is None:
        defaults = calibration.HumanPredictionRule()
        rule = BlindRule(
            environment=environment, min_correlation=defaults.min_correlation, min_scored=defaults.min_scored
        )
    changes = settings_apply(
        rule,
        {
            "blind_min_correlation": ("min_correlation", "number", min_correlation),
            "blind_min_scored": ("min_scored", "whole", min_scored),
        },
        words={name: words for name, (_, words) in BLIND_FIELDS.items()},
        exclude=["environment"],
    )
    if not changes:
        return rule
    rule.save()
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.CALIBRATION,
        target=environment,
        summary="blind rule: " + ", ".join(f"{name} {old} → {new}" for name, (old, new) in changes.items()),
        data={"blind_rule": changes},
    )
    return rule


@transaction.atomic
def environment_settings_set(*, environment: Environment, user, values: dict) -> None:
    """The Calibration panel's form: authoring's settings and the blind rule, all or none."""
    environment_calibration_set(
        environment=environment,
        user=user,
        **{name: values[name] for name in ("judge_min_labels", "judge_min_rate", "judge_unvalidated_blocks")},
    )
    blind_rule_set(
        environment=environment,
        user=user,
        min_correlation=values["blind_min_correlation"],
        min_scored=values["blind_min_scored"],
    )


# ---------------------------------------------------------------- the environment API's blind rule fields


class _BlindRuleValue:
    """One of the environment's blind rule's values; the default without a rule (read through `blind_rule`)."""

    def __init__(self, *, field: str, default_value, **kwargs):
        self.rule_field, self.default_value = field, default_value
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, environment):
        try:
            rule = environment.blind_rule
        except BlindRule.DoesNotExist:
            return self.default_value
        return getattr(rule, self.rule_field)


class _BlindRuleNumber(_BlindRuleValue, serializers.FloatField):
    pass


class _BlindRuleCount(_BlindRuleValue, serializers.IntegerField):
    pass


def _blind_field(name: str):
    from authoring.services import EnvironmentField

    field, words = BLIND_FIELDS[name]
    defaults = calibration.HumanPredictionRule().to_dict()

    def input_field():
        if name == "blind_min_scored":
            return serializers.IntegerField(required=False, help_text=f"{words} (3 to 100000)")
        return serializers.FloatField(required=False, help_text=f"{words} (-1 to 1)")

    def output_fields():
        kind = _BlindRuleCount if name == "blind_min_scored" else _BlindRuleNumber
        return {name: kind(field=field, default_value=defaults[field], help_text=words)}

    def write(*, environment, user, value):
        blind_rule_set(environment=environment, user=user, **{field: value})

    return EnvironmentField(
        name=name, input_field=input_field, output_fields=output_fields, related=("blind_rule",), write=write
    )


def register() -> None:
    from authoring.services import environment_field_register

    for name in BLIND_FIELDS:
        environment_field_register(_blind_field(name))
