"""The preview start form: which policy, how many rollouts, on which sandbox backend."""

from __future__ import annotations

import functools

from django import forms
from django.conf import settings

from gymwright.forms import rendered_once
from sandbox import services
from sandbox.models import PreviewRun
from sandbox.runtime.hack_probes import HACKS

MODEL_POLICY_HOWTO = (
    "To use it, add a ModelEndpoint with role 'policy' in the admin, or set OPENAI_BASE_URL and GYMWRIGHT_POLICY_MODEL."
)


class PolicySelect(forms.Select):
    """The policy select, with choices that cannot run here shown but disabled."""

    def __init__(self, *args, disabled_values=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.disabled_values = set(disabled_values)

    def create_option(self, name, value, *args, **kwargs):
        option = super().create_option(name, value, *args, **kwargs)
        if value in self.disabled_values:
            option["attrs"]["disabled"] = True
        return option


class PreviewStartForm(forms.Form):
    POLICY_CHOICES = [
        ("oracle", "oracle — the reference solution"),
        ("nop", "nop — does nothing"),
        ("probe", "probe — answers with the text below"),
        ("model", "model — the policy endpoint"),
    ]
    POLICY_CHOICES += [(f"hack:{name}", f"hack:{name} — {what}") for name, what in HACKS.items()]

    policy = forms.ChoiceField(choices=POLICY_CHOICES, initial="oracle")
    probe_text = forms.CharField(
        required=False,
        max_length=services.PROBE_TEXT_MAX,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Probe text",
        help_text="Only for the probe policy: the answer it gives.",
    )
    n = forms.IntegerField(
        min_value=1,
        max_value=PreviewRun.MAX_N,
        initial=4,
        label="N (rollouts)",
        widget=forms.NumberInput(attrs={"class": "n-input"}),
        error_messages={
            "min_value": services.N_OUT_OF_RANGE,
            "max_value": services.N_OUT_OF_RANGE,
            "invalid": services.N_NOT_A_NUMBER,
        },
    )

    backend = forms.ChoiceField(choices=[], required=False, label="Sandbox")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # shown on every task page: from the per-process endpoint cache, as workers read it
        self.model_configured = services.policy_model_configured(max_age_s=settings.ENDPOINT_CACHE_S)
        if not self.model_configured:
            self.fields["policy"].widget = PolicySelect(
                choices=self.fields["policy"].choices, disabled_values={"model"}
            )
            self.fields["policy"].help_text = "The model policy needs a policy model. " + MODEL_POLICY_HOWTO
        backends = services.sandbox_backends_enabled()
        self.fields["backend"].choices = [(b, b) for b in backends]
        self.fields["backend"].initial = backends[0] if backends else ""
        self.show_backend = len(backends) > 1
        self.bubblewrap_offered = "bubblewrap" in backends

    @functools.cached_property
    def widgets_html(self) -> dict[str, str]:
        """Each field's widget as HTML, for the template. The task page shows this form unbound on every
        view, and an unbound form's widgets depend only on what is configured (the policy model, the
        backends): they are rendered once per process for each configuration, not per page (Django
        renders each widget and option through templates, ~1.5 ms for these four)."""
        if self.is_bound:
            return {name: str(self[name]) for name in self.fields}
        key = (type(self), self.model_configured, tuple(self.fields["backend"].choices))  # initial: the first
        return rendered_once(key, lambda: {name: str(self[name]) for name in self.fields})

    def policy_string(self) -> str:
        policy = self.cleaned_data["policy"]
        return f"probe:{self.cleaned_data.get('probe_text') or ''}" if policy == "probe" else policy
