/*
 * base.h — everything below the ML code: errors, always-on asserts, the
 * arena carver, a savable RNG, checked file I/O with atomic saves, and clocks.
 * Knows nothing about models. Every other layer includes it.
 */
#ifndef HPT_BASE_H
#define HPT_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hpt.h"

/* --------------------------------------------------------------- errors */

/* Records a printf-style message for hpt_errmsg() and returns st, so that
 * library code can write `return hpt_fail(HPT_ERR_IO, "...: %s", path);`. */
hpt_status hpt_fail(hpt_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Programmer errors only (never user input or file contents): stays on in
 * release builds, as redis' serverAssert and GGML_ASSERT do. */
#define HPT_ASSERT(x) \
    do { if (!(x)) hpt_assert_fail_(#x, __FILE__, __LINE__); } while (0)
void hpt_assert_fail_(const char *expr, const char *file, int line)
    __attribute__((noreturn));

#define HPT_TRY(expr) \
    do { hpt_status st_ = (expr); if (st_ != HPT_OK) return st_; } while (0)

/* --------------------------------------------------------------- arenas */

/* One allocation carved into n slices by a size table (llm.c's
 * malloc_and_point_parameters, with 64-byte aligned slices). sizes[i] are in
 * floats; ptrs[i] receive the slice starts. The whole block is zeroed.
 * Returns NULL (and sets the error) on failure; free with hpt_arena_free. */
float *hpt_arena_carve(const size_t *sizes, int n, float **ptrs[], size_t *total_floats);
float *hpt_arena_alloc(size_t nfloats);   /* one aligned, zeroed slice */
/* hpt_arena_carve in two halves, for another allocator's memory (a
 * device's alloc: zeroed, 64-byte aligned at least; freed by its free):
 * the block's floats, then the slices' starts in a block of that size. */
size_t hpt_arena_layout(const size_t *sizes, int n);
void hpt_arena_point(float *base, const size_t *sizes, int n, float **ptrs[]);
void hpt_arena_free(void *p);

/* --------------------------------------------------------------- RNG */

/* xorshift64* with an explicit, serialisable state (one u64). */
typedef struct hpt_rng { uint64_t s; } hpt_rng;
void     hpt_rng_seed(hpt_rng *r, uint64_t seed);
uint64_t hpt_rng_u64(hpt_rng *r);
uint32_t hpt_rng_u32(hpt_rng *r);
float    hpt_rng_uniform(hpt_rng *r);          /* [0, 1) */
float    hpt_rng_normal(hpt_rng *r);           /* N(0, 1), Box-Muller */
uint64_t hpt_rng_below(hpt_rng *r, uint64_t n); /* [0, n), n > 0 */

/* --------------------------------------------------------------- files */

/* Reads a whole file. *out is malloc'd with one extra NUL byte. */
hpt_status hpt_read_file(const char *path, unsigned char **out, size_t *len);
/* Opens a regular file read-only (fd and length out); a FIFO, device or
 * directory is refused at once instead of blocking in open or read. */
hpt_status hpt_open_regular(const char *path, int *fd, size_t *size);
/* A stat mode's kind in words ("FIFO", "device", ...), for messages. */
const char *hpt_file_kind(unsigned mode);

/* Atomic save (redis rdbSave): write to PATH.tmp.<pid>, fflush, fsync, rename
 * over PATH, fsync the directory. A crash leaves either the old or the new
 * file, never a torn one. The writer callback streams the content. An
 * existing PATH that is not a regular file (a device, FIFO, socket, directory)
 * is refused, never replaced. */
typedef hpt_status (*hpt_write_fn)(FILE *f, void *ctx);
hpt_status hpt_save_atomic(const char *path, hpt_write_fn fn, void *ctx);
hpt_status hpt_mkdir_p(const char *path);
/* PATH made absolute (realpath: symlinks resolved), so that a path stored in
 * a checkpoint means the same file from any working directory; PATH as given
 * where it does not resolve (or is empty), so errors name what was typed; a
 * glob (token shards) with its directory made absolute, the pattern kept. */
void hpt_abs_path(char *dst, size_t n, const char *path);
/* Advisory lock on a run directory (flock on DIR/.hpt.lock, holding our pid),
 * so two trainers never write the same checkpoints and logs. Fails with a
 * message naming the holder's pid. The kernel drops the lock when the process
 * dies, even by SIGKILL, so a killed run can be resumed at once. */
hpt_status hpt_dir_lock(const char *dir, int *fd);
void hpt_dir_unlock(int fd);   /* fd < 0: no-op */
/* Fails like hpt_dir_lock when another process holds DIR's lock; creates
 * nothing and holds nothing after it returns (a read-only check). */
hpt_status hpt_dir_lock_probe(const char *dir);
/* Unlocks and removes DIR/.hpt.lock: for a command that took the lock on a
 * directory that turned out to hold no run, so that it leaves nothing behind. */
void hpt_dir_unlock_discard(const char *dir, int fd);

/* Little-endian fixed-width writer that keeps a running CRC-32 of what it
 * wrote and a sticky error flag (check once, at the end). The library only
 * builds on little-endian hosts (static assert in io.c), so floats are
 * written as their bytes. */
typedef struct hpt_writer { FILE *f; uint32_t crc; int err; } hpt_writer;
void hpt_w_bytes(hpt_writer *w, const void *p, size_t n);
void hpt_w_u32(hpt_writer *w, uint32_t v);
void hpt_w_u64(hpt_writer *w, uint64_t v);

/* Bounds-checked reader over a byte buffer; each call returns 0 when fewer
 * than the requested bytes remain (a truncated file), 1 on success. */
typedef struct hpt_cursor { const unsigned char *p; size_t n, pos; } hpt_cursor;
int hpt_cur_u32(hpt_cursor *c, uint32_t *v);
int hpt_cur_u64(hpt_cursor *c, uint64_t *v);
int hpt_cur_bytes(hpt_cursor *c, void *dst, size_t n);

/* --------------------------------------------------------------- system */

/* Memory that can still be allocated: MemAvailable from /proc/meminfo,
 * lowered to the cgroup's remaining limit where one is set; 0: unknown. */
size_t hpt_mem_available(void);
/* Refuses (HPT_ERR_NOMEM) a plan to allocate `need` bytes that exceeds the
 * memory available or the ceiling (hpt_set_memory_ceiling), with a message
 * giving what (e.g. "training"), the figures and detail (the breakdown). */
hpt_status hpt_mem_check(const char *what, size_t need, const char *detail);
/* "12.3 MiB": bytes in KiB, MiB or GiB for messages. */
void hpt_fmt_bytes(char *buf, size_t n, size_t bytes);

/* Sets OpenMP and OpenBLAS threads together (see hpt_set_threads). */
int hpt_omp_max_threads(void);

#endif /* HPT_BASE_H */
