"""The system-call filter an episode's process puts on itself before the model's first step.

What it closes, and why each matters even with no capabilities:
- new processes (fork, vfork, clone without CLONE_THREAD): the process is killed (SIGSYS),
  which ends the episode with ``process_limit``; threads stay allowed, bounded by
  RLIMIT_NPROC and the address-space limit. clone3 answers ENOSYS, so the C library falls
  back to clone, whose flags a filter can read.
- reaching another process: signals and tracing (kill, tgkill, ptrace, process_vm_*,
  pidfd_*, migrate_pages, move_pages, process_madvise), a file's owner for SIGIO/SIGURG
  (fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG; ioctl FIOSETOWN, SIOCSPGRP: a write would signal
  the supervisor), and another process's limits, priority, scheduling, CPUs and I/O
  priority (prlimit64, setpriority, sched_set*, ioprio_set: only the episode's own process,
  as pid 0 or its pid). The supervisor that hands the episode's state to the evaluator,
  and forks the next episode, lives beside it and keeps what was set on it.
- namespaces and mounts (unshare, setns, mount and the new mount API), kernel keyrings
  (the user's keyring outlives the sandbox: a channel between episodes), SysV and POSIX
  message IPC, io_uring, userfaultfd, bpf, perf_event_open: nothing AppWorld's code needs,
  each a way around the other bounds or a large kernel surface.
- memory outside the address-space limit: memfd_create and memfd_secret (a memfd's pages,
  written with write(), count against no limit), and a pipe's buffer made larger (fcntl
  F_SETPIPE_SZ: 1 MB a pipe, beside the 64 KB it has).
- what the kernel counts per user, which the user running reme needs too (reme not root,
  the sandbox's processes are that user's): inotify instances (inotify_init, inotify_init1:
  128 a user by default) and fanotify groups (fanotify_init). Keyrings, message queues and
  namespaces are refused above; signals queued are the process's RLIMIT_SIGPENDING.
- sockets of families other than Unix, IPv4 and IPv6 (AF_VSOCK, AF_NETLINK, AF_PACKET, ...):
  EAFNOSUPPORT.
A process that runs for another architecture's system-call table is killed.

The filter is classic BPF over ``struct seccomp_data`` (nr at 0, arch at 4, args at 16,
eight bytes each, little-endian on both machines), built here for x86-64 and aarch64 from
the kernel's tables (``asm/unistd_64.h``, ``asm-generic/unistd.h``); elsewhere
``filter_for`` raises and the worker refuses to run. It names the episode's own pid, so the
process builds it for itself (``install``).
"""

import ctypes
import errno
import os
import platform
import struct

# BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_K | op
_RET = 0x06
KILL_PROCESS, ALLOW = 0x80000000, 0x7FFF0000


def _errno(code):
    return 0x00050000 | code


CLONE_THREAD = 0x00010000
X32_BIT = 0x40000000
F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETPIPE_SZ = 8, 10, 15, 1031
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6

# name -> (x86-64, aarch64)
_NUMBERS = {
    "fork": (57, None), "vfork": (58, None), "clone": (56, 220), "clone3": (435, 435),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240), "pidfd_open": (434, 434), "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438), "migrate_pages": (256, 238), "move_pages": (279, 239),
    "process_madvise": (440, 440), "process_mrelease": (448, 448),
    "shmget": (29, 194), "semget": (64, 190), "msgget": (68, 186), "mq_open": (240, 180),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "userfaultfd": (323, 282), "bpf": (321, 280), "perf_event_open": (298, 241),
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    "inotify_init": (253, None), "inotify_init1": (294, 26), "fanotify_init": (300, 262),
}
# Allowed on the episode's own process only: the target pid is their first argument.
_OWN_PID = {"prlimit64": (302, 261), "sched_setaffinity": (203, 122), "sched_setparam": (142, 118),
            "sched_setscheduler": (144, 119), "sched_setattr": (314, 274)}
