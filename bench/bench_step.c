/*
 * bench_step.c — times full GPT-2 training steps of libhpt at given shapes
 * on random tokens: forward, backward (hpt_model_backward_fresh, which
 * writes the gradient: the trainer's zero_grad + backward), then clipping +
 * AdamW through hpt_optim_step (the trainer's own optimizer code). Built by
 * `make bench` as build/bench_step.
 *
 * Defaults are GPT-2 124M shapes (L12 H12 C768, vocab 50257 padded inside to
 * 50304, block 1024) at batch 4 x seq 64: 5 timed steps after 1 warmup.
 *
 *   build/bench_step [--n-layer N] [--n-head N] [--n-embd N] [--vocab V]
 *                    [--block-size N] [--batch B] [--seq T] [--steps N]
 *                    [--warmup N] [--threads N] [--seed N] [--json OUT]
 *                    [--profile] [--sgemm-probe] [--device NAME] [--precision P]
 *
 * Reports the median ms/step, the step's FLOPs (hpt_model_train_flops), the
 * achieved GFLOP/s, the median of each phase (zero_grad, forward, backward,
 * optimizer), memory, peak RSS (getrusage) and /proc/stat steal time over the
 * timed steps. A benchmark, not a test: it never fails on slowness. Like the
 * CLI, it runs OpenBLAS's kernels for this CPU where OpenBLAS falls back to
 * Prescott (libhpt switches them as it loads: hpt_blas_origin).
 *
 * --profile adds the per-kernel table (src/base/prof.h): the median over the
 * timed steps of each kernel's ms/step, its share of the median step, its
 * FLOPs (GEMMs and attention) and GFLOP/s; what no slot covers is the
 * "unattributed" row. --sgemm-probe trains nothing: it times every GEMM shape
 * of the step alone, through hpt's own matmul kernels and as one plain
 * cblas_sgemm call with OpenBLAS' threading, on separate buffers (run it as
 * its own process so the training run's peak RSS stays the model's), and
 * reports the best of each: the machine's sgemm rate at the step's shapes.
 *
 * --device cuda [--precision fp32|tf32|bf16] times the same step on a
 * device row (the model's arenas and AdamW's moments in its memory): the
 * forward, backward and optimizer phases each end with the device's sync,
 * and under --profile every kernel call is synchronised before and after
 * (prof.h's hpt_prof_sync), so each slot is its kernels' GPU time plus one
 * synchronisation; the unprofiled median is the step to quote.
 */
