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
cgroup; RLIMIT_NPROC only when the sandbox user is not shared), CPU (cpu
cgroup quota for `cpus`, RLIMIT_CPU per process), a single file's size
(RLIMIT_FSIZE = the workspace cap) and the workspace's total size (watched
during the exec and checked after it). When the worker runs as root the
sandbox runs as uid/gid 65534 (setpriv before bwrap), so a process that got
out of its namespaces would still be `nobody`.

Processes do not outlive their exec: the pid namespace dies with the
command's bwrap, so a background `server &` is gone when the exec returns
(unlike docker, where it lives until the container stops).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..results import ExecResult
from ..spec import CappedBuffer, SandboxError, SandboxSpec
from .base import ENV_DIR, MAX_READ_BYTES, TMP, WORKSPACE, Backend, Sandbox, shell_command, split_path
from .cgroups import CgroupSet

log = logging.getLogger(__name__)

SANDBOX_PATH = "/opt/gymwright/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
# /etc entries the programs in /usr need to work; everything else stays hidden.
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl",
               "ca-certificates", "ca-certificates.conf", "localtime", "mime.types",
               "protocols", "services", "python3", "python3.11", "bash.bashrc", "profile")
ROOT_ENTRIES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
WATCH_INTERVAL_S = 0.5


def default_work_dir() -> Path:
    return Path(os.environ.get("GYMWRIGHT_SANDBOX_DIR")
                or Path(tempfile.gettempdir()) / "gymwright-sandboxes")


