from django.db import models


class ModelEndpoint(models.Model):
    """An OpenAI-compatible model endpoint for the agent policy or the LLM judge.

    The API key is never stored: `api_key_env` names the environment variable that
    holds it on the web and worker hosts.
    """

    class Role(models.TextChoices):
        POLICY = "policy", "Policy (agent)"
        JUDGE = "judge", "Judge"

    name = models.CharField(max_length=100, unique=True)
    role = models.CharField(max_length=10, choices=Role.choices)
    base_url = models.URLField(max_length=500)
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(max_length=100, blank=True, default="OPENAI_API_KEY",
                                   help_text="Name of the environment variable that holds the API key.")
    default_params = models.JSONField(default=dict, blank=True,
                                      help_text='e.g. {"temperature": 0, "max_tokens": 2048}')
    is_default = models.BooleanField(default=False, help_text="Used when a task or rubric names no endpoint.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role", "name"]
        constraints = [
            models.UniqueConstraint(fields=["role"], condition=models.Q(is_default=True),
                                    name="one_default_endpoint_per_role"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.role}: {self.model})"
