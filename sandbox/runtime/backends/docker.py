"""The docker backend (production): one container per rollout, exec'd into.

The container runs the environment's image (or its Dockerfile, built once and
cached as `gymwright-env:<sha of the Dockerfile>`) with `sleep infinity` under
docker-init (both as uid 65533, out of the sandbox user's reach), execs as a
non-root user (65534), no capabilities, no-new-privileges, a
read-only root, no network unless the environment allows it, and cgroup limits
(memory = memory+swap, pids, CPUs). /workspace and /tmp are size-capped tmpfs
mounts writable by the sandbox user; /env is a root-owned tmpfs the sandbox
user can read but not change.

Everything goes over the Docker API (DOCKER_HOST may be remote; nothing is
bind-mounted from the worker). Files go in and out through exec'd `tar`/`cat`
streams, because the archive API refuses a read-only root and does not see
tmpfs mounts. So images need /bin/sh, cat and tar (busybox has them all).

Timeouts: each exec records its pid (an exec'd process is its own process
group leader) and on timeout a second exec kills that whole group. After every
exec, that group and then every other process of the sandbox user (by uid, from
root, `setsid` escapees and fork bombs too: see SWEEP_UID) are killed: nothing outlives its exec. OOM: the
exec API cannot report it, so when a command dies of SIGKILL (137) and did not
time out, we read the container's memory cgroup OOM-kill counter
(`memory.oom_control` on cgroup v1, `memory.events` on v2) and compare it with
the last value seen; the container's `State.OOMKilled` is checked too.

Every container carries labels `gymwright.sandbox=1`, `gymwright.owner=
<host>:<pid>` and `gymwright.expires=<unix time>`; `reap_containers()` removes
the ones left behind by a crashed worker.

Long (over 600 lines) because the whole of this backend's isolation is kept in
one file, so it can be audited in one read.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import select
import socket
import struct
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from grading.engine.safe_files import module_stems, write_sparse

from ..egress_filter import EGRESS_REFUSED
from ..results import ExecResult
from ..spec import (
    DOCKERFILE_MAX_CHARS,
    WORKDIR_COPY,
    CappedBuffer,
    SandboxError,
    SandboxSpec,
    dockerfile_remote_sources,
)
from .base import (
    CANCELLED_NOTE,
    ENV_DIR,
    MAX_READ_BYTES,
    TMP,
    VERIFIER_PATHS,
    WORKSPACE,
    Backend,
    HostLimits,
    Sandbox,
    SnapshotBudget,
    pid_alive,
    shell_command,
    split_path,
)

log = logging.getLogger(__name__)

LABEL = "gymwright.sandbox"
OWNER_LABEL = "gymwright.owner"
EXPIRES_LABEL = "gymwright.expires"
# The reaper removes a stopped sandbox container once it has been stopped this long.
EXITED_GRACE_S = 30
# Ending the agent's processes reads nothing the agent controls (no pid file: one under /tmp, the sandbox user's,
# was swapped for a FIFO that blocked the killer while a `setsid` writer ran on). The container's own user is root
# with CAP_KILL alone (cap_drop ALL, cap_add KILL; root execs get it, the sandbox user's execs get no capability),
# and a root exec kills by uid: every process whose real uid is the sandbox user's, pass after pass until a pass
# finds none alive (a killed process stays a zombie until reaped; zombies are skipped). It reads only the kernel's
# /proc/<pid>/status, with shell builtins alone (read, kill, case, [), so it runs when a fork bomb holds every
# pid the cgroup allows and no new exec could start; the agent cannot signal it, read its input or change its uid.
# After every exec everything of the sandbox user goes (a `setsid` child leaves the exec's session and group), as
# with bubblewrap, where the exec's pid namespace ends with its command. $U is the sandbox user's uid; the sweep
# prints "done" when a pass found nothing, "busy" when it gave up.
# Killing one process at a time loses to a fork bomb at the pids limit: each pid a kill frees is forked into at
# once, so a pass that killed all it listed leaves as many newborns (and the bomb takes the CPU the killer needs).
# So the sweep first stops every process of the container at once (`kill -STOP -1`: everything but init and the
# killer, in one step no fork escapes; a stopped process forks nothing and cannot resume another), then kills
# the sandbox user's, then resumes what is left (root's keep-alive).
SWEEP_UID = (
    "kill -STOP -1 2>/dev/null; n=0; r=busy; while [ $n -lt 500 ]; do found=; for d in /proc/[0-9]*; do s=; u=; "
    "{ while read -r k v x; do case $k in State:) s=$v;; Uid:) u=$v; break;; esac; done; } "
    '2>/dev/null < "$d/status"; [ "$u" = "$U" ] && [ "$s" != Z ] && kill -9 "${d#/proc/}" 2>/dev/null '
    '&& found=1; done; [ -z "$found" ] && { r=done; break; }; n=$((n+1)); done; kill -CONT -1 2>/dev/null'
)
# The long-lived killer: one sweep per request line (a serial number, ours: its stdin is our socket), answered
# with the number and the sweep's result.
KILLER = "U=$1; while read -r req; do " + SWEEP_UID + '; echo "$req $r"; done'
KILLER_REPLY_S = 5.0
# A killer that did not answer in time may still be mid-sweep (`kill -STOP -1`, then kill -9 of every process of
# the sandbox user): left running beside its successor and the next exec, it stops and kills them. Its input closed,
# it ends after the sweep at hand; this long is waited for that before anything else runs.
KILLER_LATE_S = 60.0
# docker-init, the keep-alive sleep and the killer: root's, out of the sandbox user's reach.
CONTAINER_USER = "0:0"
OOM_PROBE = "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events 2>/dev/null"
KILL_GRACE_S = 3.0
# Clear each workspace path given (relative): parents that are links or files
# become real directories again; whatever is at the path itself goes. Prints
# what was there. Runs as the sandbox user, who owns everything in /workspace.
CLEAR_PATHS = r"""set -f
for rel; do
  cur=/workspace; rest=$rel
  while :; do
    case $rest in */*) part=${rest%%/*}; rest=${rest#*/};; *) break;; esac
    cur=$cur/$part
    if [ -L "$cur" ] || { [ -e "$cur" ] && [ ! -d "$cur" ]; }; then rm -f "$cur" || exit 1; fi
    [ -d "$cur" ] || mkdir "$cur" || exit 1
    chmod u+rwx "$cur" || exit 1
  done
  cur=$cur/$rest
  if [ -L "$cur" ]; then echo link; rm -f "$cur"
  elif [ -d "$cur" ]; then echo dir; chmod -R u+rwx "$cur" 2>/dev/null; rm -rf "$cur"
  elif [ -f "$cur" ]; then echo file; rm -f "$cur"
  elif [ -e "$cur" ]; then echo other; rm -f "$cur"
  else echo missing; fi
  if [ -e "$cur" ] || [ -L "$cur" ]; then echo "cannot clear $rel" >&2; exit 1; fi
