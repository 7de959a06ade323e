import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
application = get_wsgi_application()
# Import every view now (Django does it on a process's first request): a server that loads the app
# once and forks its workers (gunicorn's preload_app, `make serve`) then shares these modules, where
# each worker paid ~0.2 s on its first request, a recycled one included (four slow bulk imports in
# the first rounds of bench/bench_vs_labelstudio.py). Nothing here touches the database.
get_resolver().url_patterns  # noqa: B018 - reading it builds and caches the patterns
