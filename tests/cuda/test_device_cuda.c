/*
 * test_device_cuda.c — the device table's CUDA row (src/cuda/device_cuda.cu)
 * against the CPU row (tests/test_device.c tests that one against its
 * formulas): every elementwise operation and optimizer update bit for bit
 * (nvcc's -fmad=false and the host-computed bias corrections make that
 * possible), the reductions within 1e-12 relative of an extended-precision
 * sum and the same bits from call to call, at sizes 1 to 10,000,019 (odd
 * ones: a partial last block, a grid-stride tail). Where no CUDA device can
 * be used it says why and exits 0 (skip), so it can run on any machine.
 */
#include "../test.h"
#include "../../src/device/device.h"

#include <stdint.h>

static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

/* the first index where a and b differ, for the message (n when none) */
static size_t first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof(float))) return i;
    return n;
}

static void fill_random(float *x, size_t n, uint32_t s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 3.0f;
    }
}

static float *host(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    HPT_ASSERT(p);
    return p;
}

/* One buffer of n floats on each device, the same contents. */
typedef struct pair { float *c, *g; } pair;

static pair pair_new(const hpt_device *gpu, const float *x, size_t n) {
    pair p = {hpt_device_cpu.alloc(&hpt_device_cpu, n), gpu->alloc(gpu, n)};
    HPT_ASSERT(p.c && p.g);
    memcpy(p.c, x, n * sizeof(float));
    gpu->upload(p.g, x, n);
    return p;
}

static void pair_free(const hpt_device *gpu, pair p) {
    hpt_device_cpu.free(&hpt_device_cpu, p.c);
    gpu->free(gpu, p.g);
}

/* the GPU's copy equals the CPU's, bit for bit */
static int pair_same(const hpt_device *gpu, pair p, size_t n, float *scratch, const char *what) {
    gpu->download(scratch, p.g, n);
    size_t i = first_diff(scratch, p.c, n);
    CHECK(i == n, "%s, n %zu: element %zu is %.9g on the GPU, %.9g on the CPU", what, n, i,
          i < n ? scratch[i] : 0.0, i < n ? p.c[i] : 0.0);
    return i == n;
}

/* sum of a[i] b[i] in long double (x87's 64-bit mantissa): the reference the
 * two rows' double sums are held to */
static double dot_ref(const float *a, const float *b, size_t n) {
    long double s = 0.0L;
    for (size_t i = 0; i < n; i++) s += (long double)a[i] * b[i];
    return (double)s;
}

static void test_memory(const hpt_device *gpu, size_t n) {
    float *x = host(n), *h = host(n);
    fill_random(x, n, 1);
    float *a = gpu->alloc(gpu, n), *b = gpu->alloc(gpu, n);
    HPT_ASSERT(a && b);
    gpu->download(h, a, n);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= h[i] == 0.0f && !signbit(h[i]);
    CHECK(zero, "alloc gives zeros, n %zu", n);
    gpu->upload(a, x, n);
    gpu->download(h, a, n);
    CHECK(same_bits(h, x, n), "upload then download gives the same bits, n %zu", n);
    gpu->copy(b, a, n);
    memset(h, 0, n * sizeof(float));
    gpu->download(h, b, n);
    CHECK(same_bits(h, x, n), "copy, n %zu", n);
    gpu->free(gpu, a);
    gpu->free(gpu, b);
    free(x);
    free(h);
}

