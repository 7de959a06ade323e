from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from authoring.services import task_version_created_hook
        from grading.services import example_answers_schedule

        # Every new task version grades its example answers (authoring cannot import grading).
        task_version_created_hook(example_answers_schedule)
