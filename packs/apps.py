from django.apps import AppConfig


class PacksConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "packs"
    verbose_name = "Task packs"

    def ready(self) -> None:
        from gymwright import jobs
        from packs.services import pack_builds_resend, pack_verifications_resend

        # The broker check sends again the jobs of builds and checks that wait for the broker or that it lost.
        jobs.resender_register("pack builds", pack_builds_resend)
        jobs.resender_register("pack checks", pack_verifications_resend)
        from packs.services.health import dataset_checks_resend

        jobs.resender_register("dataset health checks", dataset_checks_resend)

        from packs import panels

        panels.register()  # the Packs link in the navigation
