from django.apps import AppConfig


class ReviewConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "review"
    verbose_name = "Review"

    def ready(self) -> None:
        from authoring.services import task_version_created_hook
        from review.services import task_versions_created

        # A new version starts a new draft: review's services alone change a task's status.
        task_version_created_hook(task_versions_created)

        from review import panels

        # The task page, the editor, the environment page and the navigation show review's panels.
        panels.register()

        from review import environment_settings

        # The environment API shows and sets the environment's blind rule (review's data) without importing review.
        environment_settings.register()
