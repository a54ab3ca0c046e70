/* tier: fast */
/*
 * test_errmsg.c — error messages that wrap the previous one, and saves that
 * must not replace what is not a regular file (the audit's defects 4 and 12).
 *
 * hpt_fail(st, "... (%s)", hpt_errmsg()) passes the message buffer as an
 * argument of the format that writes it; it must read as the inner message
 * wrapped, not garbled. hpt_save_atomic over a FIFO must refuse and leave the
 * FIFO a FIFO (as root, a device node would otherwise be swapped for a file),
 * and must not follow a symlink planted at its temporary name.
 */
#include "../src/base/base.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static hpt_status put_x(FILE *f, void *ctx) {
    (void)ctx;
    return fputs("x", f) >= 0 ? HPT_OK : hpt_fail(HPT_ERR_IO, "write failed");
}

int main(void) {
    /* a message wrapping hpt_errmsg() itself */
    hpt_fail(HPT_ERR_IO, "cannot open 'config.json': No such file or directory");
    hpt_status st = hpt_fail(HPT_ERR_ARG, "no --n-head given (%s)", hpt_errmsg());
    CHECK(st == HPT_ERR_ARG, "status %d", st);
    CHECK(!strcmp(hpt_errmsg(), "no --n-head given (cannot open 'config.json': No such file or directory)"),
          "wrapped message garbled: '%s'", hpt_errmsg());
    /* twice over, and with the inner message after other arguments */
    hpt_fail(HPT_ERR_IO, "inner");
    hpt_fail(HPT_ERR_IO, "%s %d %s", "a", 7, hpt_errmsg());
    hpt_fail(HPT_ERR_IO, "[%s]", hpt_errmsg());
    CHECK(!strcmp(hpt_errmsg(), "[a 7 inner]"), "twice wrapped: '%s'", hpt_errmsg());

    /* an atomic save never replaces a FIFO (nor, so, a device node) */
    char dir[] = "/tmp/hpt_test_errmsg.XXXXXX", fifo[64], file[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(fifo, sizeof fifo, "%s/ff", dir);
    snprintf(file, sizeof file, "%s/f", dir);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo");
    st = hpt_save_atomic(fifo, put_x, NULL);
    struct stat sb;
    CHECK(st != HPT_OK && strstr(hpt_errmsg(), "FIFO") && strstr(hpt_errmsg(), "not a regular file"),
          "save over a FIFO: status %d, '%s'", st, hpt_errmsg());
    CHECK(stat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    /* a regular file is still replaced */
    CHECK(hpt_save_atomic(file, put_x, NULL) == HPT_OK && hpt_save_atomic(file, put_x, NULL) == HPT_OK,
          "save over a regular file: %s", hpt_errmsg());
    /* a symlink planted at the save's temporary name (PATH.tmp.<pid>,
     * predictable in a shared /tmp) is not followed: its target keeps its
     * bytes, and PATH becomes a regular file */
    char victim[64], link[96], out[64];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(link, sizeof link, "%s.tmp.%ld", out, (long)getpid());
    FILE *v = fopen(victim, "w");
    CHECK(v && fputs("keep me", v) >= 0 && fclose(v) == 0, "victim");
    CHECK(symlink(victim, link) == 0, "symlink");
    st = hpt_save_atomic(out, put_x, NULL);
    char got[16] = "";
    v = fopen(victim, "r");
    if (v) { if (!fgets(got, sizeof got, v)) got[0] = 0; fclose(v); }
    CHECK(!strcmp(got, "keep me"), "the symlink at the temporary name was followed: the victim holds '%s'", got);
    CHECK(st == HPT_OK && lstat(out, &sb) == 0 && S_ISREG(sb.st_mode), "save past a planted link: %d, %s", st,
          hpt_errmsg());
    unlink(link);
    unlink(out);
    unlink(victim);
    unlink(fifo);
    unlink(file);
    rmdir(dir);
    return TEST_REPORT("test_errmsg");
}
