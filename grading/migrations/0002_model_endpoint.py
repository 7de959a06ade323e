"""ModelEndpoint moves from sandbox to grading (so that grading never imports sandbox).

The rows are kept: the model's state is created here without touching the
database, then its table is renamed from sandbox_modelendpoint; sandbox's
0003 removes the old state. Also adds `response_format` (judge structured output).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0001_initial"),
        ("sandbox", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ModelEndpoint",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=100, unique=True)),
                        (
                            "role",
                            models.CharField(choices=[("policy", "Policy (agent)"), ("judge", "Judge")], max_length=10),
                        ),
                        ("base_url", models.URLField(max_length=500)),
                        ("model", models.CharField(max_length=200)),
                        (
                            "api_key_env",
                            models.CharField(
                                blank=True,
                                default="OPENAI_API_KEY",
                                help_text="Name of the environment variable that holds the API key.",
                                max_length=100,
                            ),
                        ),
                        (
                            "default_params",
                            models.JSONField(
                                blank=True, default=dict, help_text='e.g. {"temperature": 0, "max_tokens": 2048}'
                            ),
                        ),
                        (
                            "is_default",
                            models.BooleanField(
                                default=False, help_text="Used when a task or rubric names no endpoint."
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "ordering": ["role", "name"],
                        "db_table": "sandbox_modelendpoint",
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("is_default", True)),
                                fields=("role",),
                                name="one_default_endpoint_per_role",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="modelendpoint", table=None),
        migrations.AddField(
            model_name="modelendpoint",
            name="response_format",
            field=models.CharField(
                choices=[
                    ("auto", "Auto (json_schema, then json_object, then none)"),
                    ("json_schema", "JSON schema (strict)"),
                    ("json_object", "JSON object"),
                    ("none", "None (the prompt alone asks for JSON)"),
                ],
                default="auto",
                max_length=12,
                help_text="How a judge asks for its JSON verdict. Auto sends a strict JSON schema and falls back to "
                "json_object, then to none, when the endpoint refuses it.",
            ),
        ),
    ]