#include "hpt.h"
#include "../src/base/base.h"
#include "../src/model/model.h"
#include "../src/train/optim.h"
#include "../src/kernels/kernels.h"
#include "../src/base/prof.h"

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
    int profile, probe;
    long seed;
    const char *json, *device, *precision, *optimizer;
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
"  --seed N         [1337]   --json OUT   write the results as JSON\n"
"  --profile        per-kernel table (ms/step, %% of step, GFLOP/s)\n"
"  --sgemm-probe    no training: time the step's GEMM shapes alone (sgemm rate)\n"
"  --device NAME    [cpu]    the device row the step runs on (cuda where built and present)\n"
"  --precision P    [fp32]   the device's matrix arithmetic (cuda: fp32, tf32, bf16)\n"
"  --optimizer O    [adamw]  adamw, or muon (Muon on the hidden matrices, AdamW on the rest; cpu only)\n");
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
        else if (!strcmp(a, "--profile")) o->profile = 1;
        else if (!strcmp(a, "--sgemm-probe")) o->probe = 1;
        else if (!strcmp(a, "--seed")) { o->seed = parse_int(a, v, 0, LONG_MAX); i++; }
        else if (!strcmp(a, "--json") || !strcmp(a, "--device") || !strcmp(a, "--precision") ||
                 !strcmp(a, "--optimizer")) {
            if (!v) { fprintf(stderr, "bench_step: %s needs a value\n", a); exit(2); }
            if (!strcmp(a, "--json")) o->json = v;
            else if (!strcmp(a, "--device")) o->device = v;
            else if (!strcmp(a, "--optimizer")) o->optimizer = v;
            else o->precision = v;
            i++;
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

/* ---------------------------------------------------------------- sgemm probe */

/* The step's GEMMs: one row per family and direction (fwd, dx, dw), with
 * the family's linear layer shape (N rows, C in, OC out) and calls per step. */
typedef struct gemm_kind { int slot, dir, C, OC, bias, per_step; } gemm_kind;
enum { FWD, DX, DW };

static int gemm_kinds(const opts *o, gemm_kind *k) {
    const int C = o->n_embd, L = o->n_layer, Vp = hpt_gpt2_padded_vocab(o->vocab);
    const struct { int fwd, dx, dw, C, OC, bias, per_step; } fam[] = {
        {HPT_PROF_QKV_FWD, HPT_PROF_QKV_DX, HPT_PROF_QKV_DW, C, 3 * C, 1, L},
        {HPT_PROF_ATTPROJ_FWD, HPT_PROF_ATTPROJ_DX, HPT_PROF_ATTPROJ_DW, C, C, 1, L},
        {HPT_PROF_FC_FWD, HPT_PROF_FC_DX, HPT_PROF_FC_DW, C, 4 * C, 1, L},
        {HPT_PROF_FCPROJ_FWD, HPT_PROF_FCPROJ_DX, HPT_PROF_FCPROJ_DW, 4 * C, C, 1, L},
        {HPT_PROF_LMHEAD_FWD, HPT_PROF_LMHEAD_DX, HPT_PROF_LMHEAD_DW, C, Vp, 0, 1},
    };
    int n = 0;
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        const int slots[3] = {fam[f].fwd, fam[f].dx, fam[f].dw};
        for (int d = 0; d < 3; d++)
            k[n++] = (gemm_kind){slots[d], d, fam[f].C, fam[f].OC, fam[f].bias, fam[f].per_step};
    }
    return n;
}

typedef struct probe_bufs { float *inp, *w, *out, *bias, *dinp; } probe_bufs;

/* One GEMM of kind k on N rows: impl 0 through hpt's kernels (the step's
 * own code path), impl 1 as one cblas_sgemm call threaded by OpenBLAS. */
static void probe_call(int impl, const gemm_kind *k, const probe_bufs *b, int N) {
    const int C = k->C, OC = k->OC;
    if (impl == 0) {
        if (k->dir == FWD) matmul_forward(b->out, b->inp, b->w, k->bias ? b->bias : NULL, N, C, OC);
        else if (k->dir == DX) matmul_backward_dinp(b->dinp, b->out, b->w, N, C, OC);
        else matmul_backward_dweight(b->w, k->bias ? b->bias : NULL, b->out, b->inp, N, C, OC);
        return;
    }
#ifndef HPT_NO_BLAS
    if (k->dir == FWD)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, b->inp, C, b->w, C, 1.0f, b->out, OC);
    else if (k->dir == DX)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, b->out, OC, b->w, C, 1.0f, b->dinp, C);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, b->out, OC, b->inp, C, 1.0f, b->w, C);
#endif
}