done
"""
# After CLEAR_PATHS (the restored files' folders are real ones now), before the files are written: what Python
# would import instead of a restored `x.py` (grading/engine/safe_files.py, SHADOW_PATTERNS); $@ are the module
# paths. A link named `x` is removed, never followed.
REMOVE_SHADOWS = r"""for stem; do
  p=/workspace/$stem
  if [ -L "$p" ]; then rm -f "$p" || exit 1
  elif [ -d "$p" ]; then
    for f in "$p"/__init__.*; do
      if [ -e "$f" ] || [ -L "$f" ]; then chmod -R u+rwx "$f" 2>/dev/null; rm -rf "$f" || exit 1; fi
    done
  fi
  for f in "$p".*.so "$p".so "$p".pyd; do
    if [ -e "$f" ] || [ -L "$f" ]; then chmod -R u+rwx "$f" 2>/dev/null; rm -rf "$f" || exit 1; fi
  done
done
"""
# A snapshot's tar: the names (relative, "./"-prefixed, one a line) come on stdin as bytes; `read -r` keeps them
# as they are (a newline in a name was refused before). $1 is the workspace.
TAR_NAMES_FROM_STDIN = (
    'd=$1; set --; while IFS= read -r n; do set -- "$@" "$n"; done; exec tar -c -f - -C "$d" --no-recursion "$@"'
)
# Reading a file: $1 is its full path, $2 its root (/workspace, /tmp or /env), $3 the path below it. Exit 44:
# missing, 45: not a regular file, 46: a link on the way (the variant that refuses links walks every component
# below the root; the agent's processes are all gone when the grader reads this way, so nothing swaps them).
READ_FILE = 'if [ -f "$1" ]; then exec cat "$1"; elif [ -e "$1" ] || [ -L "$1" ]; then exit 45; else exit 44; fi'
READ_FILE_NO_LINKS = (
    'set -f; cur=$2; IFS=/; for part in $3; do cur=$cur/$part; if [ -L "$cur" ]; then exit 46; fi; done; ' + READ_FILE
)
_build_locks: dict[str, threading.Lock] = {}
_build_locks_guard = threading.Lock()


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def engine_address() -> str:
    """Where the engine is, as the operator configured it (DOCKER_HOST), for messages."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _engine_unreachable(exc: BaseException) -> bool:
    import requests

    return isinstance(exc, requests.exceptions.ConnectionError)


def _engine_errors(method):
    """The engine stopped, restarted or went away under a call: a retryable SandboxError that
    says so and where, instead of the HTTP client's exception escaping the rollout."""

    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except SandboxError:
            raise
        except Exception as exc:
            if not _engine_unreachable(exc):
                raise
            raise engine_unreachable_error(exc) from exc

    return wrapped


def docker_client(timeout: int = 120):
    import docker

    try:
        return docker.from_env(timeout=timeout)
    except Exception as exc:  # the SDK raises several types
        raise engine_unreachable_error(exc) from exc


def engine_unreachable_error(exc: Exception) -> SandboxError:
    """What a rollout says when the engine is stopped or restarting (the docker-stopped fault test reads it)."""
    return SandboxError(
        f"the Docker engine at {engine_address()} is not reachable (stopped or restarting?): {str(exc)[:300]}"
    )


