from django import forms
from django.conf import settings

from review.models import Review


class _CommentLimit:
    """Each text box carries the server's limit as its maxlength (review.services refuses more, naming it), so that
    a browser stops the reviewer first."""

    limited = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.limited:
            self.fields[name].widget.attrs["maxlength"] = settings.REVIEW_COMMENT_MAX_CHARS


class ReviewForm(_CommentLimit, forms.Form):
    limited = ("comment",)
    # No decision is preselected: the reviewer chooses one on purpose.
    decision = forms.ChoiceField(
        choices=Review.Decision.choices, widget=forms.RadioSelect, error_messages={"required": "Choose a decision."}
    )
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    version = forms.IntegerField(widget=forms.HiddenInput)


class SubmitForm(_CommentLimit, forms.Form):
    limited = ("override_reason",)
    override_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Admin override: why submit despite failing gates",
    )


class BlindScoreForm(forms.Form):
    """A reviewer's blind score of one rollout (review.blind)."""

    passed = forms.TypedChoiceField(
        choices=[("yes", "Passes"), ("no", "Fails")],
        coerce=lambda value: value == "yes",
        widget=forms.RadioSelect,
        label="Would you pass this rollout?",
    )
    score = forms.IntegerField(min_value=0, max_value=10, label="Its quality, 0 (worthless) to 10 (perfect)")


class EnvironmentCalibrationForm(forms.Form):
    """An environment's calibration settings (review.environment_settings); the bounds are the services'."""

    judge_min_labels = forms.IntegerField(label="Labelled answers a judged check needs")
    judge_min_rate = forms.FloatField(
        label="TPR and TNR a judged check needs", widget=forms.NumberInput({"step": "any"})
    )
    judge_unvalidated_blocks = forms.BooleanField(
        required=False, label="A judged check not validated blocks submission (else the gates warn)"
    )
    blind_min_correlation = forms.FloatField(
        label="Spearman below which a task is flagged", widget=forms.NumberInput({"step": "any"})
    )
    blind_min_scored = forms.IntegerField(label="Rollouts scored blind before a task is judged")

    @classmethod
    def initial_from(cls, *, environment, blind_rule) -> dict:
        return {
            "judge_min_labels": environment.judge_min_labels,
            "judge_min_rate": environment.judge_min_rate,
            "judge_unvalidated_blocks": environment.judge_unvalidated_blocks,
            "blind_min_correlation": blind_rule.min_correlation,
            "blind_min_scored": blind_rule.min_scored,
        }
