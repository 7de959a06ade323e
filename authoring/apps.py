from django.apps import AppConfig


class AuthoringConfig(AppConfig):
    name = "authoring"
    default_auto_field = "django.db.models.BigAutoField"
