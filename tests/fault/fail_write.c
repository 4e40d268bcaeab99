/* fail_write: an LD_PRELOAD shim for the tests (never installed, never linked into crfx) that
 * makes writes to chosen files fail as on a full disk, so that crfx's writers can be tested
 * without a full file system (CI cannot mount a small tmpfs).
 *
 * Which files: those whose path (readlink of /proc/self/fd/N) contains the substring
 * CRFX_FAIL_WRITE_PATTERN (unset or empty: the shim does nothing). A temporary
 * "out.model.tmp.PID.XXXXXXXX" contains "out.model", so a writer's temporary is caught too.
 *
 * What fails (environment):
 *   CRFX_FAIL_WRITE_AFTER=N   write, writev, pwrite, pwritev to matching files succeed for the
 *                             first N bytes in all (summed over the process and every matching
 *                             file; default 0); the write that crosses N is cut short at N (a
 *                             partial write, as a filling disk gives) and every later one fails.
 *   CRFX_FAIL_FSYNC=1         fsync, fdatasync and syncfs of a matching descriptor fail (the
 *                             writes themselves succeed unless CRFX_FAIL_WRITE_AFTER is set).
 *   CRFX_FAIL_CLOSE=1         close of a matching descriptor closes it and then reports failure
 *                             (as NFS reports a deferred write error).
 *   CRFX_FAIL_WRITE_ERRNO     the error: ENOSPC (default), EDQUOT, EIO or EFBIG.
 * With only CRFX_FAIL_FSYNC or CRFX_FAIL_CLOSE set, writes are not limited.
 *
 * The calls go straight to the kernel (syscall(2)), so no dlsym is needed. Only calls that go
 * through the dynamic symbols are caught: crfx writes its files with write(2) (AtomicFile);
 * stdio's own internal writes (std::cout, fwrite to stdout) are not — /dev/full is the test for
 * those. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static const char* g_pattern = NULL; /* NULL: inactive */
static int g_limit_writes = 0;
static long long g_after = 0;     /* bytes allowed to matching files */
static long long g_written = 0;   /* bytes written to them so far (atomic) */
static int g_fail_fsync = 0, g_fail_close = 0;
static int g_errno = ENOSPC;

__attribute__((constructor)) static void fail_write_init(void) {
  const char* p = getenv("CRFX_FAIL_WRITE_PATTERN");
  if (!p || !*p) return;
  g_pattern = p;
  const char* after = getenv("CRFX_FAIL_WRITE_AFTER");
  const char* fsync_ = getenv("CRFX_FAIL_FSYNC");
  const char* close_ = getenv("CRFX_FAIL_CLOSE");
  g_fail_fsync = fsync_ && strcmp(fsync_, "1") == 0;
  g_fail_close = close_ && strcmp(close_, "1") == 0;
  g_limit_writes = (after && *after) || (!g_fail_fsync && !g_fail_close);
  g_after = after && *after ? atoll(after) : 0;
  const char* e = getenv("CRFX_FAIL_WRITE_ERRNO");
  if (e && strcmp(e, "EDQUOT") == 0) g_errno = EDQUOT;
  else if (e && strcmp(e, "EIO") == 0) g_errno = EIO;
  else if (e && strcmp(e, "EFBIG") == 0) g_errno = EFBIG;
}

/* Whether `fd` is open on a file whose path contains the pattern. */
static int matches(int fd) {
  if (!g_pattern || fd < 0) return 0;
  char link[64], path[PATH_MAX + 1];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const int saved = errno;
  const ssize_t n = readlink(link, path, PATH_MAX);
  errno = saved;
  if (n <= 0) return 0;
  path[n] = '\0';
  return strstr(path, g_pattern) != NULL;
}

/* How many of `n` bytes a write to `fd` may write: n when unlimited, else what is left of the
 * budget (taken from it). -1 with errno set when nothing is left. */
static long long allowance(int fd, size_t n) {
  if (!g_limit_writes || n == 0 || !matches(fd)) return (long long)n;
  long long used = __atomic_load_n(&g_written, __ATOMIC_SEQ_CST);
  for (;;) {
    const long long left = g_after - used;
    if (left <= 0) {
      errno = g_errno;
      return -1;
    }
    const long long take = (long long)n < left ? (long long)n : left;
    if (__atomic_compare_exchange_n(&g_written, &used, used + take, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return take;
  }
}

ssize_t write(int fd, const void* buf, size_t n) {
  const long long take = allowance(fd, n);
  if (take < 0) return -1;
  return syscall(SYS_write, fd, buf, (size_t)take);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) {
  const long long take = allowance(fd, n);
  if (take < 0) return -1;
  return syscall(SYS_pwrite64, fd, buf, (size_t)take, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t offset) { return pwrite(fd, buf, n, offset); }

/* The vector cut to `take` bytes (at most 64 pieces: more are written by later calls). */
static int cut(const struct iovec* iov, int count, long long take, struct iovec* out) {
  int k = 0;
  for (int i = 0; i < count && k < 64 && take > 0; ++i) {
    out[k] = iov[i];
    if ((long long)out[k].iov_len > take) out[k].iov_len = (size_t)take;
    take -= (long long)out[k].iov_len;
    ++k;
  }
  return k;
}

static size_t total(const struct iovec* iov, int count) {
  size_t n = 0;
  for (int i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  const size_t n = count > 0 ? total(iov, count) : 0;
  const long long take = allowance(fd, n);
  if (take < 0) return -1;
  if ((size_t)take == n) return syscall(SYS_writev, fd, iov, count);
  struct iovec part[64];
  return syscall(SYS_writev, fd, part, cut(iov, count, take, part));
}

ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  const size_t n = count > 0 ? total(iov, count) : 0;
  const long long take = allowance(fd, n);
  if (take < 0) return -1;
  struct iovec part[64];
  const int k = (size_t)take == n ? -1 : cut(iov, count, take, part);
  /* pwritev's offset is passed as two longs (low, high) on every Linux ABI. */
  const unsigned long long off = (unsigned long long)offset;
  return syscall(SYS_pwritev, fd, k < 0 ? iov : part, k < 0 ? count : k, (unsigned long)off,
                 (unsigned long)(off >> 32 >> 32));
}

static int fail_sync(int fd) {
  if (g_fail_fsync && matches(fd)) {
    errno = g_errno;
    return 1;
  }
  return 0;
}

int fsync(int fd) { return fail_sync(fd) ? -1 : (int)syscall(SYS_fsync, fd); }
int fdatasync(int fd) { return fail_sync(fd) ? -1 : (int)syscall(SYS_fdatasync, fd); }
int syncfs(int fd) { return fail_sync(fd) ? -1 : (int)syscall(SYS_syncfs, fd); }

int close(int fd) {
  const int fail = g_fail_close && matches(fd);
  const int rc = (int)syscall(SYS_close, fd);
  if (rc == 0 && fail) {
    errno = g_errno;
    return -1;
  }
  return rc;
}
