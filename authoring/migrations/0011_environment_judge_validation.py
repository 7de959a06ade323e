"""Per-environment rule for trusting a judged check: how many balanced labels, which TPR / TNR, and whether a
check that falls short blocks submission (default: a warning). Defaults are the issue's: 50 labels, 0.85."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("authoring", "0010_environment_judge_endpoint"),
    ]

    operations = [
        migrations.AddField(
            model_name="environment",
            name="judge_min_labels",
            field=models.PositiveIntegerField(
                default=50,
                validators=[
                    django.core.validators.MinValueValidator(2),
                    django.core.validators.MaxValueValidator(100000),
                ],
            ),
        ),
        migrations.AddField(
            model_name="environment",
            name="judge_min_rate",
            field=models.FloatField(
                default=0.85,
                validators=[
                    django.core.validators.MinValueValidator(0.5),
                    django.core.validators.MaxValueValidator(1.0),
                ],
            ),
        ),
        migrations.AddField(
            model_name="environment",
            name="judge_unvalidated_blocks",
            field=models.BooleanField(
                default=False,
                help_text="A judged check that is not validated blocks submission (else it is a warning).",
            ),
        ),
        migrations.AddConstraint(
            model_name="environment",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("judge_min_labels__gte", 2), ("judge_min_rate__gte", 0.5), ("judge_min_rate__lte", 1.0)
                ),
                name="environment_judge_validation_in_range",
            ),
        ),
    ]