class DockerBackend(Backend):
    """Options: `client` (a docker.DockerClient; default from the environment,
    honouring DOCKER_HOST), `user` ("65534:65534", numeric, not root's), `default_image` (used when
    the environment names neither image nor Dockerfile), `pull` (try to pull a
    missing image; default True), `expires_grace_s` (added to the rollout
    timeout for the expires label, leaving time for grading), `limits`
    (`HostLimits`: snapshot size, file count and host-side file-operation time),
    `egress_network` (the operator's docker network for environments with
    `network: allowed/egress`; default None: such environments are refused —
    what that network reaches is the operator's choice), `build_memory_mb`,
    `build_cpus` (limits of the containers a Dockerfile's RUN steps execute in;
    default 2048 MB, 1 CPU, pinned with a cpuset), `build_network` (the network
    RUN steps get; default None: no network)."""

    name = "docker"

    def __init__(
        self,
        *,
        client=None,
        user: str = "65534:65534",
        default_image: str | None = None,
        pull: bool = True,
        expires_grace_s: float = 900.0,
        limits: HostLimits | None = None,
        egress_network: str | None = None,
        build_memory_mb: int = 2048,
        build_cpus: int = 1,
        build_network: str | None = None,
    ):
        uid = user.partition(":")[0]
        if not uid.isdigit() or int(uid) == 0:
            # The killer ends the sandbox user's processes by uid, and root is the container's own user.
            raise ValueError(f"the docker sandbox user must be a numeric uid[:gid] other than 0, not {user!r}")
        self.client = client or docker_client()
        self.user = user
        self.uid = str(int(uid))
        self.default_image = default_image
        self.pull = pull
        self.expires_grace_s = expires_grace_s
        self.limits = limits or HostLimits()
        self.egress_network = egress_network or None
        self.build_memory_mb = int(build_memory_mb)
        self.build_cpus = max(1, int(build_cpus))
        self.build_network = build_network or None

    @_engine_errors
    def start(
        self,
        spec: SandboxSpec,
        *,
        files: Mapping[str, bytes] | None = None,
        env_files: Mapping[str, bytes] | None = None,
    ) -> Sandbox:
        return super().start(spec, files=files, env_files=env_files)

    # -- images ------------------------------------------------------------
    def resolve_image(self, spec: SandboxSpec) -> str:
        """The local image to run: built from the Dockerfile (once per content
        hash, also across threads), or the named image (pulled if missing)."""
        import docker.errors

        tag = spec.dockerfile_tag()
        if tag and len(spec.dockerfile) > DOCKERFILE_MAX_CHARS:
            # read on this host before any build (the ADD rule below): its size is the author's choice
            raise SandboxError(
                f"the Dockerfile is {len(spec.dockerfile):,} characters, over the {DOCKERFILE_MAX_CHARS:,} this host "
                "reads; keep it short and COPY the rest from the build context",
                permanent=True,
            )
        if tag and (remote := dockerfile_remote_sources(spec.dockerfile)):
            # Not the build's network: the engine fetches an ADD's URL itself, on the host's (its loopback and
            # the cloud's metadata address too), whatever network the RUN steps get.
            line, source = remote[0]
            raise SandboxError(
                f"Dockerfile line {line}: ADD {source!r} is refused: the Docker engine would fetch it on this "
                "host's network, outside the build's; COPY a file of the build context, or fetch it in a RUN step "
                "(builds have the network GYMWRIGHT_SANDBOX_BUILD_NETWORK names, else none)",
                permanent=True,
            )
        if tag:
            with _build_lock(tag):
                try:
                    self.client.images.get(tag)
                    return tag
                except docker.errors.ImageNotFound:
                    pass
                except docker.errors.APIError as exc:
                    raise SandboxError(f"Docker engine error: {exc}") from exc
                context = _build_context(spec)
                try:
                    memory = self.build_memory_mb * 1024 * 1024
                    cpuset = "0" if self.build_cpus == 1 else f"0-{self.build_cpus - 1}"
                    try:
                        # RUN steps are author code: limited like a sandbox, and offline
                        # unless the operator names a network for builds.
                        self.client.images.build(
                            fileobj=context,
                            custom_context=True,
                            tag=tag,
                            rm=True,
                            forcerm=True,
                            network_mode=self.build_network or "none",
                            container_limits={"memory": memory, "memswap": memory, "cpusetcpus": cpuset},
                            labels={LABEL: "1", "gymwright.dockerfile": tag},
                        )
                    except docker.errors.BuildError as exc:
                        tail = "".join(
                            str(line.get("stream") or line.get("error") or "") for line in list(exc.build_log)[-20:]
                        )
                        limits = f"builds run with {self.build_memory_mb} MB, {self.build_cpus} CPU(s) and " + (
                            f"network {self.build_network!r}" if self.build_network else "no network"
                        )
                        raise SandboxError(
                            f"Dockerfile does not build ({limits}): {exc.msg}\n{tail}", permanent=True
                        ) from exc
                    except docker.errors.APIError as exc:
                        raise SandboxError(f"Docker build failed: {exc}") from exc
                finally:
                    context.close()
                return tag
        image = spec.image or self.default_image
        if not image:
            raise SandboxError("the environment names no image or Dockerfile", permanent=True)
        try:
            self.client.images.get(image)
            return image
        except docker.errors.ImageNotFound:
            if not self.pull:
                raise SandboxError(f"image {image!r} is not present on the engine", permanent=True) from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker engine error: {exc}") from exc
        try:
            self.client.images.pull(image)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"image {image!r} does not exist: {exc}", permanent=True) from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot pull image {image!r}: {exc}") from exc
        return image

    # -- sandboxes ---------------------------------------------------------
    def _create(self, spec: SandboxSpec) -> DockerSandbox:
        import docker.errors

        if spec.network_allowed and not self.egress_network:
            raise SandboxError(EGRESS_REFUSED, permanent=True)
        image = self.resolve_image(spec)
        path = _safe_path(image, self.client)
        uid, _, gid = self.user.partition(":")
        gid = gid or uid
        sandbox_id = uuid.uuid4().hex[:12]
        expires = int(time.time() + spec.timeout_s + spec.setup_timeout_s + self.expires_grace_s)
        tmpfs_opts = "rw,exec,nosuid,nodev"
        try:
            container = self.client.containers.run(
                image,
                ["sleep", "infinity"],
                detach=True,
                init=True,
                name=f"gymwright-{sandbox_id}",
                hostname="sandbox",
                user=CONTAINER_USER,
                working_dir=WORKSPACE,
                entrypoint=[],
                environment={"PATH": path},
                network_mode=self.egress_network if spec.network_allowed else "none",
                # CAP_KILL for root's execs only (the killer): the sandbox user's execs get no capability.
                cap_drop=["ALL"],
                cap_add=["KILL"],
                security_opt=["no-new-privileges"],
                read_only=True,
                tmpfs={
                    WORKSPACE: f"{tmpfs_opts},size={spec.workspace_mb}m,uid={uid},gid={gid},mode=0755",
                    TMP: f"{tmpfs_opts},size={spec.tmp_mb}m,mode=1777",
                    ENV_DIR: f"{tmpfs_opts},size={spec.workspace_mb}m,mode=0755",
                    # root's until the checks run (open_verifier_paths): the agent cannot write them
                    **{path: f"{tmpfs_opts},size={spec.tmp_mb}m,mode=0755" for path in VERIFIER_PATHS},
                },
                mem_limit=f"{spec.memory_mb}m",
                memswap_limit=f"{spec.memory_mb}m",
                # +3: docker-init, the keep-alive sleep and the killer exec.
                pids_limit=spec.pids + 3,
                nano_cpus=int(spec.cpus * 1e9),
                labels={
                    LABEL: "1",
                    OWNER_LABEL: owner_id(),
                    EXPIRES_LABEL: str(expires),
                    "gymwright.sandbox_id": sandbox_id,
                },
            )
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image {image!r} vanished: {exc}") from exc
        except docker.errors.APIError as exc:
            permanent = exc.status_code is not None and 400 <= exc.status_code < 500 and exc.status_code != 409
            raise SandboxError(f"cannot start container: {exc}", permanent=permanent) from exc
        sandbox = DockerSandbox(self, spec, container, sandbox_id)
        try:
            sandbox._prepare()
        except BaseException:
            sandbox.stop()
            raise
        return sandbox

    def _install_env_files(self, sandbox: Sandbox, env_files: dict[str, bytes]) -> None:
        assert isinstance(sandbox, DockerSandbox)
        if env_files:
            entries = {}
            for path, data in env_files.items():
                full = path if path.startswith(ENV_DIR + "/") else f"{ENV_DIR}/{path.lstrip('/')}"
                root, rel = split_path(full, writable=False)
                entries[f"{root}/{rel}"] = data
            # /env is root's: the sandbox user can read it but not change it.
            sandbox._untar(entries, user="0:0", mode_for=lambda d: 0o755 if d[:2] == b"#!" else 0o644)


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_WRITABLE = (WORKSPACE, TMP)


