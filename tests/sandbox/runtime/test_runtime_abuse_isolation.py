"""Hostile commands against the sandbox's isolation, on both backends: nothing
an exec starts outlives it, nested namespaces and dangerous syscalls are
refused, the host's path stays out of sight, and egress never reaches the host."""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import time

import pytest

from sandbox.runtime import SandboxSpec
from tests.support.services import require_bwrap


@pytest.fixture
def iso_spec():
    return SandboxSpec(memory_mb=128, pids=48, cpus=1, exec_timeout_s=20, output_cap=65536, workspace_mb=8, tmp_mb=8)


@pytest.fixture
def box(python_backend, iso_spec):
    sandbox = python_backend.start(iso_spec)
    yield sandbox
    sandbox.stop()


WRITER = "while :; do date +%s%N >> /tmp/beat; sleep 0.05; done"


@pytest.mark.parametrize(
    "launch",
    [
        f"setsid sh -c '{WRITER}' </dev/null >/dev/null 2>&1 &",
        f"setsid sh -c '(setsid sh -c \"{WRITER}\" &) ' </dev/null >/dev/null 2>&1 &",
        f"setsid sh -c 'trap \"\" HUP INT TERM; {WRITER}' >/dev/null 2>&1 & sleep 0.3;",
    ],
)
def test_a_setsid_background_writer_does_not_outlive_its_exec(box, launch):
    started = box.exec(f"{launch} sleep 0.5; wc -l < /tmp/beat")
    assert started.exit_code == 0, started
    assert int(started.stdout.strip()) > 0, started  # it ran during its exec
    time.sleep(0.2)
    before = box.exec("wc -l < /tmp/beat").stdout
    time.sleep(1.0)
    # Grading time: the writer wrote nothing more and is not running.
    after = box.exec("wc -l < /tmp/beat")
    assert after.stdout == before, (before, after)
    processes = box.exec("ps -o args")
    assert "date +%s" not in processes.stdout.replace("ps -o args", ""), processes.stdout


def test_nested_user_namespaces_are_refused(box):
    # On main, bubblewrap let `unshare -Ur` give a full capability set inside.
    result = box.exec("unshare -Ur id -u; echo rc=$?")
    assert "rc=0" not in result.stdout and "0\n" not in result.stdout.split("rc=")[0], result
    probe = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())\n"
    )  # CLONE_NEWUSER
    result = box.exec(["python", "-c", probe])
    assert result.stdout == "-1 1\n", result  # EPERM


# (syscall number on x86_64, arguments): each is refused by Docker's default
# seccomp profile and by the bubblewrap filter.
REFUSED = {
    "keyctl": (250, (0, 0, 0)),
    "add_key": (248, (0, 0, 0, 0, 0)),
    "mount": (165, (0, 0, 0, 0, 0)),
    "bpf": (321, (0, 0, 0)),
    "perf_event_open": (298, (0, 0, 0, 0, 0)),
    "kexec_load": (246, (0, 0, 0, 0)),
    "open_by_handle_at": (304, (0, 0, 0)),
    "setns": (308, (0, 0)),
    "personality(ADDR_NO_RANDOMIZE)": (135, (0x0040000,)),
}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86_64's")
def test_dangerous_syscalls_are_refused_by_seccomp(box):
    refused = dict(REFUSED)
    if box.backend.name == "bubblewrap":
        # Docker engines before 25.0 still allow io_uring in their default profile.
        refused["io_uring_setup"] = (425, (1, 0))
    calls = "\n".join(
        f"print({name!r}, libc.syscall({nr}, {', '.join(map(str, args))}), ctypes.get_errno())"
        for name, (nr, args) in refused.items()
    )
    probe = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n" + calls + "\n"
    result = box.exec(["python", "-c", probe])
    assert result.exit_code == 0, result
    for line in result.stdout.splitlines():
        name, ret, err = line.rsplit(" ", 2)
        assert ret == "-1" and err == "1", line  # EPERM, not EFAULT/EINVAL from the kernel
    assert len(result.stdout.splitlines()) == len(refused)
    # Ordinary work still runs: threads, fork, personality(0).
    ok = box.exec(
        [
            "python",
            "-c",
            "import threading, os, ctypes\n"
            "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
            "pid = os.fork()\nos._exit(0) if pid == 0 else os.waitpid(pid, 0)\n"
            "print(ctypes.CDLL(None).personality(0) >= 0)\n",
        ]
    )
    assert ok.stdout == "thread\nTrue\n", ok


