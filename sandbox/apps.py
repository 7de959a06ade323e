from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "sandbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from grading.services import example_sandbox_grader_register
        from sandbox.example_answers import example_run_enqueue

        # Example answers whose checks run in the sandbox are graded here (grading cannot import sandbox).
        example_sandbox_grader_register(example_run_enqueue)

        from gymwright import jobs
        from sandbox.example_answers import example_runs_resend
        from sandbox.services import rollouts_resend

        # The broker check sends again the jobs of rollouts (and of sandbox runs of example answers) that wait
        # for the broker or that it lost.
        jobs.resender_register("rollouts", rollouts_resend)
        jobs.resender_register("sandbox example runs", example_runs_resend)

        from sandbox import panels

        # The task page shows its previews through the panel sandbox registers.
        panels.register()
