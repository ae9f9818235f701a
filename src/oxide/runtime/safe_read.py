"""Reading a file that someone else may have put in our place: never block, never follow.

The disk cache and bundles read files whose names oxide chose but whose contents
anyone with write access may have replaced: with a FIFO (a plain `open` blocks until
a writer appears, i.e. forever), a symlink to `/dev/zero` (an endless read, then
`MemoryError`), or a huge file. `read_regular_file` opens without following a final
symlink and without blocking, checks on the open descriptor that it is a regular file
of bounded size, and only then reads it. Every refusal is an `OSError`, which callers
already treat as "this file is unusable".
"""

from __future__ import annotations

import errno
import os
import stat

_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
          | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of `path`, if it is a regular file (not a symlink) of at most `limit` bytes.

    Raises OSError otherwise: ELOOP for a symlink (O_NOFOLLOW), EINVAL for a FIFO, device
    or directory, EFBIG for a file over `limit` (also one that grows past it while read).
    """
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", os.fspath(path))
        data = bytearray()
        while True:  # read to EOF: usually one read of st_size bytes, then an empty one
            chunk = os.read(fd, min(limit + 1 - len(data), max(st.st_size + 1, 1 << 16)))
            if not chunk:
                break
            data += chunk
            if len(data) > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", os.fspath(path))
        return bytes(data)
    finally:
        os.close(fd)
