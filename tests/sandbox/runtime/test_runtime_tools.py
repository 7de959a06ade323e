"""The tool runner's own bounds, on a real sandbox: each tool message is capped at `output_cap`
characters whatever the backend kept, and says how much there was.

The backend caps a command's output at the spec's `output_cap` bytes too, which hides the runner's cap
whenever both are equal: these tests give the runner a smaller cap than the sandbox's, so only the
runner's cap can bound the message."""

from __future__ import annotations

import pytest

from sandbox.runtime import SandboxSpec, get_backend
from sandbox.runtime.tools import ToolRunner, ToolSpec
from tests.support.services import require_bwrap

CAP = 200
BODY = "".join(f"line {n:05d}\n" for n in range(1000))  # 11,000 characters


@pytest.fixture(scope="module")
def box():
    require_bwrap()
    spec = SandboxSpec(
        memory_mb=256,
        pids=64,
        exec_timeout_s=30,
        output_cap=65536,
        workspace_mb=32,
        tmp_mb=32,
        tools=("bash", "read_file", "list_files", "submit"),
    )
    sandbox = get_backend("bubblewrap").start(
        spec,
        files={"big.txt": BODY.encode(), **{f"dir/file-{n:04d}.txt": b"x" for n in range(100)}},
        env_files={"tools/echo.sh": b"#!/bin/sh\ncat big.txt\n"},
    )
    yield sandbox
    sandbox.stop()


def runner(box, **kwargs) -> ToolRunner:
    return ToolRunner(box, box.spec, output_cap=CAP, **kwargs)


def truncated(text: str, total: int) -> str:
    return text[:CAP] + f"\n[truncated: {total} characters in all]"


def test_read_file_returns_the_first_cap_characters_and_the_files_length(box):
    outcome = runner(box).run("read_file", {"path": "big.txt"})
    assert not outcome.is_error
    assert outcome.content == truncated(BODY, len(BODY))


def test_read_file_under_the_cap_is_returned_whole(box):
    outcome = ToolRunner(box, box.spec, output_cap=len(BODY)).run("read_file", {"path": "big.txt"})
    assert outcome.content == BODY


def test_a_bash_message_is_capped_though_the_backend_kept_all_the_output(box):
    outcome = runner(box).run("bash", {"command": "cat big.txt"})
    assert outcome.exec["stdout_truncated"] is False  # the sandbox's own cap (64 KiB) did not apply
    whole = f"exit code: 0\n[stdout]\n{BODY}"
    assert outcome.content == whole[:CAP] + "\n[truncated: " + str(len(whole)) + " characters in all]"


def test_list_files_is_capped(box):
    outcome = runner(box).run("list_files", {})
    listing = "\n".join(box.list_files())
    assert len(listing) > CAP
    assert outcome.content == truncated(listing, len(listing))


def test_a_custom_tools_output_is_capped(box):
    tool = ToolSpec("dump", "prints big.txt", {"type": "object", "properties": {}}, command="sh /env/tools/echo.sh")
    outcome = runner(box, tools=[tool]).run("dump", {})
    assert not outcome.is_error and outcome.exec["exit_code"] == 0
    assert outcome.content == truncated(BODY, len(BODY))


def test_the_runner_defaults_to_the_specs_cap():
    spec = SandboxSpec(output_cap=1234)
    assert ToolRunner(None, spec).output_cap == 1234
    assert ToolRunner(None, spec, output_cap=99).output_cap == 99


def test_a_commands_timeout_is_the_smallest_of_asked_allowed_and_left():
    runner = ToolRunner(None, SandboxSpec(exec_timeout_s=30))
    assert runner._timeout(None, None) == 30  # nothing asked: the environment's limit
    assert runner._timeout(5, None) == 5  # asked for less: granted
    assert runner._timeout(500, None) == 30  # asked for more: the limit
    for odd in (0, -3, "7", None):
        assert runner._timeout(odd, None) == 30
    assert runner._timeout(5, 2.5) == 2.5  # the episode's time left is shorter
    assert runner._timeout(None, 0.0) == 0.1  # none left: a last tenth of a second, never 0 (no timeout)


def test_a_command_asking_for_more_time_than_allowed_is_killed_at_the_limit(box):
    spec = SandboxSpec(exec_timeout_s=1, tools=("bash", "submit"))
    outcome = ToolRunner(box, spec).run("bash", {"command": "sleep 20; echo late", "timeout_s": 600})
    assert outcome.is_error and outcome.exec["timed_out"] and outcome.exec["exit_code"] is None
    assert outcome.content.startswith("timed out (killed)") and "late" not in outcome.content


def test_a_timeout_under_a_second_is_granted_as_asked():
    # Asked for less than a second (but more than none): granted, not rounded up to the environment's limit.
    assert ToolRunner(None, SandboxSpec(exec_timeout_s=30))._timeout(0.5, None) == 0.5


def test_reading_a_file_that_is_not_there_is_an_error_the_model_is_told(box):
    outcome = runner(box).run("read_file", {"path": "no/such.txt"})
    assert outcome.is_error and outcome.content == "error: no such file: no/such.txt"


def test_a_custom_tool_that_exits_non_zero_is_an_error_with_its_output(box):
    tool = ToolSpec("fails", "exits 3", {"type": "object", "properties": {}}, command="echo broken >&2; exit 3")
    outcome = runner(box, tools=[tool]).run("fails", {})
    assert outcome.is_error and outcome.exec["exit_code"] == 3
    assert outcome.content.startswith("exit code: 3") and "broken" in outcome.content
