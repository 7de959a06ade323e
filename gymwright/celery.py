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
app.autodiscover_tasks()