static void test_elementwise(const hpt_device *gpu, size_t n) {
    const hpt_device *cpu = &hpt_device_cpu;
    float *x = host(n), *y = host(n), *s = host(n);
    fill_random(x, n, 2);
    fill_random(y, n, 3);
    pair a = pair_new(gpu, x, n), b = pair_new(gpu, y, n);

    cpu->fill(a.c, -0.0f, n);
    gpu->fill(a.g, -0.0f, n);
    pair_same(gpu, a, n, s, "fill -0");
    cpu->fill(a.c, 1.5e-40f, n);   /* a denormal: not flushed to zero */
    gpu->fill(a.g, 1.5e-40f, n);
    pair_same(gpu, a, n, s, "fill with a denormal");

    memcpy(a.c, x, n * sizeof(float));
    gpu->upload(a.g, x, n);
    cpu->swap(a.c, b.c, n);
    gpu->swap(a.g, b.g, n);
    pair_same(gpu, a, n, s, "swap (a)");
    pair_same(gpu, b, n, s, "swap (b)");

    cpu->scale(a.c, 0.37f, n);
    gpu->scale(a.g, 0.37f, n);
    pair_same(gpu, a, n, s, "scale");

    cpu->axpy(a.c, -1.25f, b.c, n);
    gpu->axpy(a.g, -1.25f, b.g, n);
    pair_same(gpu, a, n, s, "axpy");
    cpu->axpy(a.c, 1.0f, b.c, n);   /* the trainer's gradient sum */
    gpu->axpy(a.g, 1.0f, b.g, n);
    pair_same(gpu, a, n, s, "axpy by 1");

    cpu->lerp(a.c, 0.9f, 0.1f, b.c, n);
    gpu->lerp(a.g, 0.9f, 0.1f, b.g, n);
    pair_same(gpu, a, n, s, "lerp");

    /* tiny values: products and sums in the denormal range keep their bits */
    for (size_t i = 0; i < n; i++) s[i] = x[i] * 1e-38f;
    memcpy(a.c, s, n * sizeof(float));
    gpu->upload(a.g, s, n);
    cpu->lerp(a.c, 0.3f, 0.7f, b.c, n);
    cpu->scale(a.c, 1e-3f, n);
    gpu->lerp(a.g, 0.3f, 0.7f, b.g, n);
    gpu->scale(a.g, 1e-3f, n);
    pair_same(gpu, a, n, s, "lerp and scale into denormals");

    /* reductions: x with itself and with y; a holds x again */
    memcpy(a.c, x, n * sizeof(float));
    gpu->upload(a.g, x, n);
    gpu->upload(b.g, y, n);
    double ss = gpu->sumsq(a.g, n), ss2 = gpu->sumsq(a.g, n), xx = gpu->dot(a.g, a.g, n);
    double xy = gpu->dot(a.g, b.g, n), xy2 = gpu->dot(a.g, b.g, n);
    CHECK(!memcmp(&ss, &ss2, sizeof ss) && !memcmp(&xy, &xy2, sizeof xy),
          "reductions give the same bits twice, n %zu: sumsq %.17g %.17g, dot %.17g %.17g", n, ss, ss2, xy, xy2);
    CHECK(!memcmp(&ss, &xx, sizeof ss), "sumsq(x) = dot(x, x) bit for bit, n %zu", n);
    double rss = dot_ref(x, x, n), rxy = dot_ref(x, y, n);
    /* 1e-12 of the sum, or of the sum of |products| for a dot whose terms
     * cancel (its rounding is relative to the terms, not to the result) */
    double absxy = 0.0;
    for (size_t i = 0; i < n; i++) absxy += fabs((double)x[i] * y[i]);
    CHECK_NEAR(ss, rss, 0.0, 1e-12, "GPU sumsq against the extended-precision sum");
    CHECK(fabs(xy - rxy) <= 1e-12 * absxy, "GPU dot against the extended-precision sum, n %zu: %.17g vs %.17g", n,
          xy, rxy);
    CHECK_NEAR(cpu->sumsq(a.c, n), rss, 0.0, 1e-12, "CPU sumsq against the same sum (the reference's own check)");

    pair_free(gpu, a);
    pair_free(gpu, b);
    free(x); free(y); free(s);
}

/* Every argument distinct, so that a field passed to the wrong parameter
 * shows; each update applied twice (the second step reads the first's
 * moments), with a clipping scale and without (the CPU's gscale == 1 path). */