def test_the_hosts_sandbox_path_is_not_in_any_command_line(box):
    host_dir = str(getattr(box, "root", "")) or None
    result = box.exec("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done")
    assert result.exit_code == 0 and "sh -c" in result.stdout, result
    assert "--bind" not in result.stdout and "--ro-bind" not in result.stdout, result.stdout
    if host_dir:
        assert host_dir not in result.stdout, result.stdout
        assert os.path.dirname(host_dir) not in result.stdout, result.stdout


# -- egress -------------------------------------------------------------------


@pytest.fixture
def host_servers():
    """Two TCP servers of the host: `allowed` on loopback (the operator names it
    in the allow-list) and `web` on every address (stands for the web port)."""
    servers, stop = {}, threading.Event()

    def serve(srv):
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"host-service\n")

    threads = []
    for name, bind in (("allowed", "127.0.0.1"), ("web", "0.0.0.0")):
        srv = socket.socket()
        srv.bind((bind, 0))
        srv.listen(16)
        servers[name] = srv.getsockname()[1]
        thread = threading.Thread(target=serve, args=(srv,), daemon=True)
        thread.start()
        threads.append((thread, srv))
    yield servers
    stop.set()
    for thread, srv in threads:
        thread.join()
        srv.close()


def _host_ipv4_addresses() -> list[str]:
    from sandbox.runtime.egress_filter import host_addresses

    return [a.split("/")[0] for a in host_addresses() if not a.startswith("127.")]


def _host_neighbours() -> list[str]:
    """An address next to each of the host's (its subnet's first and last host: often the gateway)."""
    import ipaddress

    from sandbox.runtime.egress_filter import host_addresses

    found = []
    for address in host_addresses():
        network = ipaddress.ip_interface(address).network
        if not address.startswith("127.") and network.num_addresses > 2:
            found += [str(network[1]), str(network[-2])]
    return found


CONNECT = """
import json, socket, sys
out = {}
for host, port in json.loads(sys.argv[1]):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); out[f"{host}:{port}"] = s.recv(64).decode() or "open"
    except OSError as exc:
        out[f"{host}:{port}"] = "refused:" + type(exc).__name__
    finally:
        s.close()
print(json.dumps(out))
"""


def test_bubblewrap_egress_reaches_only_what_the_operator_allows(host_servers, iso_spec):
    require_bwrap()
    from sandbox.runtime import get_backend
    from sandbox.runtime.egress_filter import EgressPolicy

    allowed, web = host_servers["allowed"], host_servers["web"]
    # From the host, the services are there (so a refusal below is the sandbox's doing).
    for port in (5432, 6379, allowed, web):
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
    backend = get_backend("bubblewrap", egress=EgressPolicy.from_strings([f"127.0.0.1:{allowed}"]))
    targets = [["host.gymwright.internal", allowed], ["10.0.2.2", allowed]]
    forbidden = [
        ["127.0.0.1", 5432],
        ["127.0.0.1", 6379],
        ["127.0.0.1", web],
        ["10.0.2.2", 5432],
        ["10.0.2.2", 6379],
        ["10.0.2.2", web],
        ["169.254.169.254", 80],
    ]
    forbidden += [[addr, port] for addr in _host_ipv4_addresses() for port in (5432, 6379, web)]
    forbidden += [[addr, port] for addr in _host_neighbours() for port in (22, 53, 80)]
    with backend.start(iso_spec.with_overrides(network="egress")) as box:
        result = box.exec(["python3", "-c", CONNECT, json.dumps(targets + forbidden)])
        assert result.exit_code == 0, result
        seen = json.loads(result.stdout)
        for host, port in targets:
            assert seen[f"{host}:{port}"] == "host-service\n", seen
        for host, port in forbidden:
            assert seen[f"{host}:{port}"].startswith("refused"), (host, port, seen)
        # Its own namespace: not the host's interfaces, and no way to change the filter.
        net = box.exec("cat /proc/net/dev").stdout
        assert "tap0" in net and "eth0" not in net and "docker" not in net, net
        assert box.exec("nft flush ruleset").exit_code != 0


