"""The bubblewrap backend: the embedded default (no daemon, Linux only).

A sandbox is a private directory on the worker's disk (workspace, tmp, env,
a fake /etc) plus per-sandbox cgroups. Every exec starts a fresh `bwrap` with
new namespaces (user, pid, net, ipc, uts, cgroup, mount) that sees:

- the host's /usr (and /bin, /lib*, /sbin as links or read-only binds) and a
  handful of /etc entries (ld.so cache, alternatives, CA certificates), all
  read-only; a generated /etc/passwd, /etc/group, /etc/hosts;
- /workspace and /tmp: the sandbox's own directories, writable;
- /env: the environment's files, read-only;
- nothing else: not /root, /home, /work, /opt, /var, /run, nor the worker's
  environment variables (`--clearenv`; PATH, HOME, LANG are set fresh).

Python inside is the host's /usr/bin/python3 (also on PATH as `python`); a
different interpreter can be made visible with `ro_binds` (it is bound at
the same path, e.g. a pyenv prefix, whose rpath is absolute).

Limits: memory (memory cgroup, or RLIMIT_AS without one), processes (pids
cgroup, or RLIMIT_NPROC without one), CPU (cpu
cgroup quota for `cpus`, RLIMIT_CPU per process), a single file's size
(RLIMIT_FSIZE = the workspace cap) and the workspace's total size (watched
during the exec and checked after it; by default, when the worker may mount, a
size-limited tmpfs: a hard cap). When the worker runs as root each
sandbox runs as a uid/gid of its own (setpriv before bwrap; from a range no
host account uses, see `sandbox_uid`), so a process that got out of its
namespaces would own nothing and could signal no other sandbox, and
RLIMIT_NPROC, which counts every process of a uid, counts this sandbox's alone.

Processes do not outlive their exec: the pid namespace dies with the
command's bwrap, so a background `server &` (even a `setsid` one) is gone
when the exec returns.

Inside, a seccomp filter close to Docker's default profile (`seccomp.py`)
refuses mounts, new namespaces, keyrings, bpf and the like, and
`--disable-userns` forbids nested user namespaces. bwrap's own arguments come
from a file (`--args FD`), so no host path shows in /proc/*/cmdline inside.

Long (over 600 lines) because the whole of this backend's isolation is kept in
one file, so it can be audited in one read.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import secrets
import selectors
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from grading.engine.safe_files import NotRegularFile, copy_sparse, open_beneath, open_regular

from ..egress_filter import (
    DNS,
    EGRESS_REFUSED,
    GATEWAY,
    HOST_ALIAS,
    EgressLink,
    EgressPolicy,
    host_addresses,
    read_child_pid,
    tools_missing,
)
from ..results import ExecResult
from ..spec import CappedBuffer, SandboxError, SandboxSpec
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
from .bwrap_process import Child, PopenChild, SpawnedChild, SpawnerGone, parse_status, read_line
from .cgroups import CgroupSet

log = logging.getLogger(__name__)

SANDBOX_PATH = "/opt/gymwright/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
# /etc entries the programs in /usr need to work; everything else stays hidden.
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "localtime",
    "mime.types",
    "protocols",
    "services",
    "python3",
    "python3.11",
    "bash.bashrc",
    "profile",
)
ROOT_ENTRIES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Each sandbox's own uid and gid, drawn from [BASE, BASE + SPAN): far above the ids distributions hand out
# (users, subordinate ranges from 100000) and below systemd's container range (2147352576 and up).
SANDBOX_UID_BASE = 2_000_000_000
SANDBOX_UID_SPAN = 1 << 24
PER_SANDBOX = "per-sandbox"
WATCH_INTERVAL_S = 0.5


def default_work_dir() -> Path:
    return Path(os.environ.get("GYMWRIGHT_SANDBOX_DIR") or Path(tempfile.gettempdir()) / "gymwright-sandboxes")


class BubblewrapBackend(Backend):
    """Options: `work_dir` (where sandbox directories live; default
    $GYMWRIGHT_SANDBOX_DIR or /tmp/gymwright-sandboxes; must be traversable by
    the sandbox user), `run_as` (what to drop to when the worker is root:
    PER_SANDBOX, the default, a uid and gid of each sandbox's own; or one
    (uid, gid) all sandboxes share; None keeps the worker's uid), `bwrap` (path),
    `python` (interpreter linked as `python`/`python3` in the sandbox),
    `ro_binds` (extra host paths shown read-only at the same place),
    `use_cgroups` (default True), `use_spawner` (fork execs from a per-sandbox
    shell already in the sandbox's cgroups; default True), `tmpfs_caps` (when
    the worker may mount, i.e. runs as root: /workspace and /tmp are
    size-limited tmpfs mounts, a hard cap; default True; a worker that dies
    leaves the mounts behind until `reap_bubblewrap()` runs; a worker that may
    not mount falls back to the watched soft cap), `limits`
    (`HostLimits`: snapshot size, file count and host-side file-operation time),
    `egress` (an `EgressPolicy`: environments with `network: allowed/egress` get
    user-mode NAT to the internet but not to this host, see `egress_filter.py`;
    default None: such environments are refused)."""

    name = "bubblewrap"

    def __init__(
        self,
        *,
        work_dir: str | Path | None = None,
        run_as: tuple[int, int] | str | None = PER_SANDBOX,
        bwrap: str | None = None,
        python: str | None = None,
        ro_binds: Sequence[str] = (),
        use_cgroups: bool = True,
        use_spawner: bool = True,
        tmpfs_caps: bool = True,
        limits: HostLimits | None = None,
        egress: EgressPolicy | None = None,
    ):
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        if not os.path.exists(self.bwrap):
            raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap", permanent=True)
        self.work_dir = Path(work_dir) if work_dir else default_work_dir()
        self.run_as = run_as if (run_as and os.geteuid() == 0) else None
        self.setpriv = shutil.which("setpriv") if self.run_as else None
        if self.run_as and not self.setpriv:
            raise SandboxError("setpriv (util-linux) is needed to drop root for bubblewrap", permanent=True)
        self.python = python or next(
            (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None
        )
        self.ro_binds = tuple(ro_binds)
        self.use_cgroups = use_cgroups
        self.use_spawner = use_spawner
        self.tmpfs_caps = tmpfs_caps
        self.limits = limits or HostLimits()
        self.egress = egress

    def _create(self, spec: SandboxSpec) -> BubblewrapSandbox:
        return BubblewrapSandbox(self, spec)

    def _install_env_files(self, sandbox: Sandbox, env_files: dict[str, bytes]) -> None:
        assert isinstance(sandbox, BubblewrapSandbox)
        for path, data in env_files.items():
            _, rel = split_path(posixpath_join_env(path), writable=False)
            target = sandbox.env_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            # Executable bits matter for tool scripts; the sandbox can't change them (read-only).
            target.chmod(0o755 if data[:2] == b"#!" else 0o644)


def posixpath_join_env(path: str) -> str:
    return path if path.startswith(ENV_DIR + "/") else f"{ENV_DIR}/{path.lstrip('/')}"


class BubblewrapSandbox(Sandbox):
    def __init__(self, backend: BubblewrapBackend, spec: SandboxSpec):
        super().__init__(spec)
        self.backend = backend
        self.host_addrs: list[str] = []
        if spec.network_allowed:
            if backend.egress is None:
                raise SandboxError(EGRESS_REFUSED, permanent=True)
            missing = tools_missing()
            if missing:
                raise SandboxError(
                    f"network egress needs {', '.join(missing)}: apt-get install slirp4netns nftables util-linux",
                    permanent=True,
                )
            self.host_addrs = host_addresses()
        try:
            if not backend.work_dir.exists():
                # Traversable but not listable by the sandbox user.
                backend.work_dir.mkdir(parents=True, exist_ok=True)
                os.chmod(backend.work_dir, 0o711)
            self.root = Path(tempfile.mkdtemp(prefix=f"gw-{self.id}-", dir=backend.work_dir))
        except OSError as exc:
            raise SandboxError(f"cannot create sandbox directory in {backend.work_dir}: {exc}") from exc
        self.root.chmod(0o711)
        # Who owns this sandbox, for reap_bubblewrap() after a worker crash.
        (self.root / "owner").write_text(f"{os.getpid()}\n")
        self.workspace_dir = self.root / "workspace"
        self.tmp_dir = self.root / "tmp"
        self.env_dir = self.root / "env"
        self.etc_dir = self.root / "etc"
        if backend.run_as == PER_SANDBOX:
            uid = gid = sandbox_uid(self.id)
        else:
            uid, gid = backend.run_as or (os.getuid(), os.getgid())
        self.uid, self.gid = uid, gid
        for path, mode in (
            (self.workspace_dir, 0o755),
            (self.tmp_dir, 0o1777),
            (self.env_dir, 0o755),
            (self.etc_dir, 0o755),
        ):
            path.mkdir()
            path.chmod(mode)
        if backend.run_as:
            os.chown(self.workspace_dir, uid, gid)
            os.chown(self.tmp_dir, uid, gid)
            self._check_traversable()
        self.mounts: list[Path] = []
        self.verifier_binds: list[str] = []  # bwrap binds of VERIFIER_PATHS, once the checks may write them
        if backend.tmpfs_caps and os.geteuid() == 0:
            self._mount_caps()
        self._write_etc()
        # The owner's pid is in the name, so leftovers can be told from live groups.
        self.cgroups = (
            CgroupSet.create(
                f"gymwright-{os.getpid()}-{self.id}",
                memory_bytes=spec.memory_mb * 1024 * 1024,
                pids=spec.pids,
                cpus=spec.cpus,
            )
            if backend.use_cgroups
            else CgroupSet({})
        )
        self._static_args = self._bwrap_args()
        # bwrap reads its arguments and the seccomp program from files the
        # worker opens for it (`--args FD`, `--seccomp FD`): its command line,
        # the only one a sandbox process can see in /proc, is `bwrap --args N`,
        # with no host path in it.
        self.args_file = self.root / "bwrap-args"
        self.seccomp_file = self.root / "seccomp.bpf"
        _write_private(self.seccomp_file, _seccomp_program())
        # Without a pids cgroup, RLIMIT_NPROC is the fallback. It counts every
        # process of the (host) user: a uid of the sandbox's own counts this
        # sandbox alone; a uid all sandboxes share (run_as=(uid, gid)) counts
        # them together, so one sandbox's processes could keep the next from
        # starting; for a worker that is not root, its own processes too, so
        # the limit is what the user runs now plus the sandbox's share.
        # Root ignores RLIMIT_NPROC, hence no limit when running as root.
        self._nproc_limit = None
        if not self.cgroups.has_pids and self.uid != 0:
            base = 0 if backend.run_as else _count_processes(self.uid)
            self._nproc_limit = base + spec.pids
        self._exec_lock = threading.Lock()
        self._spawner: subprocess.Popen | None = None

    # -- setup -------------------------------------------------------------
    @property
    def workspace_cap_hard(self) -> bool:
        """True when writes past the workspace and /tmp caps fail (tmpfs mounts)."""
        return len(self.mounts) == 2

    def _mount_caps(self) -> None:
        # A size-limited tmpfs is a hard cap. Its pages are charged to the
        # writer's memory cgroup, so files count against memory_mb, as in docker.
        for path, mb, mode in (
            (self.workspace_dir, self.spec.workspace_mb, "0755"),
            (self.tmp_dir, self.spec.tmp_mb, "1777"),
        ):
            options = f"size={mb}m,mode={mode},uid={self.uid},gid={self.gid}"
            problem = _mount_tmpfs(path, options)
            if problem:
                log.debug("no tmpfs cap for %s: %s", path, problem)
                break
            self.mounts.append(path)

    def _check_traversable(self) -> None:
        # bwrap opens the bind sources as the dropped user: every ancestor needs o+x.
        for parent in [self.root, *self.root.parents]:
            if not parent.stat().st_mode & stat.S_IXOTH:
                shutil.rmtree(self.root, ignore_errors=True)
                raise SandboxError(
                    f"sandbox directory {self.root} is not reachable by uid {self.uid}: "
                    f"{parent} lacks o+x; choose another work_dir",
                    permanent=True,
                )

    def _write_etc(self) -> None:
        users = ["root:x:0:0:root:/tmp:/bin/sh", "nobody:x:65534:65534:nobody:/tmp:/bin/sh"]
        groups = ["root:x:0:", "nogroup:x:65534:"]
        if self.uid not in (0, 65534):
            users.append(f"sandbox:x:{self.uid}:{self.gid}:sandbox:/tmp:/bin/sh")
            groups.append(f"sandbox:x:{self.gid}:")
        files = {
            "passwd": "\n".join(users) + "\n",
            "group": "\n".join(groups) + "\n",
            "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n"
            + (f"{GATEWAY} {HOST_ALIAS}\n" if self.spec.network_allowed else ""),
            "hostname": "sandbox\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
        }
        if self.spec.network_allowed:
            files["resolv.conf"] = f"nameserver {DNS}\n"
        for name, text in files.items():
            (self.etc_dir / name).write_text(text)
            (self.etc_dir / name).chmod(0o644)

    def _bwrap_args(self) -> list[str]:
        spec = self.spec
        # --unshare-user (not just -try) so that --disable-userns applies even
        # to a root worker: `unshare -U` inside fails, no nested namespaces.
        args = [self.backend.bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
        # Every sandbox has its own network namespace; with egress, slirp4netns
        # links it to the outside per exec (never --share-net: the host's).
        args += [
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        args += root_entry_args()
        for name in ETC_ENTRIES:
            if os.path.lexists(f"/etc/{name}"):
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        for name in sorted(os.listdir(self.etc_dir)):
            args += ["--ro-bind", str(self.etc_dir / name), f"/etc/{name}"]
        for path in self.backend.ro_binds:
            args += ["--ro-bind", path, path]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            str(self.workspace_dir),
            WORKSPACE,
            "--bind",
            str(self.tmp_dir),
            TMP,
            "--ro-bind",
            str(self.env_dir),
            ENV_DIR,
            *self.verifier_binds,
            "--dir",
            "/opt/gymwright/bin",
        ]
        if spec.workdir:
            args += ["--symlink", WORKSPACE, spec.workdir]
        if self.backend.python:
            for alias in ("python", "python3"):
                args += ["--symlink", self.backend.python, f"/opt/gymwright/bin/{alias}"]
        # Last: the tmpfs root bwrap built (and the directories it made for
        # the binds, such as /etc) becomes read-only too.
        args += ["--remount-ro", "/"]
        args += [
            "--chdir",
            WORKSPACE,
            "--setenv",
            "PATH",
            SANDBOX_PATH,
            "--setenv",
            "HOME",
            TMP,
            "--setenv",
            "TMPDIR",
            TMP,
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "USER",
            "sandbox",
            "--setenv",
            "PYTHONUNBUFFERED",
            "1",
        ]
        return args

    def _prelude(self, timeout_s: float, *, attach: bool, cpu: bool = True, fds: tuple[int, int] = (7, 8)) -> str:
        """The shell snippet run before bwrap: join the cgroups, set rlimits,
        open bwrap's argument file and seccomp program on `fds` (single digits:
        dash's redirections take no more). It runs in the worker's namespaces,
        so it must stay tiny."""
        spec = self.spec
        lines = []
        if attach:
            lines += [f"echo $$ > {shlex.quote(f)} || exit 125" for f in self.cgroups.procs_files()]
        if cpu:
            lines.append(f"ulimit -t {max(1, int(timeout_s * max(spec.cpus, 1)) + 1)}")
        # 512-byte blocks: no single file may exceed the bigger of the caps.
        lines.append(f"ulimit -f {max(spec.workspace_mb, spec.tmp_mb) * 2048}")
        if not self.cgroups.has_memory:
            # Address space, not memory: generous so runtimes' reservations still work.
            lines.append(f"ulimit -v {spec.memory_mb * 1024 * 2}")
        if not self.cgroups.has_pids and self._nproc_limit:
            # Not `ulimit -u`: dash spells it -p, bash -u; util-linux is here anyway (setpriv).
            lines.append(f"prlimit --nproc={self._nproc_limit} --pid $$ 2>/dev/null")
        args_fd, seccomp_fd = fds
        lines.append(
            f'exec "$@" {args_fd}<{shlex.quote(str(self.args_file))} {seccomp_fd}<{shlex.quote(str(self.seccomp_file))}'
        )
        return "\n".join(lines)

    def _write_args(self, status_fd: int, seccomp_fd: int, options: list[str]) -> None:
        # Options only: bwrap stops reading --args at `--`, so the command
        # itself follows `--args N --` on the real command line.
        args = [*self._static_args[1:], "--seccomp", str(seccomp_fd), "--json-status-fd", str(status_fd), *options]
        if any("\0" in a for a in args):
            raise SandboxError("a command or environment value contains a NUL byte", permanent=True)
        _write_private(self.args_file, b"".join(a.encode() + b"\0" for a in args))

    # -- exec --------------------------------------------------------------
    def exec(self, command, *, timeout_s=None, stdin=None, env=None) -> ExecResult:
        if self.stopped:
            raise SandboxError("sandbox is stopped", permanent=True)
        spec = self.spec
        timeout_s = spec.exec_timeout_s if timeout_s is None else float(timeout_s)
        argv = shell_command(command)
        env_args: list[str] = []
        for key, value in (env or {}).items():
            env_args += ["--setenv", str(key), str(value)]
        with self._exec_lock:
            oom_before = self.cgroups.oom_kills()
            started = time.monotonic()
            child = self._launch(env_args, argv, timeout_s, stdin is not None)
            out, err = CappedBuffer(spec.output_cap), CappedBuffer(spec.output_cap)
            status = bytearray()
            timed_out = over_cap = cancelled = False
            try:
                timed_out, over_cap, cancelled = self._pump(child, stdin, out, err, status, started + timeout_s)
            finally:
                returncode = child.finish()
                if getattr(child, "link", None) is not None:
                    child.link.close()
            duration_ms = int((time.monotonic() - started) * 1000)
        child_started, exit_code = parse_status(bytes(status))
        if not child_started and not timed_out and not cancelled:
            raise SandboxError(f"bwrap failed to start the sandbox (exit {returncode}): {err.text()[-2000:]}")
        if exit_code is None and returncode is not None:
            exit_code = 128 - returncode if returncode < 0 else returncode
        oom = self.cgroups.oom_kills() > oom_before
        if over_cap:
            self.limit_hit = f"/workspace or /tmp went over its size cap ({spec.workspace_mb} / {spec.tmp_mb} MB)"
            err.write(f"\n[gymwright] {self.limit_hit}\n".encode())
        elif self.workspace_cap_hard and (self._record_full(self._free_space()) or self.limit_hit):
            err.write(f"\n[gymwright] {self.limit_hit}\n".encode())
        if cancelled:
            err.write(CANCELLED_NOTE.encode())
        stdout, stdout_odd = out.decoded()
        return ExecResult(
            exit_code=None if timed_out or cancelled else exit_code,
            stdout=stdout,
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            timed_out=timed_out,
            oom_killed=oom,
            duration_ms=duration_ms,
            stdout_odd=stdout_odd,
        )

    def _launch(self, options: list[str], argv: list[str], timeout_s: float, with_stdin: bool) -> Child:
        if self.spec.network_allowed:
            # bwrap waits (--block-fd) until its namespace has its link and filter.
            return self._popen(options, argv, timeout_s, with_stdin, egress=True)
        if self._spawner is not None or (self.cgroups.dirs and self.backend.use_spawner):
            try:
                return self._spawn(options, argv, timeout_s, with_stdin)
            except SpawnerGone as exc:
                log.debug("spawner unavailable (%s); starting bwrap directly", exc)
                self._close_spawner()
        return self._popen(options, argv, timeout_s, with_stdin)

    def _popen(
        self, options: list[str], argv: list[str], timeout_s: float, with_stdin: bool, egress: bool = False
    ) -> Child:
        status_r, status_w = os.pipe()
        ours, theirs = [status_r], [status_w]
        if egress:
            info_r, info_w = os.pipe()
            block_r, block_w = os.pipe()
            ours += [info_r, block_w]
            theirs += [info_w, block_r]
            options = ["--info-fd", str(info_w), "--block-fd", str(block_r), *options]
        args_fd, seccomp_fd = [n for n in range(3, 10) if n not in theirs][:2]
        try:
            self._write_args(status_w, seccomp_fd, options)
        except BaseException:
            for fd in ours + theirs:
                os.close(fd)
            raise
        full = [
            "/bin/sh",
            "-c",
            self._prelude(timeout_s, attach=True, fds=(args_fd, seccomp_fd)),
            "gymwright-sandbox",
            *self._setpriv_args(),
            self.backend.bwrap,
            "--args",
            str(args_fd),
            "--",
            *argv,
        ]
        try:
            proc = subprocess.Popen(
                full,
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=tuple(theirs),
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                close_fds=True,
            )
        except OSError as exc:
            for fd in ours:
                os.close(fd)
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        finally:
            for fd in theirs:
                os.close(fd)
        spawner = self._spawner  # in the same cgroups, and not the exec's
        child = PopenChild(
            proc, status_r, self.cgroups, keep=frozenset({spawner.pid}) if spawner is not None else frozenset()
        )
        if egress:
            try:
                pid = read_child_pid(info_r)
                child.link = EgressLink(
                    pid=pid, policy=self.backend.egress, host_addrs=self.host_addrs, run_as=self._setpriv_args()
                )
                os.write(block_w, b"1")
            except BaseException:
                child.kill()
                child.finish()
                raise
            finally:
                os.close(info_r)
                os.close(block_w)
        return child

    def _setpriv_args(self) -> list[str]:
        if not self.backend.run_as:
            return []
        return [self.backend.setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]

    # The spawner: a shell started once per sandbox, already inside its
    # cgroups, that forks every exec's bwrap. Moving a new process into a
    # cgroup (v1) takes a global lock that waits for an RCU grace period,
    # several ms per controller on a busy host; a forked child simply
    # inherits the cgroups. The spawner opens our pipe ends through
    # /proc/<worker pid>/fd (same uid), reads bwrap's arguments from a file
    # (bwrap --args) and reports the pid it started and its exit status.
    def _start_spawner(self) -> None:
        attach = "".join(f"echo $$ > {shlex.quote(f)} || exit 125\n" for f in self.cgroups.procs_files())
        script = (
            attach + "P=$1\n"
            "while read -r i o e s f; do\n"
            '  if [ "$i" = - ]; then exec 3</dev/null; else exec 3</proc/$P/fd/$i; fi\n'
            "  exec 4>/proc/$P/fd/$o 5>/proc/$P/fd/$e 6>/proc/$P/fd/$s\n"
            '  ( exec 3<&- 4>&- 5>&-; . "$f" ) <&3 >&4 2>&5 &\n'
            "  pid=$!\n"
            "  exec 3<&- 4>&- 5>&- 6>&-\n"
            '  echo "S $pid"\n'
            "  wait $pid\n"
            '  echo "X $?"\n'
            "done\n"
        )
        argv = ["/bin/sh", "-c", script, "gymwright-spawner", str(os.getpid())]
        try:
            self._spawner = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                close_fds=True,
            )
        except OSError as exc:
            raise SpawnerGone(str(exc)) from exc

    def _spawn(self, options: list[str], argv: list[str], timeout_s: float, with_stdin: bool) -> Child:
        if self._spawner is None or self._spawner.poll() is not None:
            self._close_spawner()
            self._start_spawner()
        # The exec's rlimits and command line, as a script the spawner's
        # subshell sources (root-owned, outside anything the sandbox sees).
        self._write_args(6, 8, options)
        command = [*self._setpriv_args(), self.backend.bwrap, "--args", "7", "--", *argv]
        script = self._prelude(timeout_s, attach=False, fds=(7, 8)).replace(
            'exec "$@"', "exec " + " ".join(shlex.quote(a) for a in command)
        )
        script_file = self.root / "exec.sh"
        fd = os.open(script_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(script + "\n")
        pipes = [os.pipe() for _ in range(4 if with_stdin else 3)]
        if with_stdin:
            (in_r, in_w), (out_r, out_w), (err_r, err_w), (st_r, st_w) = pipes
        else:
            (out_r, out_w), (err_r, err_w), (st_r, st_w) = pipes
            in_r = in_w = None
        theirs = [fd for fd in (in_r, out_w, err_w, st_w) if fd is not None]
        request = (f"{in_r if in_r is not None else '-'} {out_w} {err_w} {st_w} {script_file}\n").encode()
        try:
            self._spawner.stdin.write(request)
            self._spawner.stdin.flush()
            line = read_line(self._spawner.stdout, 10.0)
            if not line.startswith(b"S "):
                raise SpawnerGone(f"unexpected reply {line[:80]!r}")
            pid = int(line.split()[1])
        except (OSError, ValueError, SpawnerGone) as exc:
            for fd in [*theirs, out_r, err_r, st_r, *([in_w] if in_w is not None else [])]:
                os.close(fd)
            raise SpawnerGone(str(exc)) from exc
        # The spawner holds its own copies now; ours must go, or EOF never comes.
        for fd in theirs:
            os.close(fd)
        return SpawnedChild(self._spawner, pid, in_w, out_r, err_r, st_r, self.cgroups)

    def _close_spawner(self) -> None:
        spawner, self._spawner = self._spawner, None
        if spawner is None:
            return
        try:
            spawner.stdin.close()
        except OSError:
            pass
        try:
            spawner.kill()
        except OSError:
            pass
        spawner.wait()
        if spawner.stdout:
            spawner.stdout.close()

    def _pump(self, child: Child, stdin, out, err, status, deadline) -> tuple[bool, bool, bool]:
        """Move bytes between the process and the buffers until it exits, the
        deadline passes (kill it), the workspace grows past a soft cap (kill it)
        or `interrupt()` says the rollout was cancelled (kill it)."""
        selector = selectors.DefaultSelector()
        selector.register(child.out_fd, selectors.EVENT_READ, out)
        selector.register(child.err_fd, selectors.EVENT_READ, err)
        selector.register(child.status_fd, selectors.EVENT_READ, status)
        pending = memoryview(stdin or b"")
        if child.in_fd is not None:
            os.set_blocking(child.in_fd, False)
            if pending:
                selector.register(child.in_fd, selectors.EVENT_WRITE, None)
            else:
                child.close_stdin()
        timed_out = over_cap = cancelled = killed = False
        next_watch = time.monotonic() + WATCH_INTERVAL_S
        while selector.get_map():
            now = time.monotonic()
            if not killed and now >= deadline:
                timed_out = killed = True
                child.kill()
            if not killed and now >= next_watch:
                next_watch = now + WATCH_INTERVAL_S
                if self._over_cap():
                    over_cap = killed = True
                    child.kill()
                elif self.workspace_cap_hard and not self.limit_hit:
                    # Seen while it runs: a file deleted but held open is freed when its process ends.
                    self._record_full(self._free_space())
                if not killed and self._interrupted():
                    cancelled = killed = True
                    child.kill()
            wait = 0.1 if killed else max(0.0, min(deadline, next_watch) - now)
            events = selector.select(timeout=wait)
            if killed and not events and not child.alive():
                break  # the pipes' other ends died with the pid namespace
            for key, _ in events:
                if key.data is None:  # stdin
                    try:
                        written = os.write(key.fd, pending[:65536])
                        pending = pending[written:]
                    except OSError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fd)
                        child.close_stdin()
                    continue
                try:
                    chunk = os.read(key.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                key.data.write(chunk) if key.data is not status else status.extend(chunk)
        selector.close()
        child.close_stdin()
        return timed_out, over_cap or self._over_cap(), cancelled

    def _free_space(self) -> dict[str, int]:
        free = {}
        for where, path in ((WORKSPACE, self.workspace_dir), (TMP, self.tmp_dir)):
            try:
                info = os.statvfs(path)
            except OSError:
                continue
            free[where] = info.f_bavail * info.f_frsize
        return free

    def _over_cap(self) -> bool:
        # Without tmpfs mounts, a soft cap: checked every WATCH_INTERVAL_S
        # during an exec and after it; RLIMIT_FSIZE bounds any single file hard.
        if self.workspace_cap_hard:
            return False
        mb = 1024 * 1024
        return (
            _tree_size(self.workspace_dir, self.spec.workspace_mb * mb) > self.spec.workspace_mb * mb
            or _tree_size(self.tmp_dir, self.spec.tmp_mb * mb) > self.spec.tmp_mb * mb
        )

    # -- files -------------------------------------------------------------
    def _host_path(self, path: str, *, writable: bool) -> Path:
        root, rel = split_path(path, writable=writable)
        base = {WORKSPACE: self.workspace_dir, TMP: self.tmp_dir, ENV_DIR: self.env_dir}[root]
        target = base / rel
        # The sandbox owns these directories and may plant symlinks; never
        # follow one out of the sandbox (the worker would read its own files).
        real = Path(os.path.realpath(target))
        if real != base and base not in real.parents:
            raise SandboxError(f"path {path!r} leads outside the sandbox", permanent=True)
        return real

    # File operations hold the exec lock: no sandbox process runs while the
    # worker resolves and opens paths in directories the sandbox controls, so
    # a symlink cannot be swapped in between the check and the open.
    def write_file(self, path: str, data: bytes) -> None:
        with self._exec_lock:
            self._write_file(path, data)

    def _write_file(self, path: str, data: bytes) -> None:
        target = self._host_path(path, writable=True)
        base = self.workspace_dir if self.workspace_dir in target.parents else self.tmp_dir
        parents = [p for p in reversed(target.parents) if base in p.parents]
        for parent in parents:
            if not parent.exists():
                parent.mkdir()
                self._own(parent)
        # Never block on a FIFO the agent put there (O_NONBLOCK), never write through a link.
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ELOOP, errno.EISDIR):
                raise SandboxError(
                    f"{path!r} is not a regular file; only regular files can be written", permanent=True
                ) from None
            raise SandboxError(f"cannot write {path!r}: {exc.strerror}", permanent=True) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SandboxError(f"{path!r} is not a regular file; only regular files can be written", permanent=True)
            os.set_blocking(fd, True)
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            if self.workspace_cap_hard and self._record_full(self._free_space()):
                raise SandboxError(f"cannot write {path!r}: {self.limit_hit}", permanent=True) from None
            raise SandboxError(f"cannot write {path!r}: {exc.strerror}", permanent=True) from None
        finally:
            os.close(fd)
        self._own(target)

    def _own(self, path: Path) -> None:
        if self.backend.run_as:
            os.chown(path, self.uid, self.gid, follow_symlinks=False)

    def read_file(self, path: str, *, max_bytes: int = MAX_READ_BYTES, follow_links: bool = True) -> bytes:
        with self._exec_lock:
            return self._read_file(path, max_bytes=max_bytes, follow_links=follow_links)

    def _read_file(self, path: str, *, max_bytes: int = MAX_READ_BYTES, follow_links: bool = True) -> bytes:
        max_bytes = min(max_bytes, MAX_READ_BYTES)
        try:
            if follow_links:
                fd = open_regular(self._host_path(path, writable=False))
            else:
                root, rel = split_path(path, writable=False)
                fd = open_beneath({WORKSPACE: self.workspace_dir, TMP: self.tmp_dir, ENV_DIR: self.env_dir}[root], rel)
        except NotRegularFile as exc:
            raise SandboxError(f"{path!r} {exc.strerror}; only regular files can be read", permanent=True) from None
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise FileNotFoundError(path) from exc
            raise SandboxError(f"cannot read {path!r}: {exc.strerror}", permanent=True) from exc
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise SandboxError(f"{path!r} is larger than {max_bytes} bytes", permanent=True)
        return data

    def list_files(self) -> list[str]:
        with self._exec_lock:
            return self._list_files()

    def _list_files(self) -> list[str]:
        found = []
        deadline = time.monotonic() + self.backend.limits.io_timeout_s
        for dirpath, _dirnames, filenames in os.walk(self.workspace_dir, followlinks=False):
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"listing the workspace took longer than {self.backend.limits.io_timeout_s:g} s", permanent=True
                )
            for name in filenames:
                full = os.path.join(dirpath, name)
                if stat.S_ISREG(os.lstat(full).st_mode):
                    found.append(os.path.relpath(full, self.workspace_dir))
        return sorted(found)

    def snapshot(self, dest: Path) -> Path:
        with self._exec_lock:
            return self._snapshot(dest)

    def _snapshot(self, dest: Path) -> Path:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        budget = SnapshotBudget(self.backend.limits)
        for dirpath, dirnames, filenames in os.walk(self.workspace_dir, followlinks=False):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, self.workspace_dir)
            for name in sorted(filenames):
                src = os.path.join(dirpath, name)
                rel = os.path.normpath(os.path.join(rel_dir, name))
                try:
                    st = os.lstat(src)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or not budget.admit(rel, st.st_size):
                    continue
                try:
                    fd = open_regular(src)
                except OSError:
                    continue
                try:
                    (dest / rel_dir).mkdir(parents=True, exist_ok=True)
                    out = os.open(dest / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                    try:
                        copy_sparse(fd, out, size=st.st_size)
                    finally:
                        os.close(out)
                finally:
                    os.close(fd)
            for name in dirnames:
                if not os.path.islink(os.path.join(dirpath, name)):
                    (dest / rel_dir / name).mkdir(parents=True, exist_ok=True)
        self.snapshot_left_out = budget.left_out
        return dest

    # -- between the episode and the checks ----------------------------------
    def end_processes(self) -> None:
        # Each exec's pid namespace already dies with it; what could remain is
        # in the sandbox's cgroups (the spawner too: a fresh one starts on the
        # next exec).
        with self._exec_lock:
            self._close_spawner()
            self.cgroups.kill_all()

    def open_verifier_paths(self) -> None:
        # Folders inside the sandbox's /tmp (under its cap), under a name the agent could not guess and
        # made now, when none of its processes is left: bound at /logs and /tests for every later exec.
        with self._exec_lock:
            if self.verifier_binds:
                return
            base = self.tmp_dir / f".gymwright-verifier-{secrets.token_hex(12)}"
            binds = []
            try:
                base.mkdir(mode=0o755)
                for path in VERIFIER_PATHS:
                    folder = base / path.lstrip("/")
                    folder.mkdir(mode=0o755)
                    if self.backend.run_as:
                        os.chown(folder, self.uid, self.gid)
                    binds += ["--bind", str(folder), path]
            except OSError as exc:  # /tmp full: the checks that need them say so
                log.warning("sandbox %s: no verifier paths: %s", self.id, exc)
                return
            self.verifier_binds = binds
            self._static_args = self._bwrap_args()

    def restore_files(self, files) -> dict[str, str]:
        from grading.engine.safe_files import place_files, remove_module_shadows

        by_root: dict[str, dict[str, bytes]] = {}
        for path, data in files.items():
            root, rel = split_path(path, writable=True)
            by_root.setdefault(root, {})[rel] = (path, data)
        found: dict[str, str] = {}
        with self._exec_lock:
            for root, entries in by_root.items():
                base = {WORKSPACE: self.workspace_dir, TMP: self.tmp_dir}[root]
                try:
                    remove_module_shadows(base, entries)
                    kinds = place_files(
                        base, {rel: data for rel, (_, data) in entries.items()}, on_create=lambda p: self._own(Path(p))
                    )
                except OSError as exc:
                    # The sandbox's own folders refused the write (its workspace full, what the agent left there):
                    # a retry meets it again, and the checks fail on it (docker's _refused_by_sandbox, the same rule).
                    raise SandboxError(f"cannot restore the task's files: {exc}", permanent=True) from None
                found.update({path: kinds[rel] for rel, (path, _) in entries.items()})
        return {path: found[path] for path in files}

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._close_spawner()
        try:
            self.cgroups.remove()
        finally:
            for path in reversed(self.mounts):
                _umount(path)
            self.mounts = []
            _force_rmtree(self.root)


def reap_bubblewrap(work_dir: str | Path | None = None) -> list[str]:
    """Remove bubblewrap sandboxes left behind by workers that died: their
    directories (owner pid gone; mounts, if any, unmounted) and every
    `gymwright-<pid>-<id>` cgroup whose owner pid is gone. Returns the sandbox
    ids of the directories removed."""
    from .cgroups import remove_dead_owner_cgroups

    removed = []
    base = Path(work_dir) if work_dir else default_work_dir()
    if base.is_dir():
        for entry in base.iterdir():
            if not entry.name.startswith("gw-"):
                continue
            try:
                pid = int((entry / "owner").read_text().strip())
            except (OSError, ValueError):
                # No owner yet: a sandbox being created right now, unless old.
                try:
                    if time.time() - entry.stat().st_mtime < 600:
                        continue
                except OSError:
                    continue
                pid = None
            if pid is not None and pid_alive(pid):
                continue
            for sub in ("workspace", "tmp"):
                if os.path.ismount(entry / sub):
                    _umount(entry / sub)
            _force_rmtree(entry)
            removed.append(entry.name.split("-")[1])
    remove_dead_owner_cgroups(pid_alive)
    return removed


_SECCOMP_PROGRAM: bytes | None = None


def _seccomp_program() -> bytes:
    global _SECCOMP_PROGRAM
    if _SECCOMP_PROGRAM is None:
        from .seccomp import UnsupportedArch, bpf_program

        try:
            _SECCOMP_PROGRAM = bpf_program()
        except UnsupportedArch as exc:
            raise SandboxError(f"bubblewrap sandbox: {exc}; use the docker backend", permanent=True) from exc
    return _SECCOMP_PROGRAM


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


@functools.cache
def _libc():
    # find_library runs `ldconfig -p` and searches its output: once per process, not per mount
    # (it was an eighth of a worker's time per rollout)
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def sandbox_uid(sandbox_id: str) -> int:
    """The uid (and gid) of sandbox `sandbox_id` (12 random hex digits): two live sandboxes share one only
    by a 1-in-16-million chance, and then merely share a process count, as every sandbox did before."""
    return SANDBOX_UID_BASE + int(sandbox_id, 16) % SANDBOX_UID_SPAN


def root_entry_args() -> list[str]:
    """bwrap arguments for /bin, /lib and the like as the host has them: links into /usr (merged /usr) or
    read-only binds. Never a bind of "/" itself: that would take in every other sandbox's mounts."""
    args: list[str] = []
    for name in ROOT_ENTRIES:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args


def _mount_tmpfs(path: Path, options: str) -> str | None:
    """mount(2) a nosuid,nodev tmpfs at `path` (no mount(8) process: ~4x faster
    sandbox starts); returns why not, or None."""
    import ctypes

    try:
        libc = _libc()
        if (
            libc.mount(
                b"gymwright-sandbox",
                os.fsencode(path),
                b"tmpfs",
                ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
                options.encode(),
            )
            == 0
        ):
            return None
        return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        return str(exc)


def _umount(path: Path) -> None:
    # Lazy: a process that still has a file open there must not keep the mount alive.
    try:
        if _libc().umount2(os.fsencode(path), _MNT_DETACH) == 0:
            return
    except (OSError, AttributeError):
        pass
    subprocess.run(["umount", "-l", str(path)], capture_output=True, env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})


def _count_processes(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _tree_size(root: Path, stop_above: int) -> int:
    """Bytes used under `root` (allocated blocks, so sparse files count what
    they take); stops counting once past `stop_above`."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                if total > stop_above:
                    return total
    return total


def _force_rmtree(path: Path) -> None:
    root = os.path.abspath(path)

    def onerror(func, target, exc_info):
        if isinstance(exc_info[1], FileNotFoundError):
            return
        # A sandbox can leave directories without write permission. Only ever
        # touch modes inside the sandbox's own tree, never the work dir.
        parent = os.path.dirname(os.path.abspath(target))
        try:
            if parent == root or parent.startswith(root + os.sep):
                os.chmod(parent, 0o700)
            if os.path.abspath(target) != root:
                os.chmod(target, 0o700, follow_symlinks=False)
            func(target)
        except (OSError, NotImplementedError):
            pass

    shutil.rmtree(path, onerror=onerror)
