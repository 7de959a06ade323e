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
