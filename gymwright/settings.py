"""Gymwright settings, read from environment variables with safe defaults.

Every variable is listed in README.md ("Settings"). The defaults give the
embedded setup that `make run` uses: SQLite, a file-backed Celery broker and the
bubblewrap sandbox, everything under ./var.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return int(value)


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


DATA_DIR = Path(env_str("GYMWRIGHT_DATA_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    # A per-checkout key kept in the data directory: safe by default, stable across restarts.
    _key_file = DATA_DIR / "secret_key"
    try:
        SECRET_KEY = _key_file.read_text().strip()
    except FileNotFoundError:
        import secrets

        from gymwright.datadir import private_dir, private_file

        private_dir(DATA_DIR)
        SECRET_KEY = secrets.token_urlsafe(50)
        private_file(_key_file, SECRET_KEY)  # created 0600: never readable by another user

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "authoring",
    "grading",
    "sandbox",
    "review",
    "packs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "gymwright.middleware.ContentSecurityPolicyMiddleware",
    # Static files from the app itself (compressed, content-hashed, cached for a year): one
    # gunicorn command gives a working site, with no proxy needed for /static/.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "gymwright.middleware.LoginRequiredEverywhereMiddleware",
    "gymwright.middleware.DomainErrorMiddleware",
]

ROOT_URLCONF = "gymwright.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "gymwright.context_processors.limits",
                "gymwright.context_processors.site_panels",
            ],
            # {% render_panels %}: a page places the panels other apps register for it (gymwright.pages).
            "libraries": {"pages": "gymwright.templatetags.pages"},
        },
    },
]

WSGI_APPLICATION = "gymwright.wsgi.application"
ASGI_APPLICATION = "gymwright.asgi.application"

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'gymwright.sqlite3'}")
# Persistent connections (with a health check before reuse) save a connect per request.
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60), conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the web server and the worker share one SQLite file.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
        }
    )
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend with a health check that asks the socket before it asks the server (gymwright/db).
    DATABASES["default"]["ENGINE"] = "gymwright.db.postgresql"
    # The hot reads of gymwright.sql run as server-side prepared statements (Django's own queries stay
    # client-side). Behind a pooler that cannot keep them (PgBouncer in transaction mode) set
    # DB_PREPARED_STATEMENTS=0.
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
        5 if env_bool("DB_PREPARED_STATEMENTS", True) else None
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# Django's model backend and database sessions, each reading its row with a query compiled once per
# process (gymwright.sql): the two queries every signed-in page makes (the user's with its roles).
AUTHENTICATION_BACKENDS = ["accounts.auth.ModelBackend"]
SESSION_ENGINE = "gymwright.sessions"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"  # the site's root, the task list (gymwright/urls.py); settings name no app's URL
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(DATA_DIR / "static")))
# After `collectstatic` (make serve does it) pages link content-hashed names served with
# far-future cache headers; before it (make run, tests) WhiteNoise serves the source files.
STATIC_MANIFEST = (STATIC_ROOT / "staticfiles.json").is_file()
try:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start when it is missing
except OSError:
    pass
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "gymwright.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not STATIC_MANIFEST
WHITENOISE_AUTOREFRESH = DEBUG

MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(DATA_DIR / "media")))
MEDIA_URL = "media/"

# Uploads: one cap for every file (attachments, environment data, workspace files for dry runs).
UPLOAD_MAX_BYTES = env_int("GYMWRIGHT_UPLOAD_MAX_MB", 50) * 1024 * 1024
REVIEW_COMMENT_MAX_CHARS = env_int("GYMWRIGHT_REVIEW_COMMENT_MAX_CHARS", 10_000)  # one review comment or reply
REVIEW_UNDO_S = max(1, env_int("GYMWRIGHT_REVIEW_UNDO_S", 5))  # the review page waits this long before sending
# Line diffs (the compare page, the review page's files) are the author's text compared in the web process, and
# difflib's worst case is cubic in repeated lines: one page's diffs get this many seconds, and one comparison at
# most this many line pairs; past either, the rest of a diff is shown whole, saying which limit it hit.
DIFF_BUDGET_S = float(env_str("GYMWRIGHT_DIFF_BUDGET_S", "2"))
DIFF_MAX_CELLS = env_int("GYMWRIGHT_DIFF_MAX_CELLS", 1_000_000)
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024  # non-file form fields (a rubric JSON can be large)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "gymwright.uploads.CappedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# Task packs: scratch space for builds and imports, and caps on what a build or an import may hold.
PACK_SCRATCH_DIR = Path(env_str("GYMWRIGHT_PACK_SCRATCH_DIR", str(DATA_DIR / "pack-scratch")))
PACK_MAX_BYTES = env_int("GYMWRIGHT_PACK_MAX_MB", 4096) * 1024 * 1024
# A building pack version whose build has not reported progress for this long (its worker died,
# or its job message was lost before a worker took it) is marked failed by the reaper.
PACK_BUILD_STALE_AFTER_S = env_int("GYMWRIGHT_PACK_BUILD_STALE_AFTER_S", 900)
IMPORT_MAX_BYTES = env_int("GYMWRIGHT_IMPORT_MAX_MB", 512) * 1024 * 1024
IMPORT_MAX_MEMBERS = env_int("GYMWRIGHT_IMPORT_MAX_MEMBERS", 200000)
IMPORT_MAX_ROWS = env_int("GYMWRIGHT_IMPORT_MAX_ROWS", 100000)
# A Harbor task's build context (environment/ beside its Dockerfile), carried with its environment.
IMPORT_BUILD_CONTEXT_MAX_FILES = env_int("GYMWRIGHT_IMPORT_BUILD_CONTEXT_MAX_FILES", 2000)
IMPORT_BUILD_CONTEXT_MAX_BYTES = env_int("GYMWRIGHT_IMPORT_BUILD_CONTEXT_MAX_MB", 256) * 1024 * 1024

# Dry runs grade untrusted rubrics and files in a child process with these limits, never in the web process.
DRY_RUN_CPU_S = env_int("GYMWRIGHT_DRY_RUN_CPU_S", 30)
DRY_RUN_MEMORY_MB = env_int("GYMWRIGHT_DRY_RUN_MEMORY_MB", 1024)
DRY_RUN_TIMEOUT_S = env_int("GYMWRIGHT_DRY_RUN_TIMEOUT_S", 60)

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Served over HTTPS only: browsers remember it (HSTS) for this many seconds.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000) if SESSION_COOKIE_SECURE else 0
# Scripts and styles come only from our own static files: no inline script, style or eval.
CONTENT_SECURITY_POLICY = env_str(
    "CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.auth.TokenAuthentication",  # DRF's, reading the token, its user and roles in one query
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "gymwright.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "gymwright.api.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "gymwright.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}

# The OpenAPI schema (/api/schema/) and its docs (/api/docs/) need a login unless this is on.
API_DOCS_PUBLIC = env_bool("GYMWRIGHT_API_DOCS_PUBLIC", False)

SPECTACULAR_SETTINGS = {
    "TITLE": "Gymwright API",
    "DESCRIPTION": "Environments, tasks, immutable task versions, grading and previews.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI is served from the vendored sidecar package: no CDN is needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery. The default broker is kombu's filesystem transport under DATA_DIR: a real
# broker that needs no server, so `make run` starts a real worker beside the web server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # default is ./control in the working directory
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith("redis"):
    # A task not acknowledged within this time is redelivered; longer than any rollout.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 7200)}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 2)
# A dataset's health check holds a worker for up to hours (GYMWRIGHT_DATASET_CHECK_TOTAL_S): it goes to a queue of
# its own (packs.tasks names it on the job), so previews, dry runs and pack builds never wait behind one. `make run`
# starts a worker for it; on worker hosts, start one with `-Q <this queue>` (README, "Scaling out").
DATASET_CHECK_QUEUE = env_str("GYMWRIGHT_DATASET_CHECK_QUEUE", "datasets")

# Sandboxes: "bubblewrap" (embedded default) or "docker" (DOCKER_HOST may be remote).
SANDBOX_BACKEND = env_str("GYMWRIGHT_SANDBOX_BACKEND", "bubblewrap")
# The docker backend's image for environments that name none (bubblewrap uses the host system).
SANDBOX_IMAGE = env_str("GYMWRIGHT_SANDBOX_IMAGE", "")
SANDBOX_WORK_DIR = Path(env_str("GYMWRIGHT_SANDBOX_DIR", str(DATA_DIR / "sandboxes")))
# What the worker spends on one sandbox's files: the workspace snapshot taken for grading
# (apparent size, so sparse files count in full; file count) and any host-side file operation.
SANDBOX_SNAPSHOT_MAX_MB = env_int("GYMWRIGHT_SNAPSHOT_MAX_MB", 256)
SANDBOX_SNAPSHOT_MAX_FILES = env_int("GYMWRIGHT_SNAPSHOT_MAX_FILES", 10000)
SANDBOX_IO_TIMEOUT_S = float(env_str("GYMWRIGHT_SANDBOX_IO_TIMEOUT_S", "30"))
# Network egress (environments with network: allowed/egress): off unless enabled. Bubblewrap:
# user-mode NAT that never reaches this host, loopback, link-local or private ranges except the
# allow-list (127.0.0.1:PORT, ADDR[/PREFIX][:PORT]); docker: only through the named network.
SANDBOX_EGRESS = env_bool("GYMWRIGHT_SANDBOX_EGRESS", False)
SANDBOX_EGRESS_ALLOW = env_list("GYMWRIGHT_SANDBOX_EGRESS_ALLOW", "")
SANDBOX_DOCKER_NETWORK = env_str("GYMWRIGHT_SANDBOX_DOCKER_NETWORK", "")
# Dockerfile builds (docker backend): RUN steps' memory and CPUs; no network unless named.
SANDBOX_BUILD_MEMORY_MB = env_int("GYMWRIGHT_SANDBOX_BUILD_MEMORY_MB", 2048)
SANDBOX_BUILD_CPUS = env_int("GYMWRIGHT_SANDBOX_BUILD_CPUS", 1)
SANDBOX_BUILD_NETWORK = env_str("GYMWRIGHT_SANDBOX_BUILD_NETWORK", "")
# A dataset's health check (`manage.py check_dataset`, the report an import of Harbor tasks starts): the time all
# the rollouts of one task may take together (each one's agent and verifier time is cut to what is left), the
# time of the whole run (the tasks past it are reported as not checked), and the size of the stored report.
DATASET_CHECK_TASK_S = env_int("GYMWRIGHT_DATASET_CHECK_TASK_S", 900)
DATASET_CHECK_TOTAL_S = env_int("GYMWRIGHT_DATASET_CHECK_TOTAL_S", 4 * 3600)
DATASET_CHECK_REPORT_MAX_MB = env_int("GYMWRIGHT_DATASET_CHECK_REPORT_MAX_MB", 16)
# The hack and verifier probes an import's health report runs (names without `hack:`); empty: every one that applies.
DATASET_CHECK_PROBES = env_list("GYMWRIGHT_DATASET_CHECK_PROBES", "")
# A RUNNING rollout whose heartbeat is older than this is stale (its worker died).
ROLLOUT_STALE_AFTER_S = env_int("GYMWRIGHT_ROLLOUT_STALE_AFTER_S", 120)
# A QUEUED rollout whose job message was sent this long ago and never claimed is sent again
# (a broker restart lost it); duplicates are harmless, the claim runs one.
ROLLOUT_REQUEUE_AFTER_S = env_int("GYMWRIGHT_ROLLOUT_REQUEUE_AFTER_S", 900)
# Every worker checks its broker this often (gymwright.jobs): it sends the jobs that waited for a broker that
# was down, and finds out from a canary message whether the broker lost what it held (a restart without
# persistence) and then sends every queued job again. Shorter: faster recovery, one small broker round trip
# per worker per check.
BROKER_CHECK_S = env_int("GYMWRIGHT_BROKER_CHECK_S", 30)
# Workers reuse model endpoint configuration this long before reading the admin's rows again.
ENDPOINT_CACHE_S = float(env_str("GYMWRIGHT_ENDPOINT_CACHE_S", "30"))
# Operator ceilings on what an environment may ask for (refused at save, with the field named, and at preview).
SANDBOX_MAX_MEMORY_MB = env_int("GYMWRIGHT_MAX_MEMORY_MB", 4096)
SANDBOX_MAX_PIDS = env_int("GYMWRIGHT_MAX_PIDS", 1024)
SANDBOX_MAX_DISK_MB = env_int("GYMWRIGHT_MAX_DISK_MB", 4096)  # workspace_mb and tmp_mb
SANDBOX_MAX_OUTPUT_CAP_BYTES = env_int("GYMWRIGHT_MAX_OUTPUT_CAP_MB", 16) * 1024 * 1024
SANDBOX_MAX_TIMEOUT_S = env_int("GYMWRIGHT_MAX_TIMEOUT_S", 3600)  # timeout_s and exec_timeout_s
# Backends a preview may ask for (the API's `backend`); the configured backend by default.
SANDBOX_BACKENDS_ALLOWED = env_list("GYMWRIGHT_SANDBOX_BACKENDS", SANDBOX_BACKEND)
# Per user: rollouts queued or running at once, and preview starts (API, form, Run gates), counted in the database.
PREVIEW_MAX_ROLLOUTS_IN_FLIGHT = env_int("GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT", 64)
PREVIEW_RATE = env_str("GYMWRIGHT_PREVIEW_RATE", "60/hour")
if PREVIEW_RATE and not re.fullmatch(r"\d+/\s*[smhd][a-z]*", PREVIEW_RATE):
    raise ValueError(f"GYMWRIGHT_PREVIEW_RATE must read like 60/hour or 5/minute, not {PREVIEW_RATE!r}")
# Django's cache holds the throttle counts, so every web process must share it: a folder under the
# data directory by default (shared by the processes of one host), or Redis (GYMWRIGHT_CACHE_URL=redis://...)
# when web servers run on several hosts.
CACHE_URL = env_str("GYMWRIGHT_CACHE_URL", "")
if CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": "gymwright",
        }
    }
elif CACHE_URL:
    raise ValueError(f"GYMWRIGHT_CACHE_URL: expected redis://, rediss:// or unix://, got {CACHE_URL.split(':')[0]}:")
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(DATA_DIR / "cache"),
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    }

# Models. Endpoints can also be configured in the admin (ModelEndpoint); these
# environment variables are the fallback. Secrets are never stored in the database.
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "")
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "")
JUDGE_MODEL = env_str("GYMWRIGHT_JUDGE_MODEL", "")
POLICY_MODEL = env_str("GYMWRIGHT_POLICY_MODEL", "")
JUDGE_CONCURRENCY = env_int("GYMWRIGHT_JUDGE_CONCURRENCY", 16)
JUDGE_TIMEOUT_S = float(env_str("GYMWRIGHT_JUDGE_TIMEOUT_S", "60"))
# A failing judge call (timeout, 429, 5xx) is retried this many times, all attempts within the
# deadline: a flapping endpoint leaves the check unscored with the reason within a few minutes.
JUDGE_MAX_RETRIES = env_int("GYMWRIGHT_JUDGE_MAX_RETRIES", 4)
JUDGE_DEADLINE_S = float(env_str("GYMWRIGHT_JUDGE_DEADLINE_S", "180"))
# ...and all the judge calls of one grade start within this: the rest are unscored with the reason.
JUDGE_GRADE_DEADLINE_S = float(env_str("GYMWRIGHT_JUDGE_GRADE_DEADLINE_S", "300"))
JUDGE_CACHE_DIR = Path(env_str("GYMWRIGHT_JUDGE_CACHE_DIR", str(DATA_DIR / "judge-cache")))
# An answer longer than this is not sent to the judge: its judge checks fail (a penalty is charged).
JUDGE_MAX_CHARS = env_int("GYMWRIGHT_JUDGE_MAX_CHARS", 100_000)
if JUDGE_MAX_CHARS < 1:
    raise ValueError("GYMWRIGHT_JUDGE_MAX_CHARS must be a positive number of characters")

# The rubric copilot drafts checks with the judge endpoint of this name (empty: the default judge) and
# tests them: its model calls time out after COPILOT_TIMEOUT_S, at most COPILOT_CONCURRENCY answers are
# graded at once, each drafted check's pattern searches have COPILOT_CHECK_CPU_S, and the prompt,
# reference answer and reference files it sends are at most COPILOT_INPUT_MAX_CHARS characters each.
# Each reply is at most COPILOT_MAX_TOKENS tokens (sent as max_tokens; an endpoint's lower max_tokens wins).
COPILOT_MODEL = env_str("GYMWRIGHT_COPILOT_MODEL", "")
COPILOT_TIMEOUT_S = float(env_str("GYMWRIGHT_COPILOT_TIMEOUT_S", "120"))
COPILOT_CONCURRENCY = max(1, env_int("GYMWRIGHT_COPILOT_CONCURRENCY", 4))
COPILOT_CHECK_CPU_S = float(env_str("GYMWRIGHT_COPILOT_CHECK_CPU_S", "1"))
COPILOT_INPUT_MAX_CHARS = env_int("GYMWRIGHT_COPILOT_INPUT_MAX_CHARS", 50_000)
COPILOT_MAX_TOKENS = max(1, env_int("GYMWRIGHT_COPILOT_MAX_TOKENS", 8192))
# A draft runs in the web request: all its model calls and grading end within COPILOT_DEADLINE_S, by
# default 5 s under gunicorn's timeout (GUNICORN_TIMEOUT), which would otherwise kill the worker mid-draft.
COPILOT_DEADLINE_S = float(env_str("GYMWRIGHT_COPILOT_DEADLINE_S", str(max(1, env_int("GUNICORN_TIMEOUT", 30) - 5))))

# The data directory is 0700 (0711 when the sandbox work directory is inside it, so the sandbox
# user can pass through to its own folder), its folders 0700, the SQLite file and secret key 0600.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
from gymwright.datadir import data_dir_secure  # noqa: E402

data_dir_secure(
    DATA_DIR,
    sandbox_dir=SANDBOX_WORK_DIR,
    private_dirs=[MEDIA_ROOT, JUDGE_CACHE_DIR, DATA_DIR / "broker", DATA_DIR / "cache"],
    private_files=[DATA_DIR / "secret_key"]
    + ([Path(DATABASES["default"]["NAME"])] if DATABASES["default"]["ENGINE"].endswith("sqlite3") else []),
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.server": {"level": "WARNING"}},
}
