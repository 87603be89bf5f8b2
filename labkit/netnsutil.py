"""Network namespaces without a process per call: unshare/setns/mount through libc.

`ip netns add` forks `ip`; pyroute2's netns.create forks too (~8 ms each). Here the calling
thread unshares, bind-mounts its new namespace at /run/netns/NAME and returns with setns, so
creating a lab's namespaces costs a few hundred microseconds each.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from pathlib import Path

NETNS_RUN_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_SHARED = 1 << 20
MNT_DETACH = 0x2
EINVAL = 22

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def path(name: str) -> Path:
    return NETNS_RUN_DIR / name


def exists(name: str) -> bool:
    return path(name).exists()


def setns_fd(fd: int, what: str = "namespace") -> None:
    """Move this thread into the network namespace open as FD: OSError if it cannot."""
    _check(_libc.setns(fd, CLONE_NEWNET), f"setns into {what}")


def enter_parent_namespace() -> bool:
    """Move this process into the network namespace of the process that started it (a lab-wide daemon
    the supervisor started in a node's namespace). Call before any thread exists: threads inherit
    the namespace. False only when the namespace could not be entered."""
    parent = f"/proc/{os.getppid()}/ns/net"
    try:
        if os.stat(parent).st_ino == os.stat("/proc/self/ns/net").st_ino:
            return True
        fd = os.open(parent, os.O_RDONLY)
    except OSError:
        return True  # no parent namespace to go to: stay
    try:
        setns_fd(fd, parent)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def attach_current(name: str) -> None:
    """Register this process's network namespace as /run/netns/NAME (as `ip netns attach`); a name
    already registered is left alone."""
    NETNS_RUN_DIR.mkdir(parents=True, exist_ok=True)
    target = path(name)
    if target.exists():
        return
    target.touch()
    try:
        _check(_libc.mount(f"/proc/{os.getpid()}/ns/net".encode(), str(target).encode(), b"none", MS_BIND, None),
               f"bind-mount namespace {name}")
    except OSError:
        target.unlink(missing_ok=True)
        raise


def enter(name: str) -> None:
    """Move this thread into namespace NAME for good (a child before its exec, or a thread that ends once
    its sockets are open there): OSError if it cannot."""
    fd = os.open(path(name), os.O_RDONLY)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns into {name}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body with this thread inside namespace NAME (sockets opened here stay bound to it)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(path(name), os.O_RDONLY)
    try:
        _check(_libc.setns(target, CLONE_NEWNET), f"setns into {name}")
        yield
    finally:
        try:
            _return_home(home)
        finally:
            os.close(home)
            os.close(target)


def _return_home(home: int) -> None:
    """setns back into HOME even when a signal handler raises while this runs (`lab up` turns Ctrl-C
    into KeyboardInterrupt wherever the main thread is): a thread left in a lab's namespace would go
    on, and clean up, in the wrong place. setns into the namespace one is in is harmless, so it is
    tried again until it has been done; the first interrupt is raised then."""
    interrupted: KeyboardInterrupt | None = None
    while True:
        try:
            _check(_libc.setns(home, CLONE_NEWNET), "setns back to the original namespace")
            break
        except KeyboardInterrupt as exc:
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def _share_run_dir() -> None:
    """Make /run/netns a shared mount of itself first, as `ip netns add` does.

    Otherwise the first `ip netns add` of anyone else binds /run/netns over itself and hides every
    namespace mounted below it before: they can then be neither seen nor unmounted by their path."""
    run_dir = str(NETNS_RUN_DIR).encode()
    if _libc.mount(b"", run_dir, b"none", MS_SHARED | MS_REC, None) == 0:
        return
    if ctypes.get_errno() != EINVAL:  # EINVAL: not a mount point yet
        _check(-1, "make /run/netns a shared mount")
    _check(_libc.mount(run_dir, run_dir, b"none", MS_BIND | MS_REC, None), "bind-mount /run/netns onto itself")
    _check(_libc.mount(b"", run_dir, b"none", MS_SHARED | MS_REC, None), "make /run/netns a shared mount")


def create(name: str) -> None:
    """Create /run/netns/NAME like `ip netns add`, failing if it already exists."""
    NETNS_RUN_DIR.mkdir(parents=True, exist_ok=True)
    _share_run_dir()
    target = path(name)
    fd = os.open(target, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o444)
    os.close(fd)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:  # back home whatever happens after the unshare (an interrupt included)
            _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
            _check(_libc.mount(b"/proc/thread-self/ns/net", str(target).encode(), b"none", MS_BIND, None),
                   f"bind-mount namespace {name}")
        finally:
            _return_home(home)
    except OSError:
        target.unlink(missing_ok=True)
        raise
    finally:
        os.close(home)


def delete(name: str) -> bool:
    """Unmount and remove /run/netns/NAME; True if it existed. Devices die with the last user."""
    target = path(name)
    if not target.exists():
        return False
    if _libc.umount2(str(target).encode(), MNT_DETACH) != 0 and ctypes.get_errno() != EINVAL:
        _check(-1, f"unmount namespace {name}")  # EINVAL: nothing mounted there (a half-made namespace)
    target.unlink(missing_ok=True)
    return True


def inode(name: str) -> int:
    return os.stat(path(name)).st_ino


def pids_in(inodes: set[int]) -> list[int]:
    """Processes whose network namespace is one of these (a lab owns what runs in its namespaces)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}/ns/net").st_ino in inodes:
                found.append(int(entry.name))
        except OSError:
            continue
    return sorted(found)
