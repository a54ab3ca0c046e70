/*
 * io.c — checked file I/O: whole-file reads, atomic saves, CRC-32, and the
 * little-endian writer/reader used by every file format of hpt.
 */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "hpt writes floats as raw little-endian bytes");

/* --------------------------------------------------------------- CRC-32 */

/* zlib's crc32 (the PNG polynomial), so `hpt_crc32` of a file matches `crc32`
 * tools and Python's zlib.crc32, and every CRC stored in an hpt file keeps
 * its value. crc32_z takes a size_t length, so the 500 MB arena of GPT-2
 * 124M is one call. */
uint32_t hpt_crc32(uint32_t crc, const void *buf, size_t n) {
    return (uint32_t)crc32_z(crc, buf, n);
}

/* --------------------------------------------------------------- reading */

const char *hpt_file_kind(unsigned mode) {
    return S_ISREG(mode) ? "regular file" : S_ISFIFO(mode) ? "FIFO" : S_ISDIR(mode) ? "directory" :
           S_ISCHR(mode) || S_ISBLK(mode) ? "device" : S_ISSOCK(mode) ? "socket" : "special file";
}

/* Opens PATH for reading, refusing anything but a regular file before a
 * read can block: open(2) of a FIFO waits for a writer unless O_NONBLOCK
 * (which returns at once), and a FIFO, device or directory has no length to
 * read. Blocking mode is restored for the reads that follow. */
