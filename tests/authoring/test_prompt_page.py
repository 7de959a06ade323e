"""A task's prompt on its pages: rendered once per version and kept, and never rendered past the editor's limit.

A 3 MB prompt (the API and imports accept one) made its task page take 6 s on every view, all of it Markdown."""

import pytest
from django.core.cache import cache

from authoring import services
from authoring.prompt_html import RENDERER_VERSION
from grading.engine.models import PROMPT_MAX_CHARS
from tests.authoring.conftest import task_content

pytestmark = pytest.mark.django_db


def kept(version) -> str | None:
    return cache.get(f"gymwright:prompt-html:{RENDERER_VERSION}:{version.sha256}")


def test_a_prompt_over_the_limit_is_refused_and_one_saved_before_it_is_shown_as_plain_text(client, author, environment):
    from django.db.models import QuerySet

    from authoring.models import TaskVersion
    from gymwright.errors import DomainError

    prompt = "A *line* with <script>alert(1)</script>.\n" * (PROMPT_MAX_CHARS // 40 + 1)
    assert len(prompt) > PROMPT_MAX_CHARS
    with pytest.raises(DomainError) as refused:  # the task format's bound, on every path
        services.task_create(
            slug="huge-prompt", environment=environment, author=author, content=task_content(prompt=prompt)
        )
    assert any(detail["pointer"] == "/prompt" for detail in refused.value.details)
    # A version saved before the bound (versions are never updated: a plain queryset stands in for the old data)
    task = services.task_create(
        slug="huge-prompt", environment=environment, author=author, content=task_content(prompt="short")
    )
    version = task.latest_version
    QuerySet(model=TaskVersion).filter(pk=version.pk).update(spec={**version.spec, "prompt": prompt})
    client.force_login(author)
    for url in (f"/tasks/{task.slug}/", f"/tasks/{task.slug}/versions/1/"):
        page = client.get(url).content.decode()
        assert f"This prompt is {len(prompt):,} characters long, over the {PROMPT_MAX_CHARS:,}" in page
        assert '<pre class="prompt-text">A *line* with &lt;script&gt;alert(1)&lt;/script&gt;.' in page
        assert "<em>line</em>" not in page and "<script>alert(1)" not in page
    preview = client.post("/markdown/preview/", {"prompt": prompt}).content.decode()
    assert "plain text" in preview and "<em>" not in preview


def test_a_versions_prompt_html_is_kept_by_its_hash_and_each_version_shows_its_own(client, author, environment):
    task = services.task_create(
        slug="kept-prompt", environment=environment, author=author, content=task_content(prompt="First *prompt*.")
    )
    first = task.latest_version
    cache.delete(f"gymwright:prompt-html:{RENDERER_VERSION}:{first.sha256}")
    client.force_login(author)
    assert "First <em>prompt</em>." in client.get(f"/tasks/{task.slug}/").content.decode()
    assert kept(first) == "<p>First <em>prompt</em>.</p>"
    second, _ = services.task_version_create(
        task=task, author=author, base_version=1, content=task_content(prompt="Second **prompt**.")
    )
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert "Second <strong>prompt</strong>." in page and "First" not in page
    assert kept(second) == "<p>Second <strong>prompt</strong>.</p>"
    assert "First <em>prompt</em>." in client.get(f"/tasks/{task.slug}/versions/1/").content.decode()
