/*
 * bench_step.c — times full GPT-2 training steps of libhpt at given shapes
 * on random tokens: zero_grad, forward, backward, then clipping + AdamW
 * through hpt_optim_step (the trainer's own optimizer code). Built by
 * `make bench` as build/bench_step.
 *
 * Defaults are GPT-2 124M shapes (L12 H12 C768, vocab 50257 padded inside to
 * 50304, block 1024) at batch 4 x seq 64: 5 timed steps after 1 warmup.
 *
 *   build/bench_step [--n-layer N] [--n-head N] [--n-embd N] [--vocab V]
 *                    [--block-size N] [--batch B] [--seq T] [--steps N]
 *                    [--warmup N] [--threads N] [--seed N] [--json OUT]
 *
 * Reports the median ms/step, the step's FLOPs (hpt_model_train_flops), the
 * achieved GFLOP/s, the median of each phase (zero_grad, forward, backward,
 * optimizer), memory, peak RSS (getrusage) and /proc/stat steal time over the
 * timed steps. A benchmark, not a test: it never fails on slowness. Like the
 * CLI, it re-executes itself with a better OPENBLAS_CORETYPE where OpenBLAS
 * falls back to Prescott (see choose_blas_kernels).
 */
#include "hpt.h"
#include "../src/base/base.h"
#include "../src/model/model.h"
#include "../src/train/optim.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef HPT_NO_BLAS
#include <cblas.h>
#endif

typedef struct opts {
    int n_layer, n_head, n_embd, vocab, block_size, batch, seq, steps, warmup, threads;
    long seed;
    const char *json;
} opts;

static void usage(FILE *f) {
    fprintf(f,
"bench_step — time hpt GPT-2 training steps (zero_grad + forward + backward + AdamW)\n"
"  --n-layer N      [12]     --n-head N   [12]     --n-embd N [768]\n"
"  --vocab V        [50257]  (padded inside, hpt_gpt2_padded_vocab)\n"
"  --block-size N   [1024]   position table rows\n"
"  --batch B        [4]      --seq T      [64]     (T <= block-size)\n"
"  --steps N        [5]      timed steps  --warmup N [1]  untimed steps first\n"
"  --threads N      [0]      OpenMP + OpenBLAS threads, 0 = all cores\n"
"  --seed N         [1337]   --json OUT   write the results as JSON\n");
}

static long parse_int(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "bench_step: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, v ? v : "");
        exit(2);
    }
    return x;
}

static void parse(opts *o, int argc, char **argv) {
    *o = (opts){.n_layer = 12, .n_head = 12, .n_embd = 768, .vocab = 50257, .block_size = 1024,
                .batch = 4, .seq = 64, .steps = 5, .warmup = 1, .threads = 0, .seed = 1337};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
#define INTFLAG(name, field, lo, hi) \
        else if (!strcmp(a, name)) { o->field = (int)parse_int(a, v, lo, hi); i++; }
        INTFLAG("--n-layer", n_layer, 1, 256)
        INTFLAG("--n-head", n_head, 1, 256)
        INTFLAG("--n-embd", n_embd, 1, 16384)
        INTFLAG("--vocab", vocab, 2, 1 << 24)
        INTFLAG("--block-size", block_size, 1, 8192)
        INTFLAG("--batch", batch, 1, 65536)
        INTFLAG("--seq", seq, 1, 8192)
        INTFLAG("--steps", steps, 1, 1000000)
        INTFLAG("--warmup", warmup, 0, 1000000)
        INTFLAG("--threads", threads, 0, 1024)
#undef INTFLAG
        else if (!strcmp(a, "--seed")) { o->seed = parse_int(a, v, 0, LONG_MAX); i++; }
        else if (!strcmp(a, "--json")) {
            if (!v) { fprintf(stderr, "bench_step: --json needs a path\n"); exit(2); }
            o->json = v; i++;
        } else {
            fprintf(stderr, "bench_step: unknown option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o->seq > o->block_size) {
        fprintf(stderr, "bench_step: --seq (%d) must be <= --block-size (%d)\n", o->seq, o->block_size);
        exit(2);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *x, int n) {
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* Aggregate "cpu" line of /proc/stat: total and steal jiffies (0 if unreadable). */
static void proc_stat(unsigned long long *total, unsigned long long *steal) {
    *total = *steal = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    for (int i = 0; i < n && i < 8; i++) *total += v[i];   /* guest time is inside user */
    if (n >= 8) *steal = v[7];
}

/* 1-minute load average: other processes competing for the CPUs (steal does not see them). */
static double loadavg1(void) {
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &l) != 1) l = -1.0; fclose(f); }
    return l;
}

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ' || *p == '\t') p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, n, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

