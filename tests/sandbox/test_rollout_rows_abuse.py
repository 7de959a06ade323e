"""The preview page's rollout rows (templates/sandbox/_rollout_rows.html): what an agent or a worker wrote (an
error, a progress note) is escaped and cut."""

from django.utils import timezone

from grading.models import Grade
from sandbox.models import PreviewRun, Rollout

SCRIPT = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_rollout_rows_escape_agent_text_and_say_each_state(client, version, author):
    run = PreviewRun.objects.create(
        task_version=version,
        created_by=author,
        policy="nop",
        policy_kind="nop",
        n=4,
        backend="bubblewrap",
        status=PreviewRun.Status.RUNNING,
    )
    incomplete = Grade.objects.create(
        task_version=version,
        source="rollout",
        reward=0.5,
        earned=1,
        max=2,
        passed=False,
        complete=False,
        document={"checks": []},
    )
    Rollout.objects.bulk_create(
        [
            Rollout(
                preview_run=run,
                index=0,
                status=Rollout.Status.ERROR,
                attempts=2,
                error=SCRIPT * 10,
                finished_at=timezone.now(),
            ),
            Rollout(
                preview_run=run,
                index=1,
                status=Rollout.Status.RUNNING,
                attempts=1,
                progress={"phase": "agent<b>", "step": 3, "note": SCRIPT},
            ),
            Rollout(
                preview_run=run,
                index=2,
                status=Rollout.Status.DONE,
                attempts=1,
                reward=0.5,
                passed=False,
                grade=incomplete,
                steps=7,
                duration_ms=2500,
            ),
            Rollout(
                preview_run=run,
                index=3,
                status=Rollout.Status.DONE,
                attempts=1,
                reward=1.0,
                passed=True,
                steps=2,
                duration_ms=900,
            ),
        ]
    )
    client.force_login(author)
    page = client.get(f"/previews/{run.pk}/").content.decode()
    table = page[page.index('<table id="rollout-table">') :]
    table = table[: table.index("</table>")]
    assert "<script>" not in table and "<img" not in table and "<b>" not in table
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in table
    assert table.count('class="rollout-row"') == 4
    error_cell = table[table.index('<span class="error">&lt;script') :]
    assert len(error_cell[: error_cell.index("</span>")]) < 400  # truncated to 140 characters before escaping
    assert 'title="claimed 2 times">×2</span>' in table
    assert "agent&lt;b&gt; · step 3" in table  # a live rollout says where it is
    assert '<span class="warn">incomplete</span>' in table and '<span class="ok">passed</span>' in table
    assert "<td>7</td><td>2.5 s</td>" in table
