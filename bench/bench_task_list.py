"""Task list at 10,000 tasks vs 100 tasks: queries per page and time per page, side by side.

Run: .venv/bin/python bench/bench_task_list.py   (uses a throwaway SQLite database, or
DATABASE_URL if set — then it creates and drops its own test database)
"""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
import run_scratch

os.environ.setdefault("GYMWRIGHT_DATA_DIR", str(run_scratch.folder("task-list")))

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.runner import DiscoverRunner  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402


def main() -> None:
    setup_test_environment()
    settings.ALLOWED_HOSTS = ["*"]
    # A test database of this run's own (never the suite's `test_<name>`), dropped at the end.
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = run_scratch.database_name(
        "/" + settings.DATABASES["default"]["NAME"], "tasklist"
    )
    runner = DiscoverRunner(verbosity=0, interactive=False)
    old_config = runner.setup_databases()
    try:
        from django.contrib.auth.models import Group, User
        from django.test import Client

        from authoring import services
        from authoring.models import Task
        from tests.authoring.test_views import _bulk_tasks

        user = User.objects.create_user("bench")
        user.groups.add(Group.objects.get_or_create(name="author")[0])
        environment = services.environment_create(slug="shell", name="Shell", author=user, spec={})
        client = Client()
        client.force_login(user)

        def measure(url: str, runs: int = 30) -> tuple[float, int]:
            client.get(url)
            executed = []
            with connection.execute_wrapper(lambda execute, sql, *args: executed.append(sql) or execute(sql, *args)):
                client.get(url)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - start)
                assert response.status_code == 200
            return statistics.median(times) * 1000, len(executed)

        urls = ["/", "/?page=50", "/?tag=tag3&status=draft", "/?q=bulk-0004"]
        _bulk_tasks(100, user, environment)
        small = {url: measure(url) for url in urls}
        Task.objects.all().delete()
        _bulk_tasks(10_000, user, environment)
        large = {url: measure(url) for url in urls}
        print(f"database: {connection.vendor}")
        print(f"{'page':<28}{'100 tasks':>14}{'10k tasks':>14}{'ratio':>8}{'queries':>14}")
        for url in urls:
            (t_small, q_small), (t_large, q_large) = small[url], large[url]
            print(
                f"{url:<28}{t_small:>11.1f} ms{t_large:>11.1f} ms{t_large / t_small:>8.2f}{q_small:>7} / {q_large:<5}"
            )
    finally:
        runner.teardown_databases(old_config)


if __name__ == "__main__":
    main()
