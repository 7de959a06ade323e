"""`manage.py judge_meta_eval ENV_SLUG [--json]`: HealthBench-style meta-evaluation of an environment's judges.

Per judged check, the judge against reviewers' labels (the human verdict is the truth): TPR, TNR, the F1 of its
"met" and of its "not met" verdicts, their mean (macro F1, the figure HealthBench reports for its grader against
physicians), κ, and whether the environment's rule validates it; then the environment's pooled figures and the
mean of its checks' macro F1. The figures are the agreement page's and the API's (review.agreement). Exit 0, or 2
for an unknown environment.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from authoring.models import Environment
from review.agreement import agreement_json


def _figure(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


class Command(BaseCommand):
    help = "Print the judge's F1 against reviewers' labels per judged check, and macro F1, for an environment."

    def add_arguments(self, parser):
        parser.add_argument("environment", help="the environment's slug")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print one JSON document instead of a table"
        )

    def handle(self, *args, environment: str, as_json: bool = False, **options):
        found = Environment.objects.filter(slug=environment).first()
        if found is None:
            raise CommandError(f"unknown environment {environment!r}: give the slug of an existing one", returncode=2)
        agreement = agreement_json(environment=found)
        checks = [
            {"task": row["task"], "check_id": row["check_id"], **row["calibration"]}
            for row in agreement["checks"]
            if row["calibration"]["answers"]
        ]
        scores = [row["macro_f1"] for row in checks if row["macro_f1"] is not None]
        report = {
            "environment": found.slug,
            "rule": agreement["rule"],
            "checks": checks,
            "pooled": agreement["overall"]["calibration"],
            "mean_macro_f1": sum(scores) / len(scores) if scores else None,
        }
        if as_json:
            self.stdout.write(_dumps(report))
            return
        self._table(report)

    def _table(self, report: dict) -> None:
        rule = report["rule"]
        self.stdout.write(
            f"Judge meta-evaluation in {report['environment']} (validated: {rule['min_labels']} labelled answers, "
            f"{rule['min_per_class']} of each class, TPR and TNR >= {rule['min_rate']:.2f})"
        )
        if not report["checks"]:
            self.stdout.write("No labelled judge verdicts yet: label some on the review pages first.")
            return
        header = ("task", "check", "answers", "met/not", "TPR", "TNR", "F1 met", "F1 not", "macro F1", "kappa", "")
        rows = [header]
        for row in report["checks"]:
            rows.append(
                (
                    row["task"],
                    row["check_id"],
                    str(row["answers"]),
                    f"{row['answers_met']}/{row['answers_not_met']}",
                    _figure(row["tpr"]),
                    _figure(row["tnr"]),
                    _figure(row["f1_met"]),
                    _figure(row["f1_not_met"]),
                    _figure(row["macro_f1"]),
                    _figure(row["kappa"]),
                    "validated" if row["validated"] else "not validated",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        pooled = report["pooled"]
        self.stdout.write(
            f"pooled over {pooled['answers']} answers: TPR {_figure(pooled['tpr'])}, TNR {_figure(pooled['tnr'])}, "
            f"macro F1 {_figure(pooled['macro_f1'])}; mean macro F1 over {len(report['checks'])} "
            f"check{'s' if len(report['checks']) != 1 else ''}: {_figure(report['mean_macro_f1'])}"
        )


def _dumps(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