/* JSON string escape for the few strings we write (no control characters expected). */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

int main(int argc, char **argv) {
    hpt_blas_reexec(argv);
    opts o;
    parse(&o, argc, argv);
    hpt_set_threads(o.threads);
    const int B = o.batch, T = o.seq;
    hpt_gpt2_config cfg = {.vocab_size = o.vocab, .block_size = o.block_size, .n_layer = o.n_layer,
                           .n_head = o.n_head, .n_embd = o.n_embd};
    double ti0 = hpt_now();
    hpt_model *m;
    hpt_status st = hpt_gpt2_init(&m, &cfg, B, T, (uint64_t)o.seed);
    if (st != HPT_OK) {
        fprintf(stderr, "bench_step: %s (%s)\n", hpt_errmsg(), hpt_status_str(st));
        return 1;
    }
    double init_s = hpt_now() - ti0;
    const size_t n = m->nparams;
    float *mom = hpt_arena_alloc(2 * n);
    int *x = malloc((size_t)B * T * sizeof(int)), *y = malloc((size_t)B * T * sizeof(int));
    const int total = o.warmup + o.steps;
    double *ph = malloc((size_t)5 * o.steps * sizeof(double));  /* zero, fwd, bwd, opt, step */
    float *losses = malloc((size_t)total * sizeof(float));
    if (!mom || !x || !y || !ph || !losses) { fprintf(stderr, "bench_step: out of memory\n"); return 1; }
    double *zg = ph, *fw = ph + o.steps, *bw = ph + 2 * o.steps, *op = ph + 3 * o.steps, *sp = ph + 4 * o.steps;

    size_t pb, gb, ab;
    hpt_model_bytes(m, &pb, &gb, &ab);
    const double flops = hpt_model_train_flops(m, B, T);
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
#ifndef HPT_NO_BLAS
    const char *blas_cfg = openblas_get_config(), *blas_core = openblas_get_corename();
#else
    const char *blas_cfg = "none (BLAS=0)", *blas_core = "none";
#endif
    fprintf(stderr, "bench_step: %s, B%d T%d, %zu params, %.2f GFLOP/step, %d threads, %s (%s)\n",
            hpt_model_describe(m), B, T, n, flops * 1e-9, hpt_get_threads(), blas_cfg, blas_core);
    fprintf(stderr, "memory: params %.1f MiB, grads %.1f MiB, adamw %.1f MiB, activations %.1f MiB; init %.2f s\n",
            pb / 1048576.0, gb / 1048576.0, 2.0 * n * sizeof(float) / 1048576.0, ab / 1048576.0, init_s);

    hpt_rng rng;
    hpt_rng_seed(&rng, (uint64_t)o.seed ^ 0xBE7C4ull);
    /* a small learning rate keeps random-token training finite for any step count */
    hpt_adamw opt = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    unsigned long long tot0 = 0, stl0 = 0, tot1, stl1;
    const double load0 = loadavg1();
    for (int s = 0; s < total; s++) {
        for (int i = 0; i < B * T; i++) {
            x[i] = (int)hpt_rng_below(&rng, (uint64_t)o.vocab);
            y[i] = (int)hpt_rng_below(&rng, (uint64_t)o.vocab);
        }
        if (s == o.warmup) proc_stat(&tot0, &stl0);
        hpt_batch b = {.B = B, .T = T, .tokens = x, .targets = y};
        float loss, norm;
        double t0 = hpt_now();
        hpt_model_zero_grad(m);
        double t1 = hpt_now();
        st = hpt_model_forward(m, &b, &loss);
        double t2 = hpt_now();
        if (st == HPT_OK) st = hpt_model_backward(m, 1.0f);
        double t3 = hpt_now();
        if (st == HPT_OK) st = hpt_optim_step(m, mom, mom + n, &opt, s + 1, &norm);
        double t4 = hpt_now();
        if (st != HPT_OK) {
            fprintf(stderr, "bench_step: step %d: %s (%s)\n", s + 1, hpt_errmsg(), hpt_status_str(st));
            return 1;
        }
        losses[s] = loss;
        const int k = s - o.warmup;
        fprintf(stderr, "%s %d: %.1f ms (zero_grad %.1f, forward %.1f, backward %.1f, optimizer %.1f), loss %.4f\n",
                k < 0 ? "warmup" : "step", k < 0 ? s + 1 : k + 1, (t4 - t0) * 1e3, (t1 - t0) * 1e3,
                (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3, loss);
        if (k >= 0) {
            zg[k] = (t1 - t0) * 1e3; fw[k] = (t2 - t1) * 1e3; bw[k] = (t3 - t2) * 1e3;
            op[k] = (t4 - t3) * 1e3; sp[k] = (t4 - t0) * 1e3;
        }
    }
    proc_stat(&tot1, &stl1);
    const double load1 = loadavg1();
    const int N = o.steps;
    double med = median(sp, N), mzg = median(zg, N), mfw = median(fw, N), mbw = median(bw, N), mop = median(op, N);
    double mn = sp[0], mx = sp[0], mean = 0.0;
    for (int k = 0; k < N; k++) { mn = fmin(mn, sp[k]); mx = fmax(mx, sp[k]); mean += sp[k] / N; }
    double gflops = flops / (med * 1e-3) * 1e-9;
    size_t peak = hpt_peak_rss_bytes();
    unsigned long long dtot = tot1 - tot0, dstl = stl1 - stl0;
    double steal_pct = dtot ? 100.0 * (double)dstl / (double)dtot : 0.0;

    printf("%-28s %s\n", "model", hpt_model_describe(m));
    printf("%-28s B%d x T%d, %d threads, %d timed steps after %d warmup\n", "shape", B, T, hpt_get_threads(), N, o.warmup);
    printf("%-28s %.1f ms (min %.1f, mean %.1f, max %.1f)\n", "median step", med, mn, mean, mx);
    printf("%-28s %.1f / %.1f / %.1f / %.1f ms (%.0f / %.0f / %.0f / %.0f %%)\n",
           "zero_grad / fwd / bwd / opt", mzg, mfw, mbw, mop,
           100 * mzg / med, 100 * mfw / med, 100 * mbw / med, 100 * mop / med);
    printf("%-28s %.2f GFLOP/step, %.1f GFLOP/s, %.0f tokens/s\n", "throughput", flops * 1e-9, gflops, B * T / (med * 1e-3));
    printf("%-28s %.1f MiB (arenas %.1f MiB)\n", "peak RSS (getrusage)", peak / 1048576.0,
           (pb + gb + ab + 2.0 * n * sizeof(float)) / 1048576.0);
    printf("%-28s %llu of %llu jiffies (%.2f %%)\n", "steal during timed steps", dstl, dtot, steal_pct);
    printf("%-28s %.2f before, %.2f after\n", "load average (1 min)", load0, load1);

    if (o.json) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", o.json);
        FILE *f = fopen(tmp, "w");
        if (!f) { fprintf(stderr, "bench_step: cannot write '%s': %s\n", tmp, strerror(errno)); return 1; }
        time_t now = time(NULL);
        char date[64];
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        fprintf(f, "{\n  \"benchmark\": \"bench_step\",\n  \"date\": \"%s\",\n  \"cpu\": ", date);
        json_str(f, cpu);
        fprintf(f, ",\n  \"nproc\": %ld,\n  \"openblas\": ", sysconf(_SC_NPROCESSORS_ONLN));
        json_str(f, blas_cfg);
        fprintf(f, ",\n  \"openblas_core\": ");
        json_str(f, blas_core);
        fprintf(f, ",\n  \"openblas_coretype_env\": ");
        if (getenv("OPENBLAS_CORETYPE")) json_str(f, getenv("OPENBLAS_CORETYPE")); else fputs("null", f);
        fprintf(f, ",\n  \"openblas_core_reexec\": %s", getenv("HPT_BLAS_REEXEC") ? "true" : "false");
        fprintf(f, ",\n  \"model\": ");
        json_str(f, hpt_model_describe(m));
        fprintf(f, ",\n  \"config\": {\"n_layer\": %d, \"n_head\": %d, \"n_embd\": %d, \"vocab\": %d, "
                "\"padded_vocab\": %d, \"block_size\": %d, \"batch\": %d, \"seq\": %d, \"steps\": %d, "
                "\"warmup\": %d, \"threads\": %d, \"seed\": %ld},\n",
                o.n_layer, o.n_head, o.n_embd, o.vocab, hpt_gpt2_padded_vocab(o.vocab), o.block_size, B, T,
                N, o.warmup, hpt_get_threads(), o.seed);
        fprintf(f, "  \"params\": %zu,\n  \"flops_per_step\": %.6g,\n  \"median_step_ms\": %.4f,\n"
                "  \"min_step_ms\": %.4f,\n  \"mean_step_ms\": %.4f,\n  \"max_step_ms\": %.4f,\n"
                "  \"gflops_per_s\": %.4f,\n  \"tokens_per_s\": %.2f,\n",
                n, flops, med, mn, mean, mx, gflops, B * T / (med * 1e-3));
        fprintf(f, "  \"median_phase_ms\": {\"zero_grad\": %.4f, \"forward\": %.4f, \"backward\": %.4f, "
                "\"optimizer\": %.4f},\n", mzg, mfw, mbw, mop);
        fprintf(f, "  \"step_ms\": [");
        for (int k = 0; k < N; k++) fprintf(f, "%s%.4f", k ? ", " : "", sp[k]);
        fprintf(f, "],\n  \"losses\": [");
        for (int k = 0; k < total; k++) {
            if (isfinite(losses[k])) fprintf(f, "%s%.6g", k ? ", " : "", losses[k]);
            else fprintf(f, "%snull", k ? ", " : "");
        }
        fprintf(f, "],\n  \"memory_bytes\": {\"params\": %zu, \"grads\": %zu, \"adamw\": %zu, \"activations\": %zu},\n",
                pb, gb, 2 * n * sizeof(float), ab);
        fprintf(f, "  \"peak_rss_bytes_getrusage\": %zu,\n  \"init_s\": %.4f,\n", peak, init_s);
        fprintf(f, "  \"loadavg1_before_after\": [%.2f, %.2f],\n", load0, load1);
        fprintf(f, "  \"steal\": {\"steal_jiffies\": %llu, \"total_jiffies\": %llu, \"steal_pct\": %.3f}\n}\n",
                dstl, dtot, steal_pct);
        int werr = ferror(f);
        if (fclose(f) != 0 || werr || rename(tmp, o.json) != 0) {
            fprintf(stderr, "bench_step: cannot write '%s'\n", o.json);
            return 1;
        }
        fprintf(stderr, "wrote %s\n", o.json);
    }
    free(ph); free(losses); free(x); free(y);
    hpt_arena_free(mom);
    hpt_model_free(m);
    return 0;
}
