"""The seccomp filter bubblewrap installs before it runs a sandboxed command.

Close to Docker's default profile, written as a deny list: the syscalls that
profile refuses to an unprivileged container (kernel modules, mounts, new
namespaces, keyrings, bpf, perf, io_uring, clock and swap control, reboot,
handle-based opens that bypass path checks, NUMA policy, ...) fail with EPERM;
`clone` with any namespace flag fails with EPERM; `clone3` reports ENOSYS
(its flags live in memory a filter cannot read; libc then falls back to
`clone`); `personality` accepts only the values Docker allows; `socket` refuses
AF_VSOCK. Syscalls of another ABI than the worker's (x32, or i386 through
`int 0x80`) kill the process: a filter written for one syscall table must not
be bypassed by another.

The program is classic BPF (struct sock_filter) assembled here, so it needs no
library: `bpf_program()` returns the bytes that `bwrap --seccomp FD` reads.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR, _ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index  # little-endian: the low 32 bits come first


_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

_CLONE_NAMESPACES = (
    0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000
)  # NEWNS UTS IPC USER PID NET CGROUP
_PERSONALITY_ALLOWED = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
_AF_VSOCK = 40

DENIED = (
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "fanotify_init",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "get_mempolicy",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mbind",
    "memfd_secret",
    "mount",
    "mount_setattr",
    "move_mount",
    "move_pages",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pidfd_getfd",
    "pivot_root",
    "query_module",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "set_mempolicy",
    "set_mempolicy_home_node",
    "setdomainname",
    "sethostname",
    "setns",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "sysfs",
    "_sysctl",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
    "vhangup",
)

# Syscall numbers per ABI (from the kernel's unistd headers); names an ABI
# lacks are simply absent.
_TABLES = {
    "x86_64": (
        0xC000003E,
        0x40000000,
        {
            "acct": 163,
            "add_key": 248,
            "bpf": 321,
            "clock_adjtime": 305,
            "clock_settime": 227,
            "create_module": 174,
            "delete_module": 176,
            "fanotify_init": 300,
            "finit_module": 313,
            "fsconfig": 431,
            "fsmount": 432,
            "fsopen": 430,
            "fspick": 433,
            "get_kernel_syms": 177,
            "get_mempolicy": 239,
            "init_module": 175,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "io_uring_setup": 425,
            "ioperm": 173,
            "iopl": 172,
            "kcmp": 312,
            "kexec_file_load": 320,
            "kexec_load": 246,
            "keyctl": 250,
            "lookup_dcookie": 212,
            "mbind": 237,
            "memfd_secret": 447,
            "mount": 165,
            "mount_setattr": 442,
            "move_mount": 429,
            "move_pages": 279,
            "name_to_handle_at": 303,
            "nfsservctl": 180,
            "open_by_handle_at": 304,
            "open_tree": 428,
            "perf_event_open": 298,
            "pidfd_getfd": 438,
            "pivot_root": 155,
            "query_module": 178,
            "quotactl": 179,
            "quotactl_fd": 443,
            "reboot": 169,
            "request_key": 249,
            "set_mempolicy": 238,
            "set_mempolicy_home_node": 450,
            "setdomainname": 171,
            "sethostname": 170,
            "setns": 308,
            "settimeofday": 164,
            "swapoff": 168,
            "swapon": 167,
            "syslog": 103,
            "sysfs": 139,
            "_sysctl": 156,
            "umount2": 166,
            "unshare": 272,
            "uselib": 134,
            "userfaultfd": 323,
            "ustat": 136,
            "vhangup": 153,
            "clone": 56,
            "clone3": 435,
            "personality": 135,
            "socket": 41,
        },
    ),
    "aarch64": (
        0xC00000B7,
        None,
        {
            "acct": 89,
            "add_key": 217,
            "bpf": 280,
            "clock_adjtime": 266,
            "clock_settime": 112,
            "delete_module": 106,
            "fanotify_init": 262,
            "finit_module": 273,
            "fsconfig": 431,
            "fsmount": 432,
            "fsopen": 430,
            "fspick": 433,
            "get_mempolicy": 236,
            "init_module": 105,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "io_uring_setup": 425,
            "kcmp": 272,
            "kexec_file_load": 294,
            "kexec_load": 104,
            "keyctl": 219,
            "lookup_dcookie": 18,
            "mbind": 235,
            "memfd_secret": 447,
            "mount": 40,
            "mount_setattr": 442,
            "move_mount": 429,
            "move_pages": 239,
            "name_to_handle_at": 264,
            "nfsservctl": 42,
            "open_by_handle_at": 265,
            "open_tree": 428,
            "perf_event_open": 241,
            "pidfd_getfd": 438,
            "pivot_root": 41,
            "quotactl": 60,
            "quotactl_fd": 443,
            "reboot": 142,
            "request_key": 218,
            "set_mempolicy": 237,
            "set_mempolicy_home_node": 450,
            "setdomainname": 162,
            "sethostname": 161,
            "setns": 268,
            "settimeofday": 170,
            "swapoff": 225,
            "swapon": 224,
            "syslog": 116,
            "umount2": 39,
            "unshare": 97,
            "userfaultfd": 282,
            "vhangup": 58,
            "clone": 220,
            "clone3": 435,
            "personality": 92,
            "socket": 198,
        },
    ),
}


class UnsupportedArch(Exception):
    pass


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def bpf_program(machine: str | None = None) -> bytes:
    """The filter for this machine's ABI, as `bwrap --seccomp` expects it.
    Raises UnsupportedArch on an architecture without a syscall table here."""
    machine = machine or platform.machine()
    if machine not in _TABLES:
        raise UnsupportedArch(f"no seccomp syscall table for {machine!r}")
    arch, x32_bit, table = _TABLES[machine]
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _ins(_BPF_LD_W_ABS, _ARCH),
        _ins(_BPF_JEQ_K, arch, jt=1),
        _ins(_BPF_RET_K, _RET_KILL_PROCESS),
        _ins(_BPF_LD_W_ABS, _NR),
    ]
    if x32_bit is not None:
        prog += [_ins(_BPF_JGE_K, x32_bit, jf=1), _ins(_BPF_RET_K, _RET_KILL_PROCESS)]
    for name in DENIED:
        if name in table:
            prog += [_ins(_BPF_JEQ_K, table[name], jf=1), _ins(_BPF_RET_K, eperm)]
    prog += [_ins(_BPF_JEQ_K, table["clone3"], jf=1), _ins(_BPF_RET_K, _RET_ERRNO | errno.ENOSYS)]
    # clone: arg0 is the flags on both ABIs here.
    prog += [
        _ins(_BPF_JEQ_K, table["clone"], jf=4),
        _ins(_BPF_LD_W_ABS, _arg_low(0)),
        _ins(_BPF_JSET_K, _CLONE_NAMESPACES, jf=1),
        _ins(_BPF_RET_K, eperm),
        _ins(_BPF_RET_K, _RET_ALLOW),
    ]
    # personality: only the values Docker's profile allows.
    checks = len(_PERSONALITY_ALLOWED)
    prog += [_ins(_BPF_JEQ_K, table["personality"], jf=2 + checks + 1)]
    prog += [_ins(_BPF_LD_W_ABS, _arg_low(0))]
    for i, value in enumerate(_PERSONALITY_ALLOWED):
        prog += [_ins(_BPF_JEQ_K, value, jt=checks - i)]
    prog += [_ins(_BPF_RET_K, eperm), _ins(_BPF_RET_K, _RET_ALLOW)]
    # socket: no AF_VSOCK (a path to the hypervisor).
    prog += [
        _ins(_BPF_JEQ_K, table["socket"], jf=4),
        _ins(_BPF_LD_W_ABS, _arg_low(0)),
        _ins(_BPF_JEQ_K, _AF_VSOCK, jf=1),
        _ins(_BPF_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT),
        _ins(_BPF_RET_K, _RET_ALLOW),
    ]
    prog += [_ins(_BPF_RET_K, _RET_ALLOW)]
    return b"".join(prog)
