from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from authoring.services import task_version_created_hook
        from grading.services import example_answers_schedule

        # Every new task version grades its example answers (authoring cannot import grading).
        task_version_created_hook(example_answers_schedule)

        from grading import panels

        # Authoring's pages show grading's panels (example answers, dry run, an environment's judge) without loading
        # grading's tags.
        panels.register()

        from authoring.services import environment_field_register
        from grading.apis import environment_judge_field

        # The environment API shows and sets the environment's judge (grading's data) without importing grading.
        environment_field_register(environment_judge_field())

        from grading.services import dry_runs_resend, example_runs_resend
        from gymwright import jobs

        # The broker check sends again the jobs of dry runs and example answers that wait for it or that it lost.
        jobs.resender_register("dry runs", dry_runs_resend)
        jobs.resender_register("example answers", example_runs_resend)