def _safe_path(image: str, client) -> str:
    """The image's PATH without entries the sandbox can write (relative ones, /workspace, /tmp):
    `python3` in a check or a command must not resolve to a program the agent planted."""
    try:
        env = client.images.get(image).attrs.get("Config", {}).get("Env") or []
    except Exception:  # noqa: BLE001 - an image we just resolved; fall back to the usual PATH
        env = []
    value = next((item[5:] for item in env if item.startswith("PATH=")), DEFAULT_PATH)
    kept = [
        entry
        for entry in value.split(":")
        if entry.startswith("/")
        and not any(
            os.path.normpath(entry) == root or os.path.normpath(entry).startswith(root + "/") for root in _WRITABLE
        )
    ]
    return ":".join(kept) or DEFAULT_PATH


def _build_context(spec: SandboxSpec):
    """The build context sent to the engine: the Dockerfile and the environment's build files (its COPY and
    ADD sources) as regular files, executable when they start with "#!" (a task's scripts; no mode is
    stored with a file). Their paths passed the task format's path rules; a "Dockerfile" among them gives
    way to the environment's own."""
    context = tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024)
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = spec.build_dockerfile().encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for path, data in sorted(spec.build_context):
            parts = path.split("/")
            if path == "Dockerfile" or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
                continue
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o755 if data[:2] == b"#!" else 0o644
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    return context


def _build_lock(tag: str) -> threading.Lock:
    with _build_locks_guard:
        return _build_locks.setdefault(tag, threading.Lock())


