import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")

app = Celery("gymwright")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    task_ignore_result=True,
    # A rollout is long and must survive a worker crash: acknowledge after the work,
    # take one job at a time, redeliver if the worker is lost.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)
# Celery's Django fixup closes the database connection before and after every job unless this is set,
# so each rollout opened a PostgreSQL connection of its own (a backend started and authenticated, ~5 ms
# of the rollout's bookkeeping). Connections are kept as Django keeps them instead: sandbox.tasks closes
# an obsolete or broken one after each job (CONN_MAX_AGE, health checks), and the fixup still closes
# them every 1,000 jobs. The fixup reads the setting by its old-style name only.
app.conf["CELERY_DB_REUSE_MAX"] = 1000
app.autodiscover_tasks()

# Every worker checks its broker from its own timer: jobs waiting for it are sent, lost ones again (gymwright.jobs).
from gymwright.jobs import connect_worker_signals  # noqa: E402 - the app above must exist first

connect_worker_signals()
