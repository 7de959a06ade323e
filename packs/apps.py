from django.apps import AppConfig


class PacksConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "packs"
    verbose_name = "Task packs"