static void test_optimizers(const hpt_device *gpu, size_t n) {
    const hpt_device *cpu = &hpt_device_cpu;
    float *r = host(n), *s = host(n);
    fill_random(r, n, 4);
    pair p = pair_new(gpu, r, n);
    fill_random(r, n, 5);
    pair g = pair_new(gpu, r, n);
    fill_random(r, n, 6);
    pair m = pair_new(gpu, r, n);
    fill_random(r, n, 7);
    for (size_t i = 0; i < n; i++) r[i] = r[i] * r[i];   /* a second moment is >= 0 */
    pair v = pair_new(gpu, r, n);

    for (int k = 0; k < 2; k++) {
        const hpt_dev_adamw a = {.gscale = k ? 1.0f : 0.5f, .lr = 3e-3f, .beta1 = 0.8f, .beta2 = 0.95f,
                                 .eps = 1e-6f, .weight_decay = 0.1f, .t = 7 + k};
        cpu->adamw(p.c, g.c, m.c, v.c, n, &a);
        gpu->adamw(p.g, g.g, m.g, v.g, n, &a);
        const char *what = k ? "adamw (gscale 1): params" : "adamw (gscale 0.5): params";
        pair_same(gpu, p, n, s, what);
        pair_same(gpu, m, n, s, "adamw: m");
        pair_same(gpu, v, n, s, "adamw: v");
    }

    /* schedule-free: y (p), g, z, x (m's buffers reused), v */
    fill_random(r, n, 8);
    pair z = pair_new(gpu, r, n);
    for (int k = 0; k < 2; k++) {
        const hpt_dev_sf a = {.gscale = k ? 1.0f : 0.75f, .lr = 2e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                              .weight_decay = 0.05f, .c = 0.125f, .t = 5 + k};
        cpu->sf_adamw(p.c, g.c, z.c, m.c, v.c, n, &a);
        gpu->sf_adamw(p.g, g.g, z.g, m.g, v.g, n, &a);
        pair_same(gpu, p, n, s, "sf_adamw: y");
        pair_same(gpu, z, n, s, "sf_adamw: z");
        pair_same(gpu, m, n, s, "sf_adamw: x");
        pair_same(gpu, v, n, s, "sf_adamw: v");
    }

    /* the outer step's three forms: a given displacement; its own; its own
     * with a = b = 0 (theta untouched, even a -0) */
    const float ab[3][2] = {{0.4f, 0.9f}, {0.4f, 0.9f}, {0.0f, 0.0f}};
    for (int form = 0; form < 3; form++) {
        fill_random(r, n, 9 + form);
        if (form == 2 && n) r[0] = -0.0f;
        memcpy(p.c, r, n * sizeof(float)); gpu->upload(p.g, r, n);
        fill_random(r, n, 12 + form);
        memcpy(z.c, r, n * sizeof(float)); gpu->upload(z.g, r, n);
        cpu->outer_step(p.c, z.c, m.c, form == 0 ? g.c : NULL, n, 0.6f, ab[form][0], ab[form][1]);
        gpu->outer_step(p.g, z.g, m.g, form == 0 ? g.g : NULL, n, 0.6f, ab[form][0], ab[form][1]);
        const char *name[3] = {"outer_step (given d): ", "outer_step (own d): ", "outer_step (a = b = 0): "};
        char what[64];
        snprintf(what, sizeof what, "%stheta", name[form]);
        pair_same(gpu, p, n, s, what);
        snprintf(what, sizeof what, "%sanchor", name[form]);
        pair_same(gpu, z, n, s, what);
        snprintf(what, sizeof what, "%su", name[form]);
        pair_same(gpu, m, n, s, what);
    }

    /* the schedule-free outer step, with a departure and without (x, z, y
     * untouched, even a -0): x (p), z, y (g), anchor (m), u (v) */
    for (int stay = 0; stay < 2; stay++) {
        pair *bufs[5] = {&p, &z, &g, &m, &v};
        for (int k = 0; k < 5; k++) {
            fill_random(r, n, 20 + 5 * stay + k);
            if (stay && k == 2 && n) r[0] = -0.0f;
            memcpy(bufs[k]->c, r, n * sizeof(float));
            gpu->upload(bufs[k]->g, r, n);
        }
        const float a = stay ? 0.0f : 0.4f, b = stay ? 0.0f : 0.9f;
        cpu->sf_outer_step(p.c, z.c, g.c, m.c, v.c, n, 0.6f, a, b);
        gpu->sf_outer_step(p.g, z.g, g.g, m.g, v.g, n, 0.6f, a, b);
        const char *names[5] = {"x", "z", "y", "anchor", "u"};
        for (int k = 0; k < 5; k++) {
            char what[64];
            snprintf(what, sizeof what, "sf_outer_step (%s): %s", stay ? "a = b = 0" : "a departure", names[k]);
            pair_same(gpu, *bufs[k], n, s, what);
        }
    }
    pair_free(gpu, p); pair_free(gpu, g); pair_free(gpu, m); pair_free(gpu, v); pair_free(gpu, z);
    free(r); free(s);
}

