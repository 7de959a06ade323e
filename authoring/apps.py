from django.apps import AppConfig


class AuthoringConfig(AppConfig):
    name = "authoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from authoring import panels

        # The site's layout (gymwright's base.html) shows authoring's links through the panels it registers.
        panels.register()
