"""One writer per run folder: an advisory lock that dies with its process.

``fcntl.flock`` on ``<folder>/.lock``: the kernel releases it when the holding process
ends, however it ends (a SIGKILL leaves no stale lock behind). The file keeps the
holder's pid and host for the message another command prints. The last release removes
the file (while still holding the lock; a process that locked the removed file sees that
its path is gone or is another file, and locks again), so a finished run leaves no
``.lock``; one killed by SIGKILL leaves a stale file that the next command simply takes
over. Within one process a folder may be opened again (the lock is counted, not re-taken),
so a library user can reopen a run it holds. Where fcntl does not exist (Windows) folders
are not locked.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from genlab.core.errors import OutputError, RunInUseError

fcntl: Any
try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None

LOCK_FILE = ".lock"
_held: dict[str, list] = {}  # real path of the folder -> [file descriptor, count, lock path]


def acquire(folder: Path) -> str:
    """Lock ``folder`` for this process (RunInUseError when another live process holds it)."""
    key = os.path.realpath(folder)
    if key in _held:
        _held[key][1] += 1
        return key
    if fcntl is None:  # pragma: no cover
        _held[key] = [None, 1, None]
        return key
    path = Path(folder) / LOCK_FILE
    fd = _lock_file(folder, path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
    except OSError:
        pass  # a full disk must not stop the lock itself: the pid note is informational
    _held[key] = [fd, 1, path]
    return key


def check_free(folder: Path) -> None:
    """RunInUseError when another live process holds ``folder``'s lock; creates nothing.

    For checks that read a folder before opening it as a run (what kind of run it holds):
    a folder being written is named as such first."""
    if fcntl is None or os.path.realpath(folder) in _held:
        return
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return  # no lock file: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        raise RunInUseError(f"{folder} is being written by another command ({holder}); wait "
                            "for it to finish or choose another --out") from None
    finally:
        os.close(fd)  # closing also drops the shared lock taken as a probe


def _lock_file(folder: Path, path: Path) -> int:
    """A descriptor of ``path`` holding its exclusive flock (retried if a releasing process
    removed the file between our open and our lock)."""
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"{folder}: cannot create its lock file ({exc.strerror})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunInUseError(
                f"{folder} is being written by another command ({holder}); wait for it to "
                "finish or choose another --out"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except OSError:
            same = False
        if same:
            return fd
        os.close(fd)  # we locked a file its holder had just removed: lock the new one
    raise OutputError(f"{folder}: its lock file keeps changing; is another command looping?")


def release(key: str) -> None:
    """Undo one :func:`acquire`; the last one unlocks."""
    entry = _held.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] > 0:
        return
    del _held[key]
    if entry[0] is not None:
        try:
            os.unlink(entry[2])  # still locked: no other process holds this file
        except OSError:
            pass  # a read-only or vanished folder keeps its lock file: harmless
        os.close(entry[0])  # closing the descriptor releases the flock


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").split()
    except OSError:
        return "holder unknown"
    if len(text) >= 2:
        return f"process {text[0]} on {text[1]}"
    return "holder unknown"