int main(void) {
    hpt_device *gpu = NULL;
    const char *why = hpt_device_cuda.unavailable();
    if (why) {
        /* CI and every machine without a GPU: nothing to test, and not a failure */
        printf("test_device_cuda: skip: %s\n", why);
        CHECK(hpt_device_open("cuda", NULL, &gpu) == HPT_ERR_ARG && !gpu, "the open refuses it with the reason");
        CHECK(strstr(hpt_errmsg(), "--device cuda: ") && strstr(hpt_errmsg(), why), "the reason: %s", hpt_errmsg());
        return TEST_REPORT("test_device_cuda");
    }
    CHECK(hpt_device_open("cuda", NULL, &gpu) == HPT_OK && gpu && !strcmp(gpu->name, "cuda") && gpu->nn,
          "an instance of the plugin's own row: %s", hpt_errmsg());
    if (!gpu) return TEST_REPORT("test_device_cuda");
    hpt_set_threads(2);
    /* HPT_CUDA_TEST_MAX_N bounds the sizes: compute-sanitizer runs the
     * kernels tens of times slower (bench/gpu_session.sh gives it 100003) */
    const char *max_env = getenv("HPT_CUDA_TEST_MAX_N");
    size_t max_n = max_env ? strtoull(max_env, NULL, 10) : (size_t)-1;
    const size_t sizes[] = {1, 17, 1000, 100003, 10000019};
    for (int i = 0; i < 5 && sizes[i] <= max_n; i++) {
        test_memory(gpu, sizes[i]);
        test_elementwise(gpu, sizes[i]);
        test_optimizers(gpu, sizes[i]);
    }
    /* n = 0 launches nothing and reads nothing */
    float *a = gpu->alloc(gpu, 0);
    CHECK(a != NULL, "alloc(0) gives a pointer, as the CPU row");
    gpu->fill(a, 1.0f, 0);
    CHECK(gpu->sumsq(a, 0) == 0.0 && gpu->dot(a, a, 0) == 0.0, "empty reductions are 0");
    gpu->free(gpu, a);
    /* out of memory is NULL and a message, not an abort */
    float *huge = gpu->alloc(gpu, (size_t)1 << 46);   /* 256 TiB */
    CHECK(huge == NULL && strstr(hpt_errmsg(), "on the GPU"), "an impossible alloc is NULL: %s", hpt_errmsg());
    float *after = gpu->alloc(gpu, 16);
    CHECK(after != NULL, "and the device still works after it");
    gpu->fill(after, 2.0f, 16);
    CHECK(gpu->sumsq(after, 16) == 64.0, "a reduction after the failed alloc");
    gpu->free(gpu, after);
    hpt_device_close(gpu);
    return TEST_REPORT("test_device_cuda");
}