def test_bubblewrap_egress_never_reaches_the_hosts_abstract_unix_sockets(iso_spec):
    require_bwrap()
    from sandbox.runtime import get_backend
    from sandbox.runtime.egress_filter import EgressPolicy

    name = f"gymwright-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\0" + name)
    listener.listen(1)
    probe = (
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect('\\0' + sys.argv[1]); print('connected')\n"
        "except OSError as e:\n    print('refused', e.errno)\n"
    )
    try:
        with get_backend("bubblewrap", egress=EgressPolicy()).start(iso_spec.with_overrides(network="egress")) as box:
            result = box.exec(["python3", "-c", probe, name])
        assert result.stdout.startswith("refused"), result
    finally:
        listener.close()


def test_egress_is_refused_unless_the_operator_enables_it(backend, iso_spec):
    from sandbox.runtime import SandboxError

    with pytest.raises(SandboxError) as caught:
        backend.start(iso_spec.with_overrides(network="egress"))
    assert caught.value.permanent
    assert "GYMWRIGHT_SANDBOX_EGRESS" in str(caught.value)


def test_docker_egress_goes_only_through_the_operator_named_network(request, iso_spec):
    from sandbox.runtime import get_backend

    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")
    network = client.networks.create(f"gymwright-test-{os.getpid()}", internal=True, labels={"gymwright.test": "1"})
    try:
        backend = get_backend("docker", client=client, default_image=image, egress_network=network.name)
        with backend.start(iso_spec.with_overrides(network="egress")) as box:
            box.container.reload()
            assert list(box.container.attrs["NetworkSettings"]["Networks"]) == [network.name]
            # Its own namespace: the host's loopback services are not there.
            for port in (5432, 6379):
                result = box.exec(f"nc -z -w 2 127.0.0.1 {port}; echo rc=$?")
                assert "rc=0" not in result.stdout, result
    finally:
        network.remove()


# -- Dockerfile builds ---------------------------------------------------------


def _watch_build_containers(client, marker: str, found: dict, stop: threading.Event) -> None:
    # The RUN step's container is a real container on the engine: read its HostConfig.
    import docker

    while not stop.is_set() and not found:
        try:  # the SDK inspects each listed container: one that ends in between is NotFound for the whole list
            containers = client.containers.list(all=True)
        except docker.errors.NotFound:
            containers = []
        for container in containers:
            try:
                cmd = " ".join(container.attrs["Config"].get("Cmd") or [])
            except Exception:  # noqa: BLE001 - it may vanish between list and read
                continue
            if marker in cmd:
                found.update(container.attrs["HostConfig"])
                break
        time.sleep(0.1)


