"""/healthz and /favicon.ico answer GET and HEAD, as every read does; any other method is 405 (they answered
every method, a POST or a DELETE with "ok")."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("path, status", [("/healthz", 200), ("/favicon.ico", 302)])
def test_healthz_and_favicon_answer_reads_only(client, db, path, status):
    assert client.get(path).status_code == status
    assert client.head(path).status_code == status
    for method in ("post", "put", "patch", "delete", "options"):
        response = getattr(client, method)(path)
        assert response.status_code == 405, method
        assert response["Allow"] == "GET, HEAD"
