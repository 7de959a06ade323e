from django import forms

from review.models import Review


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=Review.Decision.choices)
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    version = forms.IntegerField(widget=forms.HiddenInput)
