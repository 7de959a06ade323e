import pytest

from tests.support.services import (
    pytest_runtest_setup,  # noqa: F401 - the postgres marker requires PostgreSQL
    sandbox_dir,  # noqa: F401 - bubblewrap sandboxes for web-app tests
)
from tests.support.users import admin, author, lab, nobody, other_author, reviewer  # noqa: F401 - one per role
from tests.support.workers import (  # noqa: F401 - fixtures for worker tests
    celery_producer,
    own_redis_server,
    redis_db,
)


@pytest.fixture(scope="session")
def docker_client():
    """The Docker engine, for the tests that start containers; none of this process's outlives the session."""
    import docker

    from sandbox.runtime.backends.docker import OWNER_LABEL, owner_id
    from tests.support.services import require_docker

    client = require_docker()
    yield client
    # The low-level listing: the SDK's containers.list() inspects each container it lists, and
    # one another xdist worker removes in between fails the whole listing (CI 2026-11-27).
    for row in client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner_id()}"}):
        try:
            client.api.remove_container(row["Id"], force=True)
        except docker.errors.NotFound:
            pass


@pytest.fixture(scope="session")
def busybox_image(docker_client):
    from tests.support.images import busybox_image as build

    return build(docker_client)


@pytest.fixture(scope="session")
def python_image(docker_client):
    from tests.support.images import python_image as build

    return build(docker_client)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Tests close each connection after each request, as DB_CONN_MAX_AGE=0 would.

    Production keeps connections for a minute (settings.py); in tests, threads that make requests
    would keep theirs open and block dropping the test database at the end of the session.
    """
    from django.conf import settings

    for alias in settings.DATABASES.values():
        alias["CONN_MAX_AGE"] = 0


@pytest.fixture(autouse=True)
def _media_root(tmp_path, settings):
    """Each test writes uploads and blobs to its own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JUDGE_CACHE_DIR = tmp_path / "judge-cache"
    settings.SANDBOX_WORK_DIR = tmp_path / "sandboxes"


@pytest.fixture(autouse=True)
def _fresh_endpoint_cache():
    """A worker caches endpoint configuration per process; each test starts from its own rows."""
    from grading.endpoints import cache_clear

    cache_clear()
    yield
    cache_clear()


@pytest.fixture(autouse=True)
def _fresh_grade_facts():
    """The gates keep what they read of a finished rollout's grade per process, by rollout id (review.gate_evidence): ids
    never repeat in a database, but a test's rolled-back rows free theirs on SQLite."""
    from review import gate_evidence

    gate_evidence._grade_facts_kept.clear()
    yield
    gate_evidence._grade_facts_kept.clear()


@pytest.fixture
def eager_celery(settings):
    """Celery jobs run at once in this process (the job logic, without a worker)."""
    from gymwright.celery import app

    previous = app.conf.task_always_eager  # read before the override, or "restoring" keeps it eager
    settings.CELERY_TASK_ALWAYS_EAGER = True
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of the test's own (tests.support.faults.OwnRedis), for tests that stop, restart or break it."""
    from tests.support.faults import OwnRedis

    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def broker_down(tmp_path, monkeypatch):
    """This process's Celery app on a Redis of the test's own, not started yet (then `start()` it)."""
    from tests.support.faults import OwnRedis
    from tests.support.workers import producer_on

    server = OwnRedis(tmp_path)
    with producer_on(server.url, monkeypatch):
        yield server
    server.kill()