class BubblewrapBackend(Backend):
    """Options: `work_dir` (where sandbox directories live; default
    $GYMWRIGHT_SANDBOX_DIR or /tmp/gymwright-sandboxes; must be traversable by
    the sandbox user), `run_as` ((uid, gid) to drop to when the worker is root;
    default (65534, 65534); None keeps the worker's uid), `bwrap` (path),
    `python` (interpreter linked as `python`/`python3` in the sandbox),
    `ro_binds` (extra host paths shown read-only at the same place),
    `use_cgroups` (default True)."""

    name = "bubblewrap"

    def __init__(self, *, work_dir: str | Path | None = None,
                 run_as: tuple[int, int] | None = (65534, 65534), bwrap: str | None = None,
                 python: str | None = None, ro_binds: Sequence[str] = (),
                 use_cgroups: bool = True):
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        if not os.path.exists(self.bwrap):
            raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap",
                               permanent=True)
        self.work_dir = Path(work_dir) if work_dir else default_work_dir()
        self.run_as = run_as if (run_as and os.geteuid() == 0) else None
        self.setpriv = shutil.which("setpriv") if self.run_as else None
        if self.run_as and not self.setpriv:
            raise SandboxError("setpriv (util-linux) is needed to drop root for bubblewrap",
                               permanent=True)
        self.python = python or next(
            (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None)
        self.ro_binds = tuple(ro_binds)
        self.use_cgroups = use_cgroups

    def _create(self, spec: SandboxSpec) -> "BubblewrapSandbox":
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
        try:
            backend.work_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(backend.work_dir, 0o711)
            self.root = Path(tempfile.mkdtemp(prefix=f"gw-{self.id}-", dir=backend.work_dir))
        except OSError as exc:
            raise SandboxError(f"cannot create sandbox directory in {backend.work_dir}: {exc}") from exc
        self.root.chmod(0o711)
        self.workspace_dir = self.root / "workspace"
        self.tmp_dir = self.root / "tmp"
        self.env_dir = self.root / "env"
        self.etc_dir = self.root / "etc"
        uid, gid = backend.run_as or (os.getuid(), os.getgid())
        self.uid, self.gid = uid, gid
        for path, mode in ((self.workspace_dir, 0o755), (self.tmp_dir, 0o1777),
                           (self.env_dir, 0o755), (self.etc_dir, 0o755)):
            path.mkdir()
            path.chmod(mode)
        if backend.run_as:
            os.chown(self.workspace_dir, uid, gid)
            os.chown(self.tmp_dir, uid, gid)
            self._check_traversable()
        self._write_etc()
        self.cgroups = CgroupSet.create(
            f"gymwright-{self.id}", memory_bytes=spec.memory_mb * 1024 * 1024,
            pids=spec.pids, cpus=spec.cpus) if backend.use_cgroups else CgroupSet({})
        self._static_args = self._bwrap_args()

    # -- setup -------------------------------------------------------------
    def _check_traversable(self) -> None:
        # bwrap opens the bind sources as the dropped user: every ancestor needs o+x.
        for parent in [self.root, *self.root.parents]:
            if not parent.stat().st_mode & stat.S_IXOTH:
                shutil.rmtree(self.root, ignore_errors=True)
                raise SandboxError(
                    f"sandbox directory {self.root} is not reachable by uid {self.uid}: "
                    f"{parent} lacks o+x; choose another work_dir", permanent=True)

    def _write_etc(self) -> None:
        users = ["root:x:0:0:root:/tmp:/bin/sh", "nobody:x:65534:65534:nobody:/tmp:/bin/sh"]
        groups = ["root:x:0:", "nogroup:x:65534:"]
        if self.uid not in (0, 65534):
            users.append(f"sandbox:x:{self.uid}:{self.gid}:sandbox:/tmp:/bin/sh")
            groups.append(f"sandbox:x:{self.gid}:")
        files = {
            "passwd": "\n".join(users) + "\n",
            "group": "\n".join(groups) + "\n",
            "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
            "hostname": "sandbox\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
        }
        for name, text in files.items():
            (self.etc_dir / name).write_text(text)
            (self.etc_dir / name).chmod(0o644)

    def _bwrap_args(self) -> list[str]:
        spec = self.spec
        args = [self.backend.bwrap, "--unshare-all"]
        if spec.network_allowed:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--clearenv",
                 "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
        for name in ROOT_ENTRIES:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        for name in ETC_ENTRIES:
            if os.path.lexists(f"/etc/{name}"):
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        for name in sorted(os.listdir(self.etc_dir)):
            args += ["--ro-bind", str(self.etc_dir / name), f"/etc/{name}"]
        if spec.network_allowed and os.path.exists("/etc/resolv.conf"):
            args += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        for path in self.backend.ro_binds:
            args += ["--ro-bind", path, path]
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--bind", str(self.workspace_dir), WORKSPACE,
                 "--bind", str(self.tmp_dir), TMP,
                 "--ro-bind", str(self.env_dir), ENV_DIR,
                 "--dir", "/opt/gymwright/bin"]
        if self.backend.python:
            for alias in ("python", "python3"):
                args += ["--symlink", self.backend.python, f"/opt/gymwright/bin/{alias}"]
        # Last: the tmpfs root bwrap built (and the directories it made for
        # the binds, such as /etc) becomes read-only too.
        args += ["--remount-ro", "/"]
        args += ["--chdir", WORKSPACE,
                 "--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", TMP,
                 "--setenv", "TMPDIR", TMP, "--setenv", "LANG", "C.UTF-8",
                 "--setenv", "USER", "sandbox", "--setenv", "PYTHONUNBUFFERED", "1"]
        return args

    def _prelude(self, timeout_s: float) -> str:
        """The shell snippet run before bwrap: join the cgroups, set rlimits,
        drop root. It runs in the worker's namespaces, so it must stay tiny."""
        spec = self.spec
        lines = [f"echo $$ > {shlex.quote(f)} || exit 125" for f in self.cgroups.procs_files()]
        cpu_seconds = max(1, int(timeout_s * max(spec.cpus, 1)) + 1)
        lines.append(f"ulimit -t {cpu_seconds}")
        # 512-byte blocks: no single file may exceed the workspace cap.
        lines.append(f"ulimit -f {max(spec.workspace_mb, spec.tmp_mb) * 2048}")
        if not self.cgroups.has_memory:
            # Address space, not memory: generous so runtimes' reservations still work.
            lines.append(f"ulimit -v {spec.memory_mb * 1024 * 2}")
        if not self.cgroups.has_pids and self.backend.run_as:
            lines.append(f"ulimit -u {spec.pids}")
        lines.append('exec "$@"')
        return "\n".join(lines)

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
        status_r, status_w = os.pipe()
        bwrap = [*self._static_args, *env_args, "--json-status-fd", str(status_w), "--", *argv]
        if self.backend.run_as:
            uid, gid = self.backend.run_as
            bwrap = [self.backend.setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                     *bwrap]
        full = ["/bin/sh", "-c", self._prelude(timeout_s), "gymwright-sandbox", *bwrap]
        oom_before = self.cgroups.oom_kills()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                full, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(status_w,),
                start_new_session=True, env={"PATH": "/usr/bin:/bin"}, cwd="/", close_fds=True)
        except OSError as exc:
            os.close(status_r)
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        finally:
            os.close(status_w)
        out, err = CappedBuffer(spec.output_cap), CappedBuffer(spec.output_cap)
        status = bytearray()
        timed_out = over_cap = False
        try:
            timed_out, over_cap = self._pump(proc, stdin, out, err, status_r, status,
                                             started + timeout_s)
        finally:
            if proc.poll() is None:
                self._kill(proc)
            proc.wait()
            os.close(status_r)
        duration_ms = int((time.monotonic() - started) * 1000)
        child_started, exit_code = _parse_status(bytes(status))
        if not child_started and not timed_out:
            raise SandboxError(f"bwrap failed to start the sandbox (exit {proc.returncode}): "
                               f"{err.text()[-2000:]}")
        if exit_code is None:
            rc = proc.returncode
            exit_code = 128 - rc if rc < 0 else rc
        oom = self.cgroups.oom_kills() > oom_before
        if over_cap:
            err.write(f"\n[gymwright] /workspace or /tmp went over its size cap "
                      f"({spec.workspace_mb} / {spec.tmp_mb} MB)\n".encode())
        return ExecResult(
            exit_code=None if timed_out else exit_code, stdout=out.text(), stderr=err.text(),
            stdout_truncated=out.truncated, stderr_truncated=err.truncated,
            timed_out=timed_out, oom_killed=oom, duration_ms=duration_ms)

    def _pump(self, proc, stdin, out, err, status_fd, status, deadline) -> tuple[bool, bool]:
        """Move bytes between the process and the buffers until it exits, the
        deadline passes (kill it) or the workspace grows past its cap (kill it)."""
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        selector.register(status_fd, selectors.EVENT_READ, status)
        pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if pending:
                selector.register(proc.stdin, selectors.EVENT_WRITE, None)
            else:
                proc.stdin.close()
        timed_out = over_cap = killed = False
        next_watch = time.monotonic() + WATCH_INTERVAL_S
        while selector.get_map():
            now = time.monotonic()
            if not killed and now >= deadline:
                timed_out = killed = True
                self._kill(proc)
            if not killed and now >= next_watch:
                next_watch = now + WATCH_INTERVAL_S
                if self._over_cap():
                    over_cap = killed = True
                    self._kill(proc)
            wait = 0.1 if killed else max(0.0, min(deadline, next_watch) - now)
            events = selector.select(timeout=wait)
            if killed and not events and proc.poll() is not None:
                break  # the pipes' other ends died with the pid namespace
            for key, _ in events:
                if key.data is None:  # stdin
                    try:
                        written = os.write(key.fd, pending[:65536])
                        pending = pending[written:]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fileobj)
                        try:
                            proc.stdin.close()
                        except OSError:
                            pass
                    continue
                try:
                    chunk = os.read(key.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.write(chunk) if key.data is not status else status.extend(chunk)
        selector.close()
        if proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        return timed_out, over_cap or self._over_cap()

    def _over_cap(self) -> bool:
        # A soft cap: checked every WATCH_INTERVAL_S during an exec and after
        # it; RLIMIT_FSIZE bounds any single file hard.
        mb = 1024 * 1024
        return (_tree_size(self.workspace_dir, self.spec.workspace_mb * mb) > self.spec.workspace_mb * mb
                or _tree_size(self.tmp_dir, self.spec.tmp_mb * mb) > self.spec.tmp_mb * mb)

    def _kill(self, proc: subprocess.Popen) -> None:
        # The bwrap we started leads its own process group; its in-namespace
        # init gets SIGKILL through --die-with-parent, which kills the whole pid
        # namespace. The cgroup sweep in exec() catches the rest.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.cgroups.kill_all(timeout_s=1.0)

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

    def write_file(self, path: str, data: bytes) -> None:
        target = self._host_path(path, writable=True)
        base = self.workspace_dir if self.workspace_dir in target.parents else self.tmp_dir
        parents = [p for p in reversed(target.parents) if base in p.parents]
        for parent in parents:
            if not parent.exists():
                parent.mkdir()
                self._own(parent)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except BaseException:
            raise
        self._own(target)

    def _own(self, path: Path) -> None:
        if self.backend.run_as:
            os.chown(path, self.uid, self.gid, follow_symlinks=False)

    def read_file(self, path: str) -> bytes:
        target = self._host_path(path, writable=False)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise FileNotFoundError(path) from exc
            raise SandboxError(f"cannot read {path!r}: {exc.strerror}", permanent=True) from exc
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise SandboxError(f"{path!r} is not a regular file", permanent=True)
            data = fh.read(MAX_READ_BYTES + 1)
        if len(data) > MAX_READ_BYTES:
            raise SandboxError(f"{path!r} is larger than {MAX_READ_BYTES} bytes", permanent=True)
        return data

    def list_files(self) -> list[str]:
        found = []
        for dirpath, dirnames, filenames in os.walk(self.workspace_dir, followlinks=False):
            for name in filenames:
                full = os.path.join(dirpath, name)
                if stat.S_ISREG(os.lstat(full).st_mode):
                    found.append(os.path.relpath(full, self.workspace_dir))
        return sorted(found)

    def snapshot(self, dest: Path) -> Path:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for dirpath, dirnames, filenames in os.walk(self.workspace_dir, followlinks=False):
            rel_dir = os.path.relpath(dirpath, self.workspace_dir)
            for name in dirnames:
                if not os.path.islink(os.path.join(dirpath, name)):
                    (dest / rel_dir / name).mkdir(parents=True, exist_ok=True)
            for name in filenames:
                src = os.path.join(dirpath, name)
                if stat.S_ISREG(os.lstat(src).st_mode):
                    (dest / rel_dir).mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest / rel_dir / name, follow_symlinks=False)
        return dest

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        try:
            self.cgroups.remove()
        finally:
            _force_rmtree(self.root)


def _parse_status(data: bytes) -> tuple[bool, int | None]:
    child_started, exit_code = False, None
    for line in data.decode(errors="replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "child-pid" in item:
            child_started = True
        if "exit-code" in item:
            exit_code = int(item["exit-code"])
    return child_started, exit_code


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
    def onerror(func, target, exc_info):
        # A sandbox can leave directories without write permission.
        try:
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            func(target)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)


def _unused(_: Mapping) -> None:  # pragma: no cover - keeps the Mapping import honest
    pass
