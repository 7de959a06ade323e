"""Network egress for bubblewrap sandboxes: the internet, not this host.

An environment with `network: allowed/egress` gets its own network namespace
(bwrap's `--unshare-net`, as every sandbox) wired to the outside through
user-mode NAT: `slirp4netns` runs on the host side of each exec, turns the
sandbox's packets into ordinary sockets of an unprivileged process, and stops
with the exec. The sandbox never shares the host's namespace, so the host's
loopback services and abstract unix sockets are out of its sight.

What user-mode NAT alone would still reach, an nftables filter inside the
sandbox's namespace (installed before the command starts; the sandbox has no
capability to change it) refuses every destination that is not global unicast:
the host's loopback through slirp's gateway, link-local (169.254.0.0/16, cloud
metadata), private, shared, documentation, benchmarking, reserved, multicast and
broadcast ranges (IANA's special-purpose registry: `BLOCKED`), and every subnet the
host is on (its own address and its neighbours, whatever their range), so only
global unicast destinations are reached. An operator allow-list (`EgressPolicy.allow`)
re-opens named destinations: `127.0.0.1:PORT` (a host loopback port, reached
inside as `host.gymwright.internal:PORT`, i.e. slirp's gateway 10.0.2.2),
`ADDR[/PREFIX][:PORT]` for anything else.
"""

from __future__ import annotations

import ipaddress
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass

from .spec import SandboxError

GATEWAY = "10.0.2.2"  # slirp4netns: the host (its loopback, unless disabled)
DNS = "10.0.2.3"
HOST_ALIAS = "host.gymwright.internal"
# Every IPv4 range that is not global unicast (IANA's special-purpose address registry, as Python's
# ipaddress reads it: a test checks each range against `is_global`), multicast and the reserved rest (224/3).
BLOCKED = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/3",
)
SETUP_TIMEOUT_S = 10.0
EGRESS_REFUSED = (
    "this environment asks for network egress (network: allowed/egress), which the "
    "operator has not enabled for this sandbox backend (GYMWRIGHT_SANDBOX_EGRESS; docker also "
    "needs GYMWRIGHT_SANDBOX_DOCKER_NETWORK)"
)


@dataclass(frozen=True)
class AllowEntry:
    network: ipaddress.IPv4Network
    port: int | None

    @property
    def loopback(self) -> bool:
        return self.network.subnet_of(ipaddress.ip_network("127.0.0.0/8"))


def parse_allow(entries) -> tuple[AllowEntry, ...]:
    """`127.0.0.1:8080`, `10.1.0.0/16`, `192.168.1.5:443` → entries; ValueError
    names the bad one. Loopback entries may only name 127.0.0.1 (what slirp's
    gateway leads to)."""
    parsed = []
    for raw in entries:
        text = raw.strip()
        if not text:
            continue
        address, port = text, None
        if text.count(":") == 1:
            address, _, port_text = text.partition(":")
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ValueError(f"egress allow-list entry {raw!r}: the port must be 1-65535")
            port = int(port_text)
        try:
            network = ipaddress.ip_network(address, strict=False)
        except ValueError as exc:
            raise ValueError(f"egress allow-list entry {raw!r}: {exc}") from None
        if network.version != 4:
            raise ValueError(f"egress allow-list entry {raw!r}: only IPv4 is supported")
        entry = AllowEntry(network, port)
        if entry.loopback and network != ipaddress.ip_network("127.0.0.1/32"):
            raise ValueError(
                f"egress allow-list entry {raw!r}: of the loopback range only 127.0.0.1 is reachable (as {HOST_ALIAS})"
            )
        parsed.append(entry)
    return tuple(parsed)


@dataclass(frozen=True)
class EgressPolicy:
    """Egress is on for the backend holding one; `allow` re-opens destinations
    the filter refuses by default."""

    allow: tuple[AllowEntry, ...] = ()

    @classmethod
    def from_strings(cls, entries) -> EgressPolicy:
        return cls(parse_allow(entries))

    @property
    def host_loopback(self) -> bool:
        return any(entry.loopback for entry in self.allow)


def host_addresses() -> list[str]:
    """Every IPv4 address of this host's interfaces with its prefix ("192.0.2.2/24"): slirp's sockets would
    reach them, and the subnets they are on (the host's neighbours)."""
    ip = shutil.which("ip") or "/usr/sbin/ip"
    try:
        out = subprocess.run(
            [ip, "-j", "-4", "addr", "show"],
            capture_output=True,
            timeout=10,
            env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
        ).stdout
        found = [
            f"{a['local']}/{a.get('prefixlen', 32)}"
            for link in json.loads(out or b"[]")
            for a in link.get("addr_info", [])
            if a.get("local")
        ]
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"egress: cannot list the host's addresses: {exc}") from exc
    return sorted(set(found))