@pytest.mark.parametrize("build_network", [None, "named"])
def test_dockerfile_builds_run_with_limits_and_no_network_unless_allowed(request, iso_spec, build_network):
    from sandbox.runtime import get_backend

    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")
    network = None
    if build_network:
        network = client.networks.create(f"gymwright-build-{os.getpid()}", internal=True)
    marker = f"gw-build-{time.time_ns()}"
    dockerfile = (
        f"FROM {image}\n"
        f"RUN sleep 3; echo {marker}; cat /proc/net/dev > /build-net; "
        "(cat /sys/fs/cgroup/memory.max || cat /sys/fs/cgroup/memory/memory.limit_in_bytes) "
        "> /build-memory 2>/dev/null\n"
    )
    backend = get_backend(
        "docker",
        client=client,
        default_image=image,
        build_memory_mb=200,
        build_cpus=1,
        build_network=network.name if network else None,
    )
    found, stop = {}, threading.Event()
    watcher = threading.Thread(target=_watch_build_containers, args=(client, marker, found, stop), daemon=True)
    watcher.start()
    spec = iso_spec.with_overrides(dockerfile=dockerfile)
    try:
        with backend.start(spec) as box:
            memory = box.exec("cat /build-memory").stdout.strip()
            interfaces = [
                line.split(":")[0].strip() for line in box.exec("cat /build-net").stdout.splitlines() if ":" in line
            ]
    finally:
        stop.set()
        watcher.join()
        client.images.remove(spec.dockerfile_tag(), force=True)
        if network:
            network.remove()
    assert memory == str(200 * 1024 * 1024)
    assert found, "the RUN step's container was never seen"
    assert found["Memory"] == 200 * 1024 * 1024 and found["CpusetCpus"] == "0", found
    if build_network:
        assert found["NetworkMode"] == network.name and len(interfaces) == 2, (found, interfaces)
    else:
        assert found["NetworkMode"] == "none" and interfaces == ["lo"], (found, interfaces)


@pytest.mark.parametrize(
    "add",
    [
        "ADD {url} /fetched.txt",
        "add --chown=0:0 {url} /fetched.txt",
        'ADD ["{url}", "/fetched.txt"]',
        "ARG SOURCE={url}\nADD ${{SOURCE}} /fetched.txt",
        "ADD \\\n  {url} \\\n  /fetched.txt",
        # The engine joins a continued line with nothing between: a URL cut after "http:/" is still one URL.
        "ADD {url_head}\\\n{url_tail} /fetched.txt",
        # Lines the engine ends where a reader of Python's rules would continue them into the ADD: an escaped
        # escape character, a form feed after it (Python splits lines there, the engine only at line feeds), and a
        # "comment" led by U+001C (a blank to Python, not to the engine: the line is part of the RUN and ends it).
        "RUN echo \\\\\nADD {url} /fetched.txt",
        "RUN echo \\\x0c\nADD {url} /fetched.txt",
        "RUN echo \\\n\x1c# more\nADD {url} /fetched.txt",
    ],
    ids=["plain", "flag", "json", "variable", "continued", "split-url", "escaped-escape", "form-feed", "not-a-comment"],
)
def test_a_dockerfile_add_of_a_url_never_reaches_the_host(request, iso_spec, add):
    """The engine itself fetches an ADD's URL, on the host's network and outside the build's network_mode:
    `ADD http://127.0.0.1:...` read the host's own services into the image. Refused unless the operator
    gives builds a network."""
    import http.server

    from sandbox.runtime import SandboxError, get_backend

    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")
    asked: list[str] = []

    class Secret(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"host-only secret\n")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Secret)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/secret.txt"
    add = add.format(url=url, url_head=url[:6], url_tail=url[6:])
    spec = iso_spec.with_overrides(dockerfile=f"FROM {image}\n{add}\nRUN cat /fetched.txt\n")
    backend = get_backend("docker", client=client, default_image=image)
    try:
        with pytest.raises(SandboxError) as raised:
            with backend.start(spec) as box:
                box.exec("cat /fetched.txt")
    finally:
        server.shutdown()
        server.server_close()
        try:
            client.images.remove(spec.dockerfile_tag(), force=True)
        except Exception:  # noqa: BLE001 - not built: as it should be
            pass
    assert asked == [], asked
    # the ADD's first line
    line = 1 + next(n for n, text in enumerate(add.split("\n"), 1) if text.upper().startswith("ADD"))
    assert raised.value.permanent and f"line {line}: ADD" in raised.value.message, raised.value