/* Best seconds per call: one warm call, then at least 3 and until 0.3 s. */
static double probe_time(int impl, const gemm_kind *k, const probe_bufs *b, int N) {
    probe_call(impl, k, b, N);
    double best = INFINITY, t_all = hpt_now();
    for (int r = 0; r < 3 || (hpt_now() - t_all < 0.3 && r < 50); r++) {
        double t0 = hpt_now();
        probe_call(impl, k, b, N);
        double dt = hpt_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static int run_probe(const opts *o) {
    const int N = o->batch * o->seq;
    gemm_kind k[15];
    const int nk = gemm_kinds(o, k);
    size_t max_in = 0, max_w = 0, max_out = 0;
    for (int i = 0; i < nk; i++) {
        size_t in = (size_t)N * k[i].C, w = (size_t)k[i].OC * k[i].C, out = (size_t)N * k[i].OC;
        if (in > max_in) max_in = in;
        if (w > max_w) max_w = w;
        if (out > max_out) max_out = out;
    }
    probe_bufs b = {hpt_arena_alloc(max_in), hpt_arena_alloc(max_w), hpt_arena_alloc(max_out),
                    hpt_arena_alloc(max_out / N), hpt_arena_alloc(max_in)};
    if (!b.inp || !b.w || !b.out || !b.bias || !b.dinp) { fprintf(stderr, "bench_step: out of memory\n"); return 1; }
    hpt_rng rng;
    hpt_rng_seed(&rng, (uint64_t)o->seed);
    float *all[] = {b.inp, b.w, b.out, b.dinp};
    size_t len[] = {max_in, max_w, max_out, max_in};
    for (int j = 0; j < 4; j++)
        for (size_t i = 0; i < len[j]; i++) all[j][i] = 0.02f * ((float)hpt_rng_below(&rng, 2001) - 1000.0f) / 1000.0f;
#ifndef HPT_NO_BLAS
    const char *blas_core = openblas_get_corename();
#else
    const char *blas_core = "none";
#endif
    static const char *op[3] = {"NT", "NN", "TN"};
    double hs[15], bs[15];
    double mix_flops = 0.0, mix_s = 0.0;
    fprintf(stderr, "sgemm probe: B%d T%d (N = %d rows), %d threads, OpenBLAS core %s\n",
            o->batch, o->seq, N, hpt_get_threads(), blas_core);
    printf("%-24s %-24s %3s %10s %12s %12s\n", "kernel", "M x N x K", "op", "GFLOP", "hpt GFLOP/s", "sgemm GFLOP/s");
    for (int i = 0; i < nk; i++) {
        const int M = k[i].dir == DW ? k[i].OC : N, Nn = k[i].dir == FWD ? k[i].OC : k[i].C;
        const int K = k[i].dir == FWD ? k[i].C : k[i].dir == DX ? k[i].OC : N;
        const double f = 2.0 * N * k[i].C * k[i].OC;
        hs[i] = f / probe_time(0, &k[i], &b, N) * 1e-9;
#ifndef HPT_NO_BLAS
        bs[i] = f / probe_time(1, &k[i], &b, N) * 1e-9;
#else
        bs[i] = 0.0;
#endif
        const double best = fmax(hs[i], bs[i]);
        mix_flops += f * k[i].per_step;
        mix_s += f * k[i].per_step / (best * 1e9);
        char shape[64];
        snprintf(shape, sizeof shape, "%d x %d x %d", M, Nn, K);
        printf("%-24s %-24s %3s %10.3f %12.1f %12.1f\n", hpt_prof_name(k[i].slot), shape, op[k[i].dir], f * 1e-9,
               hs[i], bs[i]);
    }
    const double mix_rate = mix_flops / mix_s * 1e-9;
    printf("%-24s %.1f GFLOP/s (the step's GEMM mix at each shape's best rate; %.2f GFLOP/step)\n",
           "sgemm rate at the step", mix_rate, mix_flops * 1e-9);
    if (o->json) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", o->json);
        FILE *f = fopen(tmp, "w");
        if (!f) { fprintf(stderr, "bench_step: cannot write '%s': %s\n", tmp, strerror(errno)); return 1; }
        fprintf(f, "{\n  \"benchmark\": \"bench_step --sgemm-probe\",\n  \"openblas_core\": ");
        json_str(f, blas_core);
        fprintf(f, ",\n  \"threads\": %d,\n  \"rows\": %d,\n  \"shapes\": [\n", hpt_get_threads(), N);
        for (int i = 0; i < nk; i++) {
            const int M = k[i].dir == DW ? k[i].OC : N, Nn = k[i].dir == FWD ? k[i].OC : k[i].C;
            const int K = k[i].dir == FWD ? k[i].C : k[i].dir == DX ? k[i].OC : N;
            fprintf(f, "    {\"kernel\": ");
            json_str(f, hpt_prof_name(k[i].slot));
            fprintf(f, ", \"m\": %d, \"n\": %d, \"k\": %d, \"op\": \"%s\", \"calls_per_step\": %d, "
                    "\"gflop\": %.6g, \"hpt_gflops_per_s\": %.4f, \"sgemm_gflops_per_s\": %.4f, "
                    "\"best_gflops_per_s\": %.4f}%s\n", M, Nn, K, op[k[i].dir], k[i].per_step,
                    2.0 * N * k[i].C * k[i].OC * 1e-9, hs[i], bs[i], fmax(hs[i], bs[i]), i + 1 < nk ? "," : "");
        }
        fprintf(f, "  ],\n  \"step_gemm_gflop\": %.6g,\n  \"rate_at_step_mix_gflops_per_s\": %.4f\n}\n",
                mix_flops * 1e-9, mix_rate);
        int werr = ferror(f);
        if (fclose(f) != 0 || werr || rename(tmp, o->json) != 0) {
            fprintf(stderr, "bench_step: cannot write '%s'\n", o->json);
            return 1;
        }
        fprintf(stderr, "wrote %s\n", o->json);
    }
    for (int j = 0; j < 4; j++) hpt_arena_free(all[j]);
    hpt_arena_free(b.bias);
    return 0;
}

/* the device being timed, for prof.h's hpt_prof_sync */
static const hpt_device *g_dev;
static void dev_sync(void) { g_dev->sync(g_dev); }

int main(int argc, char **argv) {
    opts o;
    parse(&o, argc, argv);
    hpt_set_threads(o.threads);
    if (o.probe) return run_probe(&o);
    const int B = o.batch, T = o.seq;
    hpt_gpt2_config cfg = {.vocab_size = o.vocab, .block_size = o.block_size, .n_layer = o.n_layer,
                           .n_head = o.n_head, .n_embd = o.n_embd};
    hpt_device *dev;
    const hpt_device_settings ds = {.precision = o.precision, .mem_limit = 0};
    hpt_status st = hpt_device_open(o.device, &ds, &dev);
    if (st != HPT_OK) {
        fprintf(stderr, "bench_step: %s (%s)\n", hpt_errmsg(), hpt_status_str(st));
        return 1;
    }
    const int muon = o.optimizer && !strcmp(o.optimizer, "muon");
    if (o.optimizer && !muon && strcmp(o.optimizer, "adamw")) {
        fprintf(stderr, "bench_step: --optimizer adamw or muon, got '%s'\n", o.optimizer);
        return 2;
    }
    if (muon && !dev->host_memory) {   /* as hpt train: Muon's step is host code */
        fprintf(stderr, "bench_step: --optimizer muon runs on --device cpu only\n");
        return 2;
    }
    g_dev = dev;
    if (!dev->host_memory) hpt_prof_sync = dev_sync;
    double ti0 = hpt_now();
    hpt_model *m;
    st = hpt_gpt2_init(&m, &cfg, B, T, (uint64_t)o.seed, dev);
    if (st != HPT_OK) {
        fprintf(stderr, "bench_step: %s (%s)\n", hpt_errmsg(), hpt_status_str(st));
        return 1;
    }
    double init_s = hpt_now() - ti0;
    const size_t n = m->nparams;
    float *mom = dev->alloc(dev, 2 * n);   /* AdamW's m and v, zero */
    if (mom) dev->fill(mom, 0.0f, 2 * n);
    int *x = malloc((size_t)B * T * sizeof(int)), *y = malloc((size_t)B * T * sizeof(int));
    const int total = o.warmup + o.steps;
    double *ph = malloc((size_t)5 * o.steps * sizeof(double));  /* zero, fwd, bwd, opt, step */
    float *losses = malloc((size_t)total * sizeof(float));
    if (!mom || !x || !y || !ph || !losses) { fprintf(stderr, "bench_step: out of memory\n"); return 1; }
    /* --profile: each timed step's ms per kernel slot, and one step's FLOPs and calls */
    double *kt = o.profile ? malloc((size_t)o.steps * HPT_PROF_NSLOTS * sizeof(double)) : NULL;
    double kf[HPT_PROF_NSLOTS] = {0};
    long kc[HPT_PROF_NSLOTS] = {0};
    if (o.profile && !kt) { fprintf(stderr, "bench_step: out of memory\n"); return 1; }
    hpt_prof_enable(o.profile);
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
    fprintf(stderr, "bench_step: %s, B%d T%d, %zu params, %.2f GFLOP/step, device %s (%s), %d threads, %s (%s)\n",
            hpt_model_describe(m), B, T, n, flops * 1e-9, dev->name, o.precision ? o.precision : "fp32",
            hpt_get_threads(), blas_cfg, blas_core);
    fprintf(stderr, "memory: params %.1f MiB, grads %.1f MiB, adamw %.1f MiB, activations %.1f MiB; init %.2f s\n",
            pb / 1048576.0, gb / 1048576.0, 2.0 * n * sizeof(float) / 1048576.0, ab / 1048576.0, init_s);

    hpt_rng rng;
    hpt_rng_seed(&rng, (uint64_t)o.seed ^ 0xBE7C4ull);
    /* a small learning rate keeps random-token training finite for any step count */
    hpt_adamw opt = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    /* --optimizer muon: the trainer's defaults (settings.h), its scratch on the host */
    const hpt_muon mu = {.lr = 1e-3f, .momentum = 0.95f, .ns_steps = 5};
    float *muon_scratch = NULL;
    if (muon && !(muon_scratch = malloc((hpt_muon_scratch_floats(m) + 1) * sizeof(float)))) {
        fprintf(stderr, "bench_step: out of memory\n");
        return 1;
    }
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
        hpt_prof_reset();
        /* the trainer's step: no zero_grad sweep, the backward writes the
         * gradient (hpt_model_backward_fresh); the zero_grad phase stays in
         * the report (0 here) so old and new runs read alike */
        double t0 = hpt_now();
        double t1 = hpt_now();
        st = hpt_model_forward(m, &b, &loss);
        double t2 = hpt_now();
        if (st == HPT_OK) st = hpt_model_backward_fresh(m, 1.0f);
        if (st == HPT_OK) st = dev->sync(dev);   /* a device's kernels are asynchronous: each phase waits for its own */
        double t3 = hpt_now();
        if (st == HPT_OK)
            st = muon ? hpt_muon_step(m, mom, mom + n, muon_scratch, &opt, &mu, s + 1, &norm)
                      : hpt_optim_step(m, mom, mom + n, &opt, s + 1, &norm);
        if (st == HPT_OK) st = dev->sync(dev);
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
            for (int i = 0; kt && i < HPT_PROF_NSLOTS; i++) {
                kt[(size_t)i * o.steps + k] = hpt_prof_acc[i].seconds * 1e3;
                kf[i] = hpt_prof_acc[i].flops;
                kc[i] = hpt_prof_acc[i].calls;
            }
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
    printf("%-28s %s, precision %s\n", "device", dev->name, o.precision ? o.precision : "fp32");
    printf("%-28s B%d x T%d, %d threads, %d timed steps after %d warmup\n", "shape", B, T, hpt_get_threads(), N, o.warmup);
    printf("%-28s %.1f ms (min %.1f, mean %.1f, max %.1f)\n", "median step", med, mn, mean, mx);
    printf("%-28s %.1f / %.1f / %.1f / %.1f ms (%.0f / %.0f / %.0f / %.0f %%)\n",
           "zero_grad / fwd / bwd / opt", mzg, mfw, mbw, mop,
           100 * mzg / med, 100 * mfw / med, 100 * mbw / med, 100 * mop / med);
    printf("%-28s %.2f GFLOP/step, %.1f GFLOP/s, %.0f tokens/s\n", "throughput", flops * 1e-9, gflops, B * T / (med * 1e-3));
    const double ledger = pb + gb + ab + 2.0 * n * sizeof(float);
    printf("%-28s params %.1f + grads %.1f + adamw moments %.1f + activations %.1f = %.1f MiB\n", "memory ledger",
           pb / 1048576.0, gb / 1048576.0, 2.0 * n * sizeof(float) / 1048576.0, ab / 1048576.0, ledger / 1048576.0);
    printf("%-28s %.1f MiB (ledger + %.1f MiB: binary, libraries, thread stacks, heap)\n", "peak RSS (getrusage)",
           peak / 1048576.0, (peak - ledger) / 1048576.0);
    printf("%-28s %llu of %llu jiffies (%.2f %%)\n", "steal during timed steps", dstl, dtot, steal_pct);
    printf("%-28s %.2f before, %.2f after\n", "load average (1 min)", load0, load1);
    double km[HPT_PROF_NSLOTS] = {0}, ksum = 0.0;
    if (kt) {
        printf("\n%-24s %6s %10s %7s %10s %10s\n", "kernel (median of steps)", "calls", "ms/step", "% step",
               "GFLOP", "GFLOP/s");
        for (int i = 0; i < HPT_PROF_NSLOTS; i++) {
            km[i] = median(kt + (size_t)i * N, N);
            ksum += km[i];
            if (!kc[i]) continue;
            printf("%-24s %6ld %10.2f %7.1f", hpt_prof_name(i), kc[i], km[i], 100.0 * km[i] / med);
            if (kf[i] > 0 && km[i] > 0) printf(" %10.3f %10.1f\n", kf[i] * 1e-9, kf[i] / (km[i] * 1e-3) * 1e-9);
            else printf("\n");
        }
        printf("%-24s %6s %10.2f %7.1f\n", "unattributed", "", med - ksum, 100.0 * (med - ksum) / med);
    }

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
        { fputs(",\n  \"openblas_core_origin\": ", f); json_str(f, hpt_blas_origin()); }
        fprintf(f, ",\n  \"device\": ");
        json_str(f, dev->name);
        fprintf(f, ",\n  \"precision\": ");
        json_str(f, o.precision ? o.precision : "fp32");
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
        fprintf(f, "  \"memory_ledger_bytes\": %.0f,\n", ledger);
        fprintf(f, "  \"peak_rss_bytes_getrusage\": %zu,\n  \"init_s\": %.4f,\n", peak, init_s);
        if (kt) {
            fprintf(f, "  \"profile\": [\n");
            for (int i = 0, first = 1; i < HPT_PROF_NSLOTS; i++) {
                if (!kc[i]) continue;
                fprintf(f, "%s    {\"kernel\": ", first ? "" : ",\n");
                json_str(f, hpt_prof_name(i));
                fprintf(f, ", \"gemm\": %s, \"calls\": %ld, \"ms\": %.4f, \"pct_of_step\": %.3f, \"gflop\": %.6g, "
                        "\"gflops_per_s\": %.4f}", hpt_prof_is_gemm(i) ? "true" : "false", kc[i], km[i],
                        100.0 * km[i] / med, kf[i] * 1e-9, km[i] > 0 ? kf[i] / (km[i] * 1e-3) * 1e-9 : 0.0);
                first = 0;
            }
            fprintf(f, "\n  ],\n  \"profile_unattributed_ms\": %.4f,\n", med - ksum);
        }
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
    free(ph); free(losses); free(x); free(y); free(kt);
    dev->free(dev, mom);
    hpt_model_free(m);
    hpt_device_close(dev);
    return 0;
}