hpt_status hpt_open_regular(const char *path, int *fd_out, size_t *size) {
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return hpt_fail(HPT_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return hpt_fail(HPT_ERR_IO, "'%s' is not a regular file (it is a %s): hpt reads only regular files", path,
                        hpt_file_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (size_t)sb.st_size;
    *fd_out = fd;
    return HPT_OK;
}

hpt_status hpt_read_file(const char *path, unsigned char **out, size_t *len) {
    *out = NULL; *len = 0;
    int fd;
    size_t n;
    HPT_TRY(hpt_open_regular(path, &fd, &n));
    FILE *f = fdopen(fd, "rb");
    if (!f) { int e = errno; close(fd); return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", path, strerror(e)); }
    unsigned char *buf = malloc(n + 1);
    if (!buf) { fclose(f); return hpt_fail(HPT_ERR_NOMEM, "cannot allocate %zu bytes for '%s'", n, path); }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != n || err) {
        free(buf);
        return hpt_fail(HPT_ERR_IO, "short read on '%s' (%zu of %zu bytes)%s%s", path, got, n,
                        err ? ": " : "", err ? strerror(err) : "");
    }
    buf[n] = 0;
    *out = buf; *len = n;
    return HPT_OK;
}

int hpt_cur_bytes(hpt_cursor *c, void *dst, size_t n) {
    if (c->n - c->pos < n) return 0;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return 1;
}
int hpt_cur_u32(hpt_cursor *c, uint32_t *v) { return hpt_cur_bytes(c, v, 4); }
int hpt_cur_u64(hpt_cursor *c, uint64_t *v) { return hpt_cur_bytes(c, v, 8); }

/* --------------------------------------------------------------- writing */

void hpt_w_bytes(hpt_writer *w, const void *p, size_t n) {
    if (w->err || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) { w->err = errno ? errno : EIO; return; }
    w->crc = hpt_crc32(w->crc, p, n);
}
void hpt_w_u32(hpt_writer *w, uint32_t v) { hpt_w_bytes(w, &v, 4); }
void hpt_w_u64(hpt_writer *w, uint64_t v) { hpt_w_bytes(w, &v, 8); }

hpt_status hpt_mkdir_p(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return hpt_fail(HPT_ERR_ARG, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return hpt_fail(HPT_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
            *p = c;
            if (c == 0) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return hpt_fail(HPT_ERR_IO, "'%s' is not a directory", path);
    return HPT_OK;
}

static void fsync_dir_of(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) { fsync(fd); close(fd); }
}

void hpt_abs_path(char *dst, size_t n, const char *path) {
    char *abs = *path ? realpath(path, NULL) : NULL;
    snprintf(dst, n, "%s", abs && strlen(abs) < n ? abs : path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!abs && strpbrk(base, "*?[")) {
        /* a glob of token shards (--data 'DIR/x_train_*.bin') names no file:
         * its directory is made absolute, the pattern kept */
        char d[4096];
        snprintf(d, sizeof d, "%.*s", base == path ? 1 : (int)(base - path), base == path ? "." : path);
        abs = realpath(d, NULL);
        if (abs && strlen(abs) + strlen(base) + 2 <= n) snprintf(dst, n, "%s/%s", abs, base);
    }
    free(abs);
}

/* Every message of a failed save names the file being saved (PATH, not
 * only its temporary twin): "No space left on device" alone does not say
 * which of a run's files was lost. */
hpt_status hpt_save_atomic(const char *path, hpt_write_fn fn, void *ctx) {
    /* The rename below replaces whatever PATH names: only a regular file may
     * be replaced (a device node, FIFO or socket would be swapped for a file:
     * as root, an --out of /dev/null would replace the system's /dev/null).
     * stat follows a symlink, so one to a device is refused too. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return hpt_fail(HPT_ERR_IO, "cannot save '%s': it is a %s, not a regular file: hpt replaces only "
                        "regular files", path, hpt_file_kind(sb.st_mode));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    /* Created, never opened as found: fopen("wb") follows a symlink planted
     * at the predictable PATH.tmp.<pid> (in /tmp, by another user) and
     * truncates its target, as root any file. A leftover of a crashed
     * process with this pid is unlinked (the name itself, a link or not)
     * and the create tried once more. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) { close(fd); unlink(tmp); }
        return hpt_fail(HPT_ERR_IO, "cannot save '%s': cannot create '%s': %s", path, tmp, strerror(e));
    }
    hpt_status st = fn(f, ctx);
    if (st != HPT_OK && !strstr(hpt_errmsg(), path)) {
        char why[768];
        snprintf(why, sizeof why, "%s", hpt_errmsg());
        st = hpt_fail(st, "cannot save '%s': %s", path, why);
    }
    if (st == HPT_OK && fflush(f) != 0)
        st = hpt_fail(HPT_ERR_IO, "cannot save '%s': writing '%s': %s", path, tmp, strerror(errno));
    if (st == HPT_OK && fsync(fileno(f)) != 0)
        st = hpt_fail(HPT_ERR_IO, "cannot save '%s': fsync of '%s': %s", path, tmp, strerror(errno));
    if (fclose(f) != 0 && st == HPT_OK)
        st = hpt_fail(HPT_ERR_IO, "cannot save '%s': closing '%s': %s", path, tmp, strerror(errno));
    if (st == HPT_OK && rename(tmp, path) != 0)
        st = hpt_fail(HPT_ERR_IO, "cannot save '%s': renaming '%s' over it: %s", path, tmp, strerror(errno));
    if (st != HPT_OK) { unlink(tmp); return st; }
    fsync_dir_of(path);  /* make the rename itself durable */
    return HPT_OK;
}

static hpt_status in_use(const char *dir, int fd) {
    char pid[32] = {0};
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    if (n > 0 && pid[n - 1] == '\n') pid[n - 1] = 0;
    return hpt_fail(HPT_ERR_IO, "run directory '%s' is in use by another hpt (pid %s): wait for it to "
                    "finish, stop it, or choose another --out", dir, n > 0 ? pid : "unknown");
}

hpt_status hpt_dir_lock(const char *dir, int *fd_out) {
    *fd_out = -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/.hpt.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        hpt_status st = in_use(dir, fd);
        close(fd);
        return st;
    }
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        close(fd);
        return hpt_fail(HPT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    *fd_out = fd;
    return HPT_OK;
}

hpt_status hpt_dir_lock_probe(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.hpt.lock", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HPT_OK;  /* never locked */
    hpt_status st = flock(fd, LOCK_EX | LOCK_NB) != 0 ? in_use(dir, fd) : HPT_OK;
    close(fd);  /* releases the probe's lock, if it got one */
    return st;
}

void hpt_dir_unlock(int fd) {
    if (fd >= 0) close(fd);  /* closing the descriptor releases the flock */
}

void hpt_dir_unlock_discard(const char *dir, int fd) {
    if (fd < 0) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/.hpt.lock", dir);
    unlink(path);  /* while still held: no other hpt can be between its open and its flock of it */
    close(fd);
}
