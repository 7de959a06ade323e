from django import forms

from review.models import Review


class ReviewForm(forms.Form):
    # No decision is preselected: the reviewer chooses one on purpose.
    decision = forms.ChoiceField(choices=Review.Decision.choices, widget=forms.RadioSelect,
                                 error_messages={"required": "Choose a decision."})
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    version = forms.IntegerField(widget=forms.HiddenInput)


class SubmitForm(forms.Form):
    override_reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                      label="Admin override: why submit despite failing gates")
