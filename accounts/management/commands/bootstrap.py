import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from accounts.permissions import ADMIN, AUTHOR, LAB, REVIEWER, ROLES


class Command(BaseCommand):
    help = (
        "Creates the role groups; on a new database (no users yet) also creates the demo users "
        "author, reviewer, admin and lab (builds and downloads packs) with random passwords, printed once."
    )

    def handle(self, *args, **options):
        for role in ROLES:
            Group.objects.get_or_create(name=role)
        User = get_user_model()
        if User.objects.exists():
            self.stdout.write("Users exist already; no demo users created.")
            return
        lines = []
        for username, role in (("author", AUTHOR), ("reviewer", REVIEWER), ("admin", ADMIN), ("lab", LAB)):
            password = secrets.token_urlsafe(9)
            if role == ADMIN:
                user = User.objects.create_superuser(username=username, email="", password=password)
            else:
                user = User.objects.create_user(username=username, password=password)
            user.groups.add(Group.objects.get(name=role))
            lines.append(f"  {username:<9} {password}   ({role})")
        self.stdout.write(self.style.SUCCESS("Demo users (shown once; change with `manage.py changepassword NAME`):"))
        for line in lines:
            self.stdout.write(line)
