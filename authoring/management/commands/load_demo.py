from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from accounts.permissions import ADMIN, AUTHOR
from authoring import services
from authoring.demo import DEMO_ENVIRONMENT, DEMO_TASKS, demo_file_refs
from authoring.models import Environment, Task


class Command(BaseCommand):
    help = "Loads the demo environment and its three example tasks (skips what already exists)."

    def add_arguments(self, parser):
        parser.add_argument("--owner", default="author", help="username that owns the demo content")

    def handle(self, *args, owner, **options):
        User = get_user_model()
        user = (
            User.objects.filter(username=owner).first()
            or User.objects.filter(groups__name__in=[AUTHOR, ADMIN]).first()
            or User.objects.filter(is_superuser=True).first()
        )
        if user is None:
            self.stderr.write("No author to own the demo content; run `manage.py bootstrap` first.")
            return
        environment = Environment.objects.filter(slug=DEMO_ENVIRONMENT["slug"]).first()
        if environment is None:
            environment = services.environment_create(
                slug=DEMO_ENVIRONMENT["slug"],
                name=DEMO_ENVIRONMENT["name"],
                description=DEMO_ENVIRONMENT["description"],
                author=user,
                spec=DEMO_ENVIRONMENT["spec"],
            )
            self.stdout.write(f"Created environment {environment.slug}")
        for demo in DEMO_TASKS:
            if Task.objects.filter(slug=demo["slug"]).exists():
                continue
            for text in demo["files"].values():
                services.blob_store(data=text.encode())
            files = demo_file_refs(demo)
            content = {**demo["content"], "files": files, "tags": demo["tags"]}
            services.task_create(slug=demo["slug"], environment=environment, author=user, content=content)
            self.stdout.write(f"Created task {demo['slug']}")