class DockerSandbox(Sandbox):
    workspace_cap_hard = True  # size-limited tmpfs mounts

    def __init__(self, backend: DockerBackend, spec: SandboxSpec, container, sandbox_id: str):
        super().__init__(spec)
        self.id = sandbox_id
        self.backend = backend
        self.api = backend.client.api
        self.container = container
        self.oom_seen = 0
        self._lock = threading.Lock()
        # Execs are serialised: the killer's request/reply protocol is per sandbox, and a sweep after an exec
        # ends everything of the sandbox user.
        self._exec_lock = threading.RLock()
        self._killer = None
        self._killer_buf = b""
        self._killer_lines = b""
        self._killer_serial = 0
        self._exec_cancelled = False

    def _prepare(self) -> None:
        code, _, err, _ = self._run(["/bin/sh", "-c", "true"], timeout_s=30)
        if code != 0:
            raise SandboxError(f"the image has no usable /bin/sh: {err.text()[-500:]}", permanent=True)
        self.oom_seen = self._oom_count()
        self._start_killer()
        if self.spec.workdir:
            # What the image had in its WORKDIR (moved aside when it became a link to /workspace).
            code, _, err, _ = self._run(
                ["/bin/sh", "-c", f'[ ! -d {WORKDIR_COPY} ] || cp -R {WORKDIR_COPY}/. "$1"/', "gymwright", WORKSPACE],
                timeout_s=self.spec.setup_timeout_s,
            )
            if code != 0:
                raise SandboxError(
                    f"the image's WORKDIR {self.spec.workdir} could not be copied into {WORKSPACE} "
                    f"(its {self.spec.workspace_mb} MB cap, or files the sandbox user cannot read): "
                    f"{err.text()[-500:]}",
                    permanent=True,
                )

    def _start_killer(self) -> None:
        try:
            exec_id = self.api.exec_create(
                self.container.id,
                ["/bin/sh", "-c", KILLER, "gymwright", self.backend.uid],
                stdin=True,
                stdout=True,
                stderr=False,
                user=CONTAINER_USER,
            )["Id"]
            raw = self.api.exec_start(exec_id, socket=True)
            self._killer = (raw, getattr(raw, "_sock", raw), exec_id)
        except Exception as exc:  # noqa: BLE001 - the one-off kill exec remains
            log.debug("could not start the killer exec: %s", exc)
            self._killer = None

    # -- low level ---------------------------------------------------------
    def _run(
        self,
        argv: list[str],
        *,
        timeout_s: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        out_cap: int | None = None,
        err_cap: int | None = None,
        track: bool = False,
        out_sink=None,
    ):
        """One exec: returns (exit code or None, stdout buffer, stderr buffer, timed out).
        `out_sink` (with write/truncated) replaces the stdout buffer, e.g. a file."""
        with self._exec_lock:
            return self._run_locked(
                argv,
                timeout_s=timeout_s,
                stdin=stdin,
                env=env,
                user=user,
                out_cap=out_cap,
                err_cap=err_cap,
                track=track,
                out_sink=out_sink,
            )

    def _run_locked(self, argv, *, timeout_s, stdin, env, user, out_cap, err_cap, track, out_sink):
        import docker.errors

        if self.stopped:
            raise SandboxError("sandbox is stopped", permanent=True)
        out = out_sink or CappedBuffer(out_cap or self.spec.output_cap)
        err = CappedBuffer(err_cap or self.spec.output_cap)
        try:
            exec_id = self.api.exec_create(
                self.container.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=stdin is not None,
                user=user or self.backend.user,
                environment=dict(env) if env else None,
                workdir=WORKSPACE,
            )["Id"]
            raw = self.api.exec_start(exec_id, socket=True)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"the sandbox container is gone: {exc}") from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"docker exec failed: {exc}") from exc
        sock = getattr(raw, "_sock", raw)
        writer = None
        if stdin is not None:
            writer = threading.Thread(target=_send_stdin, args=(sock, stdin), daemon=True)
            writer.start()
        deadline = time.monotonic() + timeout_s
        timed_out = False
        try:
            timed_out = self._read_frames(sock, out, err, deadline, track, exec_id)
        finally:
            try:
                sock.close()
            except OSError:
                pass
            try:
                raw.close()
            except Exception:  # noqa: BLE001
                pass
        # The stream can end a moment before the engine records the exit code.
        code = self._wait_exec(exec_id, 1.0)
        if track and not timed_out:
            # Background processes do not outlive their exec (as with bubblewrap,
            # where the pid namespace ends with the command).
            self._sweep(check_alive=False)
        return (None if timed_out else code), out, err, timed_out

    def _read_frames(
        self, sock, out: CappedBuffer, err: CappedBuffer, deadline: float, track: bool, exec_id: str | None = None
    ) -> bool:
        """Demultiplex the exec stream (8-byte headers: stream id, size) into
        the capped buffers until EOF or the deadline. On the deadline, kill
        every process of the sandbox user and give the stream a moment to end.

        A background child that keeps stdout open holds the stream after the
        command itself has exited (the engine then waits ~2 s before closing
        it), so when the stream goes quiet we ask whether the exec is still
        running, with growing intervals, and sweep the sandbox user's processes if not."""
        buffers = {1: out, 2: err}
        pending = b""
        timed_out = False
        hard_deadline = None
        quiet_check = 0.1
        next_check = time.monotonic() + quiet_check
        while True:
            now = time.monotonic()
            if not timed_out and track and self._interrupted():
                self._exec_cancelled = True
                deadline = now  # killed like a timeout; exec() reports it as cancelled
            if not timed_out and now >= deadline:
                timed_out = True
                self._sweep()
                hard_deadline = now + KILL_GRACE_S
            if hard_deadline is not None and now >= hard_deadline:
                break  # something holds the stream open; give up on it
            limit = hard_deadline if timed_out else min(deadline, next_check)
            ready, _, _ = select.select([sock], [], [], max(0.0, min(limit - now, 1.0)))
            if not ready:
                if not timed_out and exec_id and track and hard_deadline is None and time.monotonic() >= next_check:
                    quiet_check = min(quiet_check * 2, 2.0)
                    next_check = time.monotonic() + quiet_check
                    if _ended(self.api.exec_inspect(exec_id)):
                        self._sweep()
                        hard_deadline = time.monotonic() + KILL_GRACE_S
                    elif not self.limit_hit and deadline - time.monotonic() > 0.5:
                        # While it runs: a file deleted but held open is freed when its process ends. Within
                        # the command's own time: at the pids limit (a fork bomb) the probe cannot even start.
                        self._record_full(self._free_space(timeout_s=min(10.0, deadline - time.monotonic())))
                continue
            try:
                chunk = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                break
            if not chunk:
                break
            pending += chunk
            while len(pending) >= 8:
                stream, size = struct.unpack(">BxxxL", pending[:8])
                if len(pending) < 8 + size:
                    break
                buffers.get(stream, err).write(pending[8 : 8 + size])
                pending = pending[8 + size :]
        return timed_out

    def _sweep(self, *, check_alive: bool = True) -> bool:
        """Kill every process of the sandbox user and wait until none is left (root's killer exec, by uid; see
        SWEEP_UID). True when a pass found none alive."""
        for _ in range(2):
            if self._killer is None:
                self._start_killer()
            if self._killer is not None and check_alive and not self._killer_alive():
                self._close_killer()
                continue
            if self._killer is not None:
                self._killer_serial += 1
                serial = str(self._killer_serial)
                try:
                    self._killer[1].sendall(f"{serial}\n".encode())
                    result = self._await_killer(serial)
                    if result is not None:
                        return result
                except OSError:
                    pass
                self._close_killer(wait_s=KILLER_LATE_S)
        # No killer (it could not start, or did not answer): a one-off root exec does the same sweep.
        return self._quiet(
            ["/bin/sh", "-c", f'U=$1; {SWEEP_UID}; [ "$r" = done ]', "gymwright", self.backend.uid], user=CONTAINER_USER
        )

    def _await_killer(self, serial: str) -> bool | None:
        """The killer's answer to request `serial`: True (none left), False (it gave up), None (no answer)."""
        sock = self._killer[1]
        deadline = time.monotonic() + KILLER_REPLY_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            chunk = sock.recv(65536)
            if not chunk:
                return None
            self._killer_buf += chunk
            # Frames are [stream, 0, 0, 0, size(4)] + payload; only stdout is attached.
            while len(self._killer_buf) >= 8:
                size = struct.unpack(">L", self._killer_buf[4:8])[0]
                if len(self._killer_buf) < 8 + size:
                    break
                payload = self._killer_buf[8 : 8 + size]
                self._killer_buf = self._killer_buf[8 + size :]
                self._killer_lines += payload
            *lines, self._killer_lines = self._killer_lines.split(b"\n")
            for line in lines:
                number, _, result = line.decode("ascii", "replace").partition(" ")
                if number == serial:
                    return result == "done"
        return None

    def _killer_alive(self) -> bool:
        try:
            return not _ended(self.api.exec_inspect(self._killer[2]))
        except Exception:  # noqa: BLE001
            return False

    def _close_killer(self, *, wait_s: float = 0.0) -> None:
        """Close the killer's input; with `wait_s`, wait (up to that long) until its exec has ended, so that a sweep
        still under way cannot run beside the next exec."""
        if self._killer is not None:
            raw, sock, exec_id = self._killer
            self._killer = None
            self._killer_buf = self._killer_lines = b""
            for thing in (sock, raw):
                try:
                    thing.close()
                except Exception:  # noqa: BLE001
                    pass
            if wait_s > 0:
                try:
                    if self._wait_exec(exec_id, wait_s) is None:
                        log.warning("sandbox %s: the killer still runs after %.0f s", self.id, wait_s)
                except Exception:  # noqa: BLE001 - the container or the engine is gone: nothing of it runs
                    pass

    def _wait_exec(self, exec_id: str, timeout_s: float) -> int | None:
        """Poll an exec until it has ended: its exit code, or None (still running after `timeout_s`). The engine's
        errors propagate (an engine gone away is said as such, not read as the command's failure)."""
        deadline = time.monotonic() + timeout_s
        delay = 0.01
        while True:
            info = self.api.exec_inspect(exec_id)
            if _ended(info):
                return info.get("ExitCode")
            if time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _quiet(self, argv: list[str], *, user: str | None = None) -> bool:
        """Run a housekeeping exec to its end; whether it exited 0."""
        try:
            exec_id = self.api.exec_create(
                self.container.id, argv, stdout=False, stderr=False, user=user or self.backend.user
            )["Id"]
            # With nothing attached exec_start returns at once, while the exec runs: its end is polled for.
            self.api.exec_start(exec_id, detach=False)
            return self._wait_exec(exec_id, 60.0) == 0
        except Exception as exc:  # noqa: BLE001 - best effort housekeeping
            log.debug("housekeeping exec %s failed: %s", argv, exc)
            return False

    def _oom_count(self) -> int:
        try:
            exec_id = self.api.exec_create(
                self.container.id, ["/bin/sh", "-c", OOM_PROBE], stdout=True, stderr=False, user=self.backend.user
            )["Id"]
            text = self.api.exec_start(exec_id).decode(errors="replace")
        except Exception:  # noqa: BLE001
            return self.oom_seen
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return self.oom_seen

    # -- the interface -----------------------------------------------------
    @_engine_errors
    def exec(self, command, *, timeout_s=None, stdin=None, env=None) -> ExecResult:
        timeout_s = self.spec.exec_timeout_s if timeout_s is None else float(timeout_s)
        started = time.monotonic()
        self._exec_cancelled = False
        code, out, err, timed_out = self._run(
            shell_command(command), timeout_s=timeout_s, stdin=stdin, env=env, track=True
        )
        duration_ms = int((time.monotonic() - started) * 1000)
        if self._exec_cancelled:
            timed_out = False
            err.write(CANCELLED_NOTE.encode())
        elif self.limit_hit or (code != 0 and self._record_full(self._free_space())):
            # A failing command may have failed for want of space: the tmpfs caps are hard.
            err.write(f"\n[gymwright] {self.limit_hit}\n".encode())
        oom = False
        if code == 137 and not timed_out:
            count = self._oom_count()
            oom = count > self.oom_seen
            self.oom_seen = count
            if not oom:
                try:
                    self.container.reload()
                    oom = bool(self.container.attrs["State"].get("OOMKilled"))
                except Exception:  # noqa: BLE001
                    pass
        stdout, stdout_odd = out.decoded()
        return ExecResult(
            exit_code=code,
            stdout=stdout,
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            timed_out=timed_out,
            oom_killed=oom,
            duration_ms=duration_ms,
            stdout_odd=stdout_odd,
        )

    def _free_space(self, timeout_s: float = 10.0) -> dict[str, int]:
        """Bytes free in /workspace and /tmp (POSIX `df -Pk`), {} when it cannot tell."""
        try:
            code, out, _, _ = self._run(["df", "-Pk", WORKSPACE, TMP], timeout_s=timeout_s, out_cap=4096)
        except SandboxError:
            return {}
        free = {}
        for line in out.text().splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 6 and fields[3].isdigit() and fields[-1] in (WORKSPACE, TMP):
                free[fields[-1]] = int(fields[3]) * 1024
        return free

    def _untar(self, entries: Mapping[str, bytes], *, user: str | None = None, mode_for=None) -> None:
        """Write files (absolute sandbox paths) through one `tar -x` exec."""
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for path, data in entries.items():
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size = len(data)
                info.mode = mode_for(data) if mode_for else 0o644
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        code, out, err, timed_out = self._run(
            ["tar", "-x", "-f", "-", "-C", "/"], timeout_s=120, stdin=archive.getvalue(), user=user
        )
        if code != 0:
            raise SandboxError(
                f"cannot write files into the sandbox (tar exit {code}): {err.text()[-500:]}",
                permanent=_refused_by_sandbox(code),
            )

    @_engine_errors
    def write_files(self, files: Mapping[str, bytes]) -> None:
        entries = {}
        for path, data in files.items():
            root, rel = split_path(path, writable=True)
            entries[f"{root}/{rel}"] = data
        if entries:
            self._untar(entries)

    @_engine_errors
    def write_file(self, path: str, data: bytes) -> None:
        root, rel = split_path(path, writable=True)
        full = f"{root}/{rel}"
        script = (
            'mkdir -p "$(dirname "$1")" || exit 1; if [ -e "$1" ] && [ ! -f "$1" ]; then exit 45; fi; exec cat > "$1"'
        )
        io_timeout = self.backend.limits.io_timeout_s
        code, _, err, timed_out = self._run(
            ["/bin/sh", "-c", script, "gymwright", full], timeout_s=io_timeout, stdin=data
        )
        if timed_out:
            raise SandboxError(f"writing {path!r} took longer than {io_timeout:g} s", permanent=True)
        if code == 45:
            raise SandboxError(f"{path!r} is not a regular file; only regular files can be written", permanent=True)
        if code != 0 and self._record_full(self._free_space()):
            raise SandboxError(f"cannot write {path!r}: {self.limit_hit}", permanent=True)
        if code != 0:
            raise SandboxError(f"cannot write {path!r}: {err.text()[-500:]}", permanent=True)

    @_engine_errors
    def read_file(self, path: str, *, max_bytes: int = MAX_READ_BYTES, follow_links: bool = True) -> bytes:
        root, rel = split_path(path, writable=False)
        full = f"{root}/{rel}"
        max_bytes = min(max_bytes, MAX_READ_BYTES)
        # Links resolve inside the container (its own files), unless refused; a FIFO or device is refused.
        script = READ_FILE if follow_links else READ_FILE_NO_LINKS
        io_timeout = self.backend.limits.io_timeout_s
        code, out, err, timed_out = self._run(
            ["/bin/sh", "-c", script, "gymwright", full, root, rel], timeout_s=io_timeout, out_cap=max_bytes + 1
        )
        if timed_out:
            raise SandboxError(f"reading {path!r} took longer than {io_timeout:g} s", permanent=True)
        if code == 44:
            raise FileNotFoundError(path)
        if code == 45:
            raise SandboxError(f"{path!r} is not a regular file; only regular files can be read", permanent=True)
        if code == 46:
            raise SandboxError(f"{path!r} is a symbolic link or is reached through one; not read", permanent=True)
        if code != 0:
            raise SandboxError(f"cannot read {path!r}: {err.text()[-500:]}", permanent=True)
        if out.truncated or out.total > max_bytes:
            raise SandboxError(f"{path!r} is larger than {max_bytes} bytes", permanent=True)
        return bytes(out.data)

    @_engine_errors
    def list_files(self) -> list[str]:
        io_timeout = self.backend.limits.io_timeout_s
        code, out, err, timed_out = self._run(
            ["find", ".", "-type", "f"], timeout_s=io_timeout, out_cap=16 * 1024 * 1024
        )
        if timed_out:
            raise SandboxError(f"listing the workspace took longer than {io_timeout:g} s", permanent=True)
        if code not in (0, 1):
            raise SandboxError(f"cannot list the workspace: {err.text()[-500:]}")
        names = [line[2:] if line.startswith("./") else line for line in out.text().splitlines()]
        return sorted(n for n in names if n)

    @_engine_errors
    def snapshot(self, dest: Path) -> Path:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        limits = self.backend.limits
        budget = SnapshotBudget(limits)
        # 1. Apparent sizes, from the container: a sparse file's holes would
        #    otherwise stream out as zeros, and a terabyte of them fits in a tmpfs.
        listing = 'find . -type f -exec stat -c "%s %n" {} + && find . -mindepth 1 -type d -exec stat -c "d %n" {} +'
        code, out, err, timed_out = self._run(
            ["/bin/sh", "-c", listing], timeout_s=limits.io_timeout_s, out_cap=16 * 1024 * 1024
        )
        if timed_out or code not in (0, 1) or out.truncated:
            why = (
                f"took longer than {limits.io_timeout_s:g} s"
                if timed_out
                else "listed too many files"
                if out.truncated
                else f"exit {code}: {err.text()[-300:]}"
            )
            raise SandboxError(f"cannot list the workspace for its snapshot (find/stat {why})")
        sizes: dict[str, int] = {}
        dirs: list[str] = []
        seen_twice: set[str] = set()
        # Names as the file system's bytes (surrogateescape, as a bubblewrap snapshot reads them): a name that is
        # not UTF-8 is copied and listed like any other, not lost to replacement characters.
        for line in os.fsdecode(bytes(out.data)).split("\n"):
            size, _, name = line.partition(" ")
            if size == "d" and name.startswith("./") and len(dirs) < limits.snapshot_max_files:
                dirs.append(os.path.normpath(name[2:]))
                continue
            if not size.isdigit() or not name.startswith("./") or len(name) < 3:
                continue  # a name with a newline in it: it cannot be told apart, so it is skipped
            name = name[2:]
            if name in sizes:
                seen_twice.add(name)
            sizes[name] = max(sizes.get(name, 0), int(size))
        admitted: dict[str, int] = {}
        for name in sorted(sizes):
            if name in seen_twice:
                budget.left_out.append(
                    {"path": name, "size": sizes[name], "reason": "its name is ambiguous (a newline in a file name)"}
                )
            elif budget.admit(name, sizes[name]):
                admitted[name] = sizes[name]
        # 2. The admitted files through tar, in argv-sized batches, spooled to
        #    disk up to what was admitted (plus headers), then written keeping holes.
        cap = sum(admitted.values()) + 1536 * (len(admitted) + 8)
        with tempfile.TemporaryFile() as spool:
            sink = _FileSink(spool, cap)
            for batch in _batches(sorted(admitted)):
                # The names go on stdin, one a line, as bytes: docker's exec API takes argv as JSON text, which
                # cannot carry a name that is not UTF-8 (busybox's tar has no -T).
                code, _, err, timed_out = self._run(
                    ["/bin/sh", "-c", TAR_NAMES_FROM_STDIN, "gymwright", WORKSPACE],
                    stdin=b"".join(os.fsencode(f"./{n}\n") for n in batch),
                    timeout_s=max(0.1, budget.deadline - time.monotonic()),
                    out_sink=sink,
                )
                if timed_out or code not in (0, 1):
                    raise SandboxError(
                        f"cannot copy the workspace out (tar "
                        f"{'timed out' if timed_out else f'exit {code}'}): {err.text()[-500:]}"
                    )
            spool.seek(0)
            copied = _extract_sparse(spool, dest, admitted)
        for name in dirs:
            if name != ".." and not name.startswith(("../", "/")):
                (dest / name).mkdir(parents=True, exist_ok=True)
        for name in sorted(set(admitted) - copied):
            budget.left_out.append(
                {"path": name, "size": admitted[name], "reason": "it changed or vanished while the snapshot was taken"}
            )
        self.snapshot_left_out = budget.left_out
        return dest

    # -- between the episode and the checks ----------------------------------
    @_engine_errors
    def end_processes(self) -> None:
        with self._exec_lock:
            stopped = self._sweep()
        if not stopped:
            raise SandboxError("could not stop the processes the episode left running")

    @_engine_errors
    def open_verifier_paths(self) -> None:
        # Their tmpfs mounts are root's (mode 0755) during the episode; root (no capabilities, but their
        # owner) opens them to the sandbox user now that none of its processes is left.
        code, _, err, _ = self._run(["chmod", "0777", *VERIFIER_PATHS], timeout_s=30, user="0:0")
        if code != 0:
            log.warning("sandbox %s: no verifier paths: %s", self.id, err.text()[-300:])

    @_engine_errors
    def restore_files(self, files) -> dict[str, str]:
        entries, rels = {}, []
        for path, data in files.items():
            root, rel = split_path(path, writable=True)
            if root != WORKSPACE:
                raise SandboxError(f"only workspace files can be restored, not {path!r}", permanent=True)
            entries[f"{root}/{rel}"] = data
            rels.append(rel)
        if not rels:
            return {}
        with self._exec_lock:
            code, out, err, _ = self._run(["/bin/sh", "-c", CLEAR_PATHS, "gymwright", *rels], timeout_s=120)
            if code != 0:
                raise SandboxError(
                    f"cannot restore the task's files: {err.text()[-500:]}", permanent=_refused_by_sandbox(code)
                )
            stems = module_stems(rels)
            if stems:
                code, _, err, _ = self._run(["/bin/sh", "-c", REMOVE_SHADOWS, "gymwright", *stems], timeout_s=120)
                if code != 0:
                    raise SandboxError(
                        f"cannot clear what shadows the task's modules: {err.text()[-500:]}",
                        permanent=_refused_by_sandbox(code),
                    )
            self._untar(entries)
        kinds = out.text().split()
        return {path: kinds[i] if i < len(kinds) else "missing" for i, path in enumerate(files)}

    def stop(self) -> None:
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
        self._close_killer()
        try:
            self.container.remove(force=True)
        except Exception as exc:  # noqa: BLE001 - the reaper is the safety net
            log.warning("could not remove sandbox container %s: %s", self.container.id[:12], exc)