# Allowed only as (which, who) on the episode's own process.
_OWN_WHO = {"setpriority": ((141, 140), PRIO_PROCESS), "ioprio_set": ((251, 30), IOPRIO_WHO_PROCESS)}
# Allowed but for the commands that set a file's owner (the second argument).
_NOT_COMMANDS = {"fcntl": ((72, 25), (F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETPIPE_SZ)),
                 "ioctl": ((16, 29), (FIOSETOWN, SIOCSPGRP))}
_SOCKETS = {"socket": (41, 198), "socketpair": (53, 199)}
_KILLED = ("fork", "vfork")
_DENIED = tuple(n for n in _NUMBERS if n not in (*_KILLED, "clone", "clone3"))
_ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}


def _insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def _ret(value):
    return _insn(_RET, 0, 0, value)


def _arg(i):
    return _insn(_LD_ABS, 0, 0, 16 + 8 * i)  # the low 32 bits: every argument checked here is an int


def _one_of(values, then, otherwise):
    """With the accumulator loaded: return ``then`` if it is one of ``values``, else ``otherwise``."""
    n = len(values)
    return [_insn(_JEQ, n - i, 0, v) for i, v in enumerate(values)] + [_ret(otherwise), _ret(then)]


def _on(nr, body):
    """``body`` (which always returns) for system call ``nr``; past it otherwise."""
    return [_insn(_JEQ, 0, len(body), nr), *body]


def filter_for(machine=None, pid=None):
    """The filter program (bytes of ``struct sock_filter``) for ``machine``
    (``platform.machine()`` by default) and the process ``pid`` (this one by default)."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no system-call filter for {machine}")
    column, arch = _ARCHES[machine]
    own = (0, pid or os.getpid())
    eperm = _errno(errno.EPERM)

    def nr(name):
        return _NUMBERS[name][column]

    prog = [_insn(_LD_ABS, 0, 0, 4), _insn(_JEQ, 1, 0, arch), _ret(KILL_PROCESS), _insn(_LD_ABS, 0, 0, 0)]
    if machine == "x86_64":  # the x32 ABI's numbers: another table
        prog += [_insn(_JGE, 0, 1, X32_BIT), _ret(KILL_PROCESS)]
    for name in _KILLED:
        if nr(name) is not None:
            prog += [_insn(_JEQ, 0, 1, nr(name)), _ret(KILL_PROCESS)]
    prog += [_insn(_JEQ, 0, 1, nr("clone3")), _ret(_errno(errno.ENOSYS))]
    for name in _DENIED:
        if nr(name) is not None:
            prog += [_insn(_JEQ, 0, 1, nr(name)), _ret(eperm)]
    # Each block below loads an argument, so it returns whatever it finds.
    for numbers in _OWN_PID.values():
        prog += _on(numbers[column], [_arg(0), *_one_of(own, ALLOW, eperm)])
    for numbers, which in _OWN_WHO.values():
        prog += _on(numbers[column], [_arg(0), _insn(_JEQ, 0, 1 + len(own), which), _arg(1),
                                      *_one_of(own, ALLOW, eperm)])
    for numbers, commands in _NOT_COMMANDS.values():
        prog += _on(numbers[column], [_arg(1), *_one_of(commands, eperm, ALLOW)])
    for numbers in _SOCKETS.values():
        prog += _on(numbers[column], [_arg(0), *_one_of(FAMILIES, ALLOW, _errno(errno.EAFNOSUPPORT))])
    # clone: a thread (CLONE_THREAD in its flags, args[0]) is allowed, a process is not.
    prog += _on(nr("clone"), [_arg(0), _insn(_JSET, 1, 0, CLONE_THREAD), _ret(KILL_PROCESS), _ret(ALLOW)])
    prog.append(_ret(ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program=None):
    """Put the filter (for this process's pid) on this single-threaded process, for good:
    no_new_privs first, as an unprivileged process must."""
    program = program or filter_for()
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