@pytest.mark.parametrize(
    "lines",
    [
        ["WORKDIR /srv/ap\\", "p"],
        ["WORKDIR \\  ", "  # a comment inside the instruction", "", "/srv/app"],
        ["WORKDIR /srv", "WORKDIR ap\\", "p"],
        ["# escape=`", "FROM {image}", "WORKDIR /srv/ap`", "p"],
        ["# syntax=docker/dockerfile:1", "# escape=`", "FROM {image}", "WORKDIR /srv/ap`", "p"],
        ["# a comment ends the directives", "# escape=`", "FROM {image}", "WORKDIR /srv/ap\\", "p"],
        ["WORKDIR /srv/ap\\\r", "p\r"],
        ["WORKDIR /srv\\\\", "WORKDIR /app"],
        ["WORKDIR /srv \\\x0c", "WORKDIR /app"],
        ["WORKDIR /srv \\", "\x1c# not a comment to the engine", "WORKDIR /app"],
        ["  # escape=`", "FROM {image}", "WORKDIR /srv \\", "WORKDIR /app"],
        ["\ufeff# escape=`", "FROM {image}", "WORKDIR /srv \\", "WORKDIR /app"],
    ],
    ids=[
        "continued",
        "blanks-and-comment",
        "relative",
        "escape",
        "after-syntax",
        "late-directive",
        "crlf",
        "escaped-escape",
        "form-feed",
        "not-a-comment",
        "indented-directive",
        "byte-order-mark",
    ],
)
def test_the_dockerfile_reader_reads_workdir_as_the_engine_builds_it(request, lines):
    """`dockerfile_workdir` (where the docker sandbox links /workspace, and a Harbor export's WORKDIR) and the ADD
    refusal read one instruction reader; its joining of continued lines, the escape directive and comments is
    checked against the image the real engine builds from the same Dockerfile."""
    from sandbox.runtime.spec import dockerfile_workdir

    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")
    text = "\n".join(lines).format(image=image) + "\n"
    if "FROM" not in text:
        text = f"FROM {image}\n{text}"
    built, _ = client.images.build(fileobj=io.BytesIO(text.encode()), rm=True, network_mode="none")
    try:
        engine_workdir = built.attrs["Config"]["WorkingDir"]
        assert dockerfile_workdir(text) == engine_workdir, (text, engine_workdir)
    finally:
        client.images.remove(built.id, force=True)


def test_a_huge_dockerfile_is_refused_before_the_host_reads_it(request, iso_spec):
    """An author's Dockerfile is read on the host (its ADD sources, its WORKDIR) before any build: 10 MB of a
    million continued lines is refused by its size, with a message saying so, and gets no /workspace link;
    one under the bound of as many lines is read as the engine reads it."""
    from sandbox.runtime import SandboxError, get_backend
    from sandbox.runtime.spec import DOCKERFILE_MAX_CHARS, dockerfile_instructions, dockerfile_workdir

    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")
    huge = f"FROM {image}\nWORKDIR /srv/app\nRUN true \\\n" + "        \\\n" * 1_000_000 + "  && true\n"
    assert len(huge) > 10_000_000
    assert dockerfile_workdir(huge) is None
    backend = get_backend("docker", client=client, default_image=image)
    with pytest.raises(SandboxError) as raised:
        backend.resolve_image(iso_spec.with_overrides(dockerfile=huge))
    assert raised.value.permanent and "over the" in raised.value.message, raised.value
    lines = (DOCKERFILE_MAX_CHARS - 100) // 3
    big = "FROM x\nRUN a \\\n" + "b\\\n" * lines + "ADD http://example.invalid/x /x\n"
    assert [keyword for _, keyword, _ in dockerfile_instructions(big)] == ["FROM", "RUN"]
    assert dockerfile_workdir(big + "WORKDIR /srv/app\n") == "/srv/app"