def _refused_by_sandbox(code: int | None) -> bool:
    """Whether a file operation's exec (tar, the restore scripts) failed for what is in the sandbox: it exited with an
    error of its own (a full workspace, a path the agent made a file or a folder, no tar in the image), which a retry
    meets again. A kill (timeout, the container gone: no code, or 128 + a signal) is the engine's, transient. The
    checks fail on a refusal and are unscored on the engine's failure (grading.engine.checks.sandbox_refused): an
    unscored penalty is not charged, so the agent must never be able to make one."""
    return code is not None and 0 < code < 128


class _FileSink:
    """Writes stdout to a file up to `cap` bytes (then counts and discards)."""

    def __init__(self, fh, cap: int):
        self.fh, self.cap, self.total = fh, cap, 0

    def write(self, chunk: bytes) -> None:
        room = self.cap - self.total
        if room > 0:
            self.fh.write(chunk[:room])
        self.total += len(chunk)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap


def _batches(names: list[str], max_chars: int = 64 * 1024):
    batch, size = [], 0
    for name in names:
        if batch and size + len(name) + 3 > max_chars:
            yield batch
            batch, size = [], 0
        batch.append(name)
        size += len(name) + 3
    if batch:
        yield batch


def _extract_sparse(spool, dest: Path, admitted: dict[str, int]) -> set[str]:
    """Write the regular files of the tar stream in `spool` that were admitted
    (and are no bigger than admitted) under `dest`, keeping runs of zeros as
    holes. Returns the names written."""
    copied: set[str] = set()
    try:
        tar = tarfile.open(fileobj=spool, mode="r:", ignore_zeros=True)
    except tarfile.TarError:
        return copied
    with tar:
        while True:
            try:
                member = tar.next()
            except tarfile.TarError:
                break
            if member is None:
                break
            name = os.path.normpath(member.name)
            name = name[2:] if name.startswith("./") else name
            if (
                not member.isreg()
                or name not in admitted
                or member.size > admitted[name]
                or name in copied
                or name.startswith(("/", "../"))
                or name == ".."
            ):
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                write_sparse(fd, tar.extractfile(member), member.size)
            finally:
                os.close(fd)
            copied.add(name)
    return copied