def ruleset(policy: EgressPolicy, host_addrs: list[str]) -> str:
    """The nftables rules installed in the sandbox's namespace: allow-listed
    destinations and slirp's DNS first, then refuse every range that is not
    global unicast (`BLOCKED`), every subnet of this host (`host_addrs`:
    "ADDR/PREFIX", or a bare address), and all IPv6."""
    accepts = [f"ip daddr {DNS} udp dport 53 accept", f"ip daddr {DNS} tcp dport 53 accept"]
    for entry in policy.allow:
        target = GATEWAY if entry.loopback else str(entry.network)
        ports = f" tcp dport {entry.port}" if entry.port else ""
        accepts.append(f"ip daddr {target}{ports} accept")
        if entry.port:
            accepts.append(f"ip daddr {target} udp dport {entry.port} accept")
    blocked = [ipaddress.ip_network(b) for b in BLOCKED]
    for address in host_addrs:
        interface = ipaddress.ip_interface(address)
        for network in (interface.network, ipaddress.ip_network(f"{interface.ip}/32")):
            if network.version == 4 and not any(network.subnet_of(b) for b in blocked):
                blocked.append(network)
    refused = ", ".join(str(network) for network in ipaddress.collapse_addresses(blocked))  # no overlaps in a set
    lines = [
        "table inet gymwright {",
        "  chain out {",
        "    type filter hook output priority 0; policy accept;",
        '    oifname "lo" accept',
        *(f"    {rule}" for rule in accepts),
        f"    ip daddr {{ {refused} }} reject",
        "    meta nfproto ipv6 reject",
        "  }",
        "}",
        "",
    ]
    return "\n".join(lines)


def tools_missing() -> list[str]:
    return [
        name
        for name in ("slirp4netns", "nft", "nsenter")
        if not shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    ]


class EgressLink:
    """The network of one exec: slirp4netns attached to the namespace of
    bwrap's child `pid`, with the filter installed. `close()` stops slirp
    (it also stops by itself when the worker dies: its exit pipe closes)."""

    def __init__(self, *, pid: int, policy: EgressPolicy, host_addrs: list[str], run_as: list[str]):
        self.slirp: subprocess.Popen | None = None
        self._exit_w: int | None = None
        path = "/usr/bin:/bin:/usr/sbin:/sbin"
        try:
            net_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise SandboxError(f"egress: the sandbox process is gone: {exc}") from exc
        user_fd = None
        try:
            import fcntl

            # NS_GET_USERNS: the user namespace that owns the network namespace,
            # which the unprivileged slirp must enter to open its tap device.
            user_fd = fcntl.ioctl(net_fd, 0xB701)
            self._filter(net_fd, user_fd, ruleset(policy, host_addrs), path)
            ready_r, ready_w = os.pipe()
            exit_r, self._exit_w = os.pipe()
            argv = [
                *run_as,
                shutil.which("slirp4netns", path=path),
                "--configure",
                "--mtu=65520",
                "--enable-seccomp",
                f"--userns-path=/proc/self/fd/{user_fd}",
                "--netns-type=path",
                "--ready-fd",
                str(ready_w),
                "--exit-fd",
                str(exit_r),
            ]
            if not policy.host_loopback:
                argv.append("--disable-host-loopback")
            argv += [f"/proc/self/fd/{net_fd}", "tap0"]
            try:
                self.slirp = subprocess.Popen(
                    argv,
                    pass_fds=(net_fd, user_fd, ready_w, exit_r),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    env={"PATH": path},
                    cwd="/",
                )
            finally:
                os.close(ready_w)
                os.close(exit_r)
            try:
                ready = _read_some(ready_r, SETUP_TIMEOUT_S)
            finally:
                os.close(ready_r)
            if ready != b"1":
                raise SandboxError(f"egress: slirp4netns did not come up (exit {self.slirp.poll()})")
        except BaseException:
            self.close()
            raise
        finally:
            os.close(net_fd)
            if user_fd is not None:
                os.close(user_fd)

    @staticmethod
    def _filter(net_fd: int, user_fd: int, rules: str, path: str) -> None:
        # Fail closed: without the filter the sandbox would reach the host.
        # Root acts on any namespace from where it is; a worker that is not
        # root owns the sandbox's user namespace and enters it for the capability.
        enter_user = [] if os.geteuid() == 0 else ["--preserve-credentials", f"--user=/proc/self/fd/{user_fd}"]
        argv = [
            shutil.which("nsenter", path=path),
            *enter_user,
            f"--net=/proc/self/fd/{net_fd}",
            shutil.which("nft", path=path),
            "-f",
            "-",
        ]
        try:
            proc = subprocess.run(
                argv,
                input=rules.encode(),
                capture_output=True,
                pass_fds=(net_fd, user_fd),
                timeout=SETUP_TIMEOUT_S,
                env={"PATH": path},
                cwd="/",
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"egress: cannot install the network filter: {exc}") from exc
        if proc.returncode != 0:
            raise SandboxError(
                "egress: cannot install the network filter: " + proc.stderr.decode(errors="replace")[-500:]
            )

    def close(self) -> None:
        if self._exit_w is not None:
            os.close(self._exit_w)
            self._exit_w = None
        if self.slirp is not None:
            try:
                self.slirp.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.slirp.kill()
                self.slirp.wait()
            self.slirp = None


def read_child_pid(fd: int, timeout_s: float = SETUP_TIMEOUT_S) -> int:
    """bwrap's --info-fd document: {"child-pid": N, ...}."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError):
            pass
        chunk = _read_some(fd, max(0.0, deadline - time.monotonic()))
        if not chunk:
            raise SandboxError(f"egress: bwrap reported no sandbox process ({data[:200]!r})")
        data += chunk


def _read_some(fd: int, timeout_s: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout_s)
    return os.read(fd, 4096) if ready else b""
