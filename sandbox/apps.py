from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "sandbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from grading.services import example_sandbox_grader_register
        from sandbox.examples import example_run_enqueue

        # Example answers whose checks run in the sandbox are graded here (grading cannot import sandbox).
        example_sandbox_grader_register(example_run_enqueue)