def _send_stdin(sock, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def reap_containers(
    client=None, *, older_than: float | None = None, now: float | None = None, owner: str | None = None
) -> list[str]:
    """Remove sandbox containers left behind: expired (`gymwright.expires` in
    the past), exited more than EXITED_GRACE_S ago, owned by a process of this host that no longer runs, or (when
    `older_than` seconds is given) created longer ago than that. `owner`
    ("host:pid") limits the sweep to one owner's containers. Returns the
    removed container ids. Safe to run from cron or any worker."""
    client = client or docker_client()
    now = time.time() if now is None else now
    host = socket.gethostname()
    removed = []
    label_filter = [f"{LABEL}=1"] + ([f"{OWNER_LABEL}={owner}"] if owner else [])
    # ignore_removed: a container removed between the listing and its inspection (its rollout
    # finished meanwhile) must not end the sweep.
    for container in client.containers.list(all=True, filters={"label": label_filter}, ignore_removed=True):
        labels = container.labels or {}
        reason = None
        try:
            if float(labels.get(EXPIRES_LABEL, "inf")) < now:
                reason = "expired"
        except ValueError:
            reason = "bad expires label"
        if reason is None and container.status in ("exited", "dead"):
            # Its keepalive ended (the engine stopped it, say, while the rollout's worker could
            # not reach the engine to remove it): no sandbox runs in it any more. The grace
            # leaves a rollout whose container just died the time to read what is in it.
            finished = _finished_ts(container)
            if finished is None or now - finished > EXITED_GRACE_S:
                reason = "exited"
        owner_host, _, owner_pid = labels.get(OWNER_LABEL, "").rpartition(":")
        if reason is None and owner_host == host and owner_pid.isdigit() and not pid_alive(int(owner_pid)):
            reason = "owner gone"
        if reason is None and older_than is not None:
            created = _created_ts(container)
            if created is not None and now - created > older_than:
                reason = "old"
        if reason:
            try:
                container.remove(force=True)
                removed.append(container.id)
                log.info("reaped sandbox container %s (%s)", container.id[:12], reason)
            except Exception as exc:  # noqa: BLE001
                log.warning("could not reap %s: %s", container.id[:12], exc)
    return removed


def _created_ts(container) -> float | None:
    return _docker_ts(container.attrs.get("Created", ""))


def _finished_ts(container) -> float | None:
    return _docker_ts((container.attrs.get("State") or {}).get("FinishedAt", ""))


def _docker_ts(raw: str) -> float | None:
    from datetime import datetime

    try:
        # "2026-11-21T21:38:00.123456789Z": trim nanoseconds for fromisoformat.
        base, _, frac = raw.rstrip("Z").partition(".")
        return datetime.fromisoformat(base + "+00:00").timestamp()
    except ValueError:
        return None


def _ended(info: dict) -> bool:
    """Whether an exec (the engine's inspect of it) has run and ended. Not running is not enough: the engine
    answers the attach before it marks the exec started, so on a busy host an exec not yet started reads as not
    running, with no exit code. Taken for "ended", that swept the sandbox user's processes as the command began
    (an `echo ok` then printed nothing)."""
    return not info.get("Running") and info.get("ExitCode") is not None
