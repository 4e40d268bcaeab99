#!/usr/bin/python3
"""What the file system alone costs `crfx tag -O` for many small outputs: creates N files of SIZE
bytes under a fresh directory below DIR, 100 per subdirectory, the way crfx writes them — a
temporary created with O_EXCL, written, closed, renamed into place — either made durable in
groups (one syncfs per 1,000 files, then the renames: crfx's AtomicFileGroup) or one at a time
(fsync the file, rename, fsync the directory: AtomicFile::commit). Prints the seconds of each.
No tagging, no crfx: the floor under `-O`'s time in benchmarks/tag.sh.

    benchmarks/create-files.py [DIR] [N] [SIZE]     (defaults: build/bench-tag, 10060, 1200)
"""
import ctypes
import os
import shutil
import sys
import tempfile
import time

root = sys.argv[1] if len(sys.argv) > 1 else "build/bench-tag"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10060
size = int(sys.argv[3]) if len(sys.argv) > 3 else 1200
libc = ctypes.CDLL(None, use_errno=True)
data = b"x" * size


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create(grouped):
    top = tempfile.mkdtemp(dir=root)
    start = time.monotonic()
    pending, made = [], set()
    for i in range(n):
        sub = os.path.join(top, f"{i // 100:03d}")
        if sub not in made:
            os.makedirs(sub)
            made.add(sub)
        final = os.path.join(sub, f"doc{i:05d}.txt")
        tmp = final + f".tmp.{os.getpid()}.{i:08x}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.write(fd, data)
        if not grouped:
            os.fsync(fd)
        os.close(fd)
        if grouped:
            pending.append((tmp, final))
            if len(pending) == 1000 or i == n - 1:
                dfd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY)
                libc.syncfs(dfd)
                os.close(dfd)
                for t, f in pending:
                    os.rename(t, f)
                for d in {os.path.dirname(f) for _, f in pending}:
                    fsync_dir(d)
                pending = []
        else:
            os.rename(tmp, final)
            fsync_dir(sub)
    seconds = time.monotonic() - start
    return top, seconds


os.makedirs(root, exist_ok=True)
tops = []
for grouped in (True, False):
    top, seconds = create(grouped)
    tops.append(top)
    how = "synced per 1,000 (syncfs)" if grouped else "fsync each"
    print(f"{n} files of {size} bytes, {how}: {seconds:.2f} s ({1e6 * seconds / n:.0f} us a file)")
for top in tops:  # removed only now: ext4 searches past freshly freed inodes when creating more
    shutil.rmtree(top)
