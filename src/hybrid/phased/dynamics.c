/*
 * dynamics.c — the RSSM-lite ensemble, its online training, forecasts,
 * scoring and residual corrector (design and contracts in dynamics.h).
 *
 * Reading order: small vector helpers; the GRU cell; one member's window
 * pass (forward + backward of the negative ELBO); init; observe (score,
 * correct, train); forecast; confidence and state accessors.
 *
 * Numerics: plain loops. Dot products use eight fixed partial sums, so they
 * vectorise without -ffast-math and give the same bits at any optimisation
 * level (-std=c11 also turns off FMA contraction); elementwise loops carry
 * `omp simd`, which changes no bits. No threads: at these sizes (a few
 * thousand weights per member) they would cost more than they save.
 * Results are the same bits at -O0, -O2 and -O3 -march=native, with and
 * without OpenMP (a CRC of 400 steps of forecasts and state, compared across
 * those builds when this was written).
 */
#include "dynamics.h"
#include "../../kernels/vmath.h"
#include "../../train/optim.h"

#include <math.h>
#include <string.h>

/* Clamp ranges of the log-std outputs: prior/posterior sigma in [e^-5, e^2],
 * observation sigma in [e^-5, e^1] (normalised units: targets have std ~1). */
#define LS_MIN (-5.0f)
#define LS_MAX 2.0f
#define LSO_MAX 1.0f
#define TARGET_FLOOR 1e-3f      /* smallest target std divided by (raw units) */
#define TARGET_WINDOW 256.0f    /* target statistics: exact for 256 steps, then an EMA */
#define SCORE_RATE 0.1f         /* EMA rate of the per-bucket scores, per step */
#define EFFECT_RATE 0.05f       /* EMA rate of the corrector's effect, per step */
#define RLS_P0 1.0f             /* initial corrector covariance (ridge prior on w) */

/* ---------------------------------------------------------------- helpers */

/* Dot product with eight independent partial sums in a fixed order: the
 * compiler vectorises it without reassociating, so it is fast and exact to
 * the bit across builds. */
static float dotf(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        #pragma omp simd
        for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
    }
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Elementwise loops carry `omp simd` (as the kernels do): each element is
 * computed on its own, so vectorising changes no bits; without OpenMP the
 * pragma is ignored and the result is the same. */
static void axpy(float *restrict y, float a, const float *restrict x, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* out (rows) = W[:, :ncol] x + b; W row-major with row stride ld; b may be NULL. */
static void matvec(float *out, const float *W, int ld, const float *x, int ncol, const float *b, int rows) {
    for (int i = 0; i < rows; i++) out[i] = (b ? b[i] : 0.0f) + dotf(W + (size_t)i * ld, x, ncol);
}

/* Backward of matvec: dW[i, :ncol] += dout[i] x; db += dout; dx (ncol) += W[:, :ncol]^T dout.
 * Any of dW, db, dx may be NULL. */
static void matvec_back(float *dW, float *db, float *dx, const float *dout, const float *W, int ld,
                        const float *x, int ncol, int rows) {
    for (int i = 0; i < rows; i++) {
        float g = dout[i];
        if (g == 0.0f) continue;
        if (dW) axpy(dW + (size_t)i * ld, g, x, ncol);
        if (db) db[i] += g;
        if (dx) axpy(dx, g, W + (size_t)i * ld, ncol);
    }
}

static float sigmoidf(float x) { return 1.0f / (1.0f + hpt_expf(-x)); }
static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* n standard normals, Box-Muller in pairs (both outputs used, float
 * transcendentals): base's hpt_rng_normal spends a double log and cos per
 * value, which was a tenth of a forecast's time. */
static void fill_normal(hpt_rng *r, float *out, int n) {
    for (int i = 0; i < n; i += 2) {
        float u1 = ((hpt_rng_u32(r) >> 8) + 1.0f) / 16777216.0f;   /* (0, 1]: log stays finite */
        float u2 = (hpt_rng_u32(r) >> 8) / 16777216.0f;
        float rad = sqrtf(-2.0f * logf(u1)), s, c;
        sincosf(6.28318531f * u2, &s, &c);
        out[i] = rad * c;
        if (i + 1 < n) out[i + 1] = rad * s;
    }
}

/* Poisson(1) draw (Knuth), capped at 4: online bagging's weight of a sample. */
static float poisson1(hpt_rng *r) {
    const float L = 0.36787944f;
    float p = 1.0f;
    int k = 0;
    do { k++; p *= hpt_rng_uniform(r); } while (p > L && k < 5);
    return (float)(k - 1);
}

int hpt_dyn_bucket_of(int h) {
    int b = 0;
    while (h > 1) { h >>= 1; b++; }
    return b;
}

/* Standard deviation column c of the targets is divided by. */
static float target_sd(const hpt_dyn *d, int c) {
    float sd = sqrtf(d->tvar[c]);
    return sd > TARGET_FLOOR ? sd : TARGET_FLOOR;
}

/* ---------------------------------------------------------------- GRU cell */

void hpt_gru_forward(float *h_out, float *cache, const float *x, const float *h,
                     const float *wx, const float *wh, const float *bx, const float *bh, int D, int H) {
    const int G = 3 * H;
    float *r = cache, *z = cache + H, *hn = cache + 2 * H, *n = cache + 3 * H, *ax = cache + 4 * H;
    /* Weights are stored input-major (a column of 3H gate rows per input), so
     * each input adds one contiguous 3H-long axpy: long vectors, no
     * horizontal sums. h's contributions land directly in [r z hn]. */
    memcpy(ax, bx, G * sizeof(float));
    memcpy(cache, bh, G * sizeof(float));
    for (int j = 0; j < D; j++) axpy(ax, x[j], wx + (size_t)j * G, G);
    for (int j = 0; j < H; j++) axpy(cache, h[j], wh + (size_t)j * G, G);
    #pragma omp simd
    for (int i = 0; i < H; i++) {
        r[i] = sigmoidf(ax[i] + r[i]);
        z[i] = sigmoidf(ax[H + i] + z[i]);
        n[i] = hpt_tanhf(ax[2 * H + i] + r[i] * hn[i]);
        h_out[i] = (1.0f - z[i]) * n[i] + z[i] * h[i];
    }
}

void hpt_gru_backward(float *dx, float *dh, float *dwx, float *dwh, float *dbx, float *dbh,
                      const float *dout, const float *cache, const float *x, const float *h,
                      const float *wx, const float *wh, float *work, int D, int H) {
    const int G = 3 * H;
    const float *r = cache, *z = cache + H, *hn = cache + 2 * H, *n = cache + 3 * H;
    /* gradients of the pre-activations: x side [r z n], h side [r z hn] */
    float *ax = work, *ah = work + G;
    #pragma omp simd
    for (int i = 0; i < H; i++) {
        float g = dout[i];
        float dn = g * (1.0f - z[i]);
        float dz = g * (h[i] - n[i]);
        float dan = dn * (1.0f - n[i] * n[i]);          /* through tanh */
        float dar = dan * hn[i] * r[i] * (1.0f - r[i]);  /* r gates hn, through its sigmoid */
        float daz = dz * z[i] * (1.0f - z[i]);
        ax[i] = ah[i] = dar;
        ax[H + i] = ah[H + i] = daz;
        ax[2 * H + i] = dan;
        ah[2 * H + i] = dan * r[i];                      /* into Wh_n h + bh_n */
        dh[i] += g * z[i];                               /* the direct path z * h */
    }
    #pragma omp simd
    for (int i = 0; i < G; i++) { dbx[i] += ax[i]; dbh[i] += ah[i]; }
    for (int j = 0; j < D; j++) {
        axpy(dwx + (size_t)j * G, x[j], ax, G);
        if (dx) dx[j] += dotf(wx + (size_t)j * G, ax, G);
    }
    for (int j = 0; j < H; j++) {
        axpy(dwh + (size_t)j * G, h[j], ah, G);
        dh[j] += dotf(wh + (size_t)j * G, ah, G);
    }
}

/* ---------------------------------------------------------------- the window pass */

/* Randomized prior function (Osband et al. 2018): member m's prediction is
 * its network's plus prior_scale * P_m x, with P_m fixed and random. On the
 * inputs it trains on, the network learns to cancel P_m x; off them, the
 * members' different P_m no longer cancel and their forecasts spread. Init
 * and bootstrap alone leave saturated GRUs agreeing on far-out inputs. */
static void prior_fn(const hpt_dyn *d, int m, const float *x, float *y) {
    if (d->cfg.prior_scale == 0.0f) return;
    const float *P = d->rpf + (size_t)m * d->T * d->D;
    for (int c = 0; c < d->T; c++) y[c] += d->cfg.prior_scale * dotf(P + (size_t)c * d->D, x, d->D);
}

/* Window of the training pass: predictions from steps k0 .. last-1 against
 * the targets of steps k0+1 .. last. The ring holds W+2 steps because the
 * pass reads x_{k0} .. x_last (W+1 of them) and starts from the state after
 * step k0-1, one further back. */
static void window(const hpt_dyn *d, int64_t *k0, int *nw) {
    int64_t last = d->s.step - 1;
    int64_t lo = last - d->W;
    if (lo < 0) lo = 0;
    *k0 = lo;
    *nw = last > lo ? (int)(last - lo) : 0;
}

/* A member's parameters (or their gradients) by name, from the layout. */
typedef struct member_view {
    float *wx, *wh, *bx, *bh;    /* the GRU */
    float *wp, *bp, *wq, *bq;    /* the prior and posterior heads */
    float *wd, *bd, *ls;         /* the decoder and its log sigmas */
} member_view;

static member_view member_at(const hpt_dyn_layout *L, float *p) {
    return (member_view){p + L->wx, p + L->wh, p + L->bx, p + L->bh, p + L->wp, p + L->bp,
                         p + L->wq, p + L->bq, p + L->wd, p + L->bd, p + L->ls};
}

/* Forward through step i of the window (step k = k0 + i): the GRU, the
 * standardised target, the prior and posterior heads, the sampled latent,
 * the decoder. Caches what the backward pass reads; returns the step's
 * weighted term of the objective. */
static double forward_step(hpt_dyn *d, int m, const member_view *v, int64_t k0, int i) {
    const int D = d->D, H = d->H, Z = d->Z, T = d->T, R = d->R;
    const float beta = d->cfg.kl_weight, fnats = d->cfg.free_nats;
    int64_t k = k0 + i;
    const float *x = d->xr + (size_t)(k % R) * D;
    float *h = d->c_h + (size_t)(i + 1) * H;
    hpt_gru_forward(h, d->c_gate + (size_t)i * 7 * H, x, d->c_h + (size_t)i * H, v->wx, v->wh, v->bx, v->bh, D, H);

    /* the target of this step, standardised with today's statistics (the
     * ring keeps raw values: old rows follow drifting scales) */
    const float *yraw = d->yr + (size_t)((k + 1) % R) * T;
    float *yt = d->c_yt + (size_t)i * T, *mk = d->c_mk + (size_t)i * T;
    for (int c = 0; c < T; c++) {
        mk[c] = isfinite(yraw[c]) ? 1.0f : 0.0f;
        yt[c] = mk[c] > 0 ? (yraw[c] - d->tmean[c]) / target_sd(d, c) : 0.0f;
    }
    float w = d->wr[(size_t)((k + 1) % R) * d->E + m];
    d->c_w[i] = w;

    float *pr = d->c_pr + (size_t)i * 2 * Z, *po = d->c_po + (size_t)i * 2 * Z;
    float *in = d->c_in + (size_t)i * (H + T), *zz = d->c_z + (size_t)i * Z;
    matvec(pr, v->wp, H, h, H, v->bp, 2 * Z);
    memcpy(in, h, H * sizeof(float));
    memcpy(in + H, yt, T * sizeof(float));
    matvec(po, v->wq, H + T, in, H + T, v->bq, 2 * Z);
    const float *eps = d->noise + ((size_t)m * d->W + i) * Z;
    double kl = 0.0;
    for (int j = 0; j < Z; j++) {
        float lq = clampf(po[Z + j], LS_MIN, LS_MAX), lp = clampf(pr[Z + j], LS_MIN, LS_MAX);
        float sq = hpt_expf(lq), dm = po[j] - pr[j];
        zz[j] = po[j] + sq * eps[j];
        kl += lp - lq + (sq * sq + dm * dm) * hpt_expf(-2.0f * lp) * 0.5f - 0.5f;
    }
    d->c_kl[i] = (float)kl;
    memcpy(d->v_hz, h, H * sizeof(float));
    memcpy(d->v_hz + H, zz, Z * sizeof(float));
    float *yh = d->c_yh + (size_t)i * T;
    matvec(yh, v->wd, H + Z, d->v_hz, H + Z, v->bd, T);
    prior_fn(d, m, x, yh);
    double rec = 0.0;
    for (int c = 0; c < T; c++) {
        if (mk[c] == 0) continue;
        float lo = clampf(v->ls[c], LS_MIN, LSO_MAX), e = yh[c] - yt[c];
        rec += 0.5 * e * e * hpt_expf(-2.0f * lo) + lo;
    }
    return w * (rec + beta * (kl > fnats ? kl : fnats));
}

/* Backward through step i (gradient weight gw): adds into the gradients g
 * and carries dL/dh back to the previous step's state (d->v_carry). */
static void backward_step(hpt_dyn *d, int m, const member_view *v, const member_view *g, int64_t k0, int i, float gw) {
    const int D = d->D, H = d->H, Z = d->Z, T = d->T, R = d->R;
    const float beta = d->cfg.kl_weight, bal = d->cfg.kl_balance, fnats = d->cfg.free_nats;
    float *carry = d->v_carry, *dh = d->v_dh, *dhz = d->v_dhz, *dpo = d->v_dpo, *dpr = d->v_dpr;
    int64_t k = k0 + i;
    const float *h = d->c_h + (size_t)(i + 1) * H;
    const float *pr = d->c_pr + (size_t)i * 2 * Z, *po = d->c_po + (size_t)i * 2 * Z;
    const float *in = d->c_in + (size_t)i * (H + T), *zz = d->c_z + (size_t)i * Z;
    const float *yt = d->c_yt + (size_t)i * T, *mk = d->c_mk + (size_t)i * T, *yh = d->c_yh + (size_t)i * T;
    const float *eps = d->noise + ((size_t)m * d->W + i) * Z;
    memcpy(dh, carry, H * sizeof(float));

    /* reconstruction: 0.5 e^2 / sigma^2 + log sigma per observed column */
    float dy[64 + 1];
    for (int c = 0; c < T; c++) {
        dy[c] = 0.0f;
        if (mk[c] == 0) continue;
        float lo = clampf(v->ls[c], LS_MIN, LSO_MAX), e = yh[c] - yt[c], iv = hpt_expf(-2.0f * lo);
        dy[c] = gw * e * iv;
        if (v->ls[c] > LS_MIN && v->ls[c] < LSO_MAX) g->ls[c] += gw * (1.0f - e * e * iv);
    }
    memcpy(d->v_hz, h, H * sizeof(float));
    memcpy(d->v_hz + H, zz, Z * sizeof(float));
    memset(dhz, 0, (H + Z) * sizeof(float));
    matvec_back(g->wd, g->bd, dhz, dy, v->wd, H + Z, d->v_hz, H + Z, T);
    axpy(dh, 1.0f, dhz, H);

    /* z = mu_q + sigma_q eps, and the KL (balanced between its two sides;
     * below the free nats it is a constant) */
    float gk = d->c_kl[i] > fnats ? gw * beta : 0.0f;
    float gq = gk * 2.0f * (1.0f - bal), gp = gk * 2.0f * bal;
    for (int j = 0; j < Z; j++) {
        float lq = clampf(po[Z + j], LS_MIN, LS_MAX), lp = clampf(pr[Z + j], LS_MIN, LS_MAX);
        float sq = hpt_expf(lq), ivp = hpt_expf(-2.0f * lp), dm = po[j] - pr[j];
        float dz = dhz[H + j];
        dpo[j] = dz + gq * dm * ivp;
        dpr[j] = -gp * dm * ivp;
        int inq = po[Z + j] > LS_MIN && po[Z + j] < LS_MAX, inp = pr[Z + j] > LS_MIN && pr[Z + j] < LS_MAX;
        dpo[Z + j] = inq ? dz * eps[j] * sq + gq * (sq * sq * ivp - 1.0f) : 0.0f;
        dpr[Z + j] = inp ? gp * (1.0f - (sq * sq + dm * dm) * ivp) : 0.0f;
    }
    /* posterior head on [h; y~] (only the h part has a gradient to pass on), prior head on h */
    matvec_back(g->wq, g->bq, NULL, dpo, v->wq, H + T, in, H + T, 2 * Z);
    matvec_back(NULL, NULL, dh, dpo, v->wq, H + T, in, H, 2 * Z);
    matvec_back(g->wp, g->bp, dh, dpr, v->wp, H, h, H, 2 * Z);

    /* through the GRU step to the previous state */
    memset(carry, 0, H * sizeof(float));
    hpt_gru_backward(NULL, carry, g->wx, g->wh, g->bx, g->bh, dh, d->c_gate + (size_t)i * 7 * H,
                     d->xr + (size_t)(k % R) * D, d->c_h + (size_t)i * H, v->wx, v->wh, d->v_work, D, H);
}

/* The objective: mean over the window of w_k * (reconstruction NLL of the
 * observed target columns + kl_weight * max(KL, free_nats)), w_k the
 * member's bootstrap weight of that target. The mean is over steps, not over
 * weights, so a member's effective learning rate does not depend on how many
 * zeros its bootstrap drew. With grad, the backward pass runs newest step
 * first, carrying dL/dh back through the GRU. */
double hpt_dyn_member_loss(hpt_dyn *d, int m, int grad) {
    const int H = d->H, R = d->R;
    const hpt_dyn_layout *L = &d->L;
    const member_view v = member_at(L, d->params + (size_t)m * L->n);
    int64_t k0;
    int nw;
    window(d, &k0, &nw);
    if (nw == 0) {
        if (grad) memset(d->grads + (size_t)m * L->n, 0, L->n * sizeof(float));
        return 0.0;
    }
    if (k0 > 0) memcpy(d->c_h, d->hr + ((size_t)m * R + (size_t)((k0 - 1) % R)) * H, H * sizeof(float));
    else memset(d->c_h, 0, H * sizeof(float));
    double total = 0.0;
    for (int i = 0; i < nw; i++) total += forward_step(d, m, &v, k0, i);
    if (!grad) return total / nw;

    float *gp = d->grads + (size_t)m * L->n;
    memset(gp, 0, L->n * sizeof(float));
    const member_view g = member_at(L, gp);
    memset(d->v_carry, 0, H * sizeof(float));
    for (int i = nw - 1; i >= 0; i--) backward_step(d, m, &v, &g, k0, i, d->c_w[i] / nw);
    return total / nw;
}

/* ---------------------------------------------------------------- init */

void hpt_dyn_config_default(hpt_dyn_config *c, int n_in, int n_groups) {
    memset(c, 0, sizeof *c);
    c->n_in = n_in;
    c->n_groups = n_groups;
    c->ensemble = 3;
    c->hidden = 32;
    c->latent = 8;
    c->bptt = 16;
    c->samples = 4;
    c->max_horizon = 32;
    c->lr = 3e-3f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->grad_clip = 1.0f;
    c->kl_weight = 1.0f;
    c->kl_balance = 0.8f;
    c->free_nats = 0.0f;
    c->bootstrap = 1;
    c->prior_scale = 0.5f;
    c->tol_loss = 0.05f;
    c->tol_update = 0.1f;
    c->evidence = 20.0f;
    c->rls_forget = 0.995f;
    c->apply_correction = 1;
    c->seed = 1;
}

#define CFG_RANGE(field, lo, hi) \
    if (!(c->field >= (lo) && c->field <= (hi))) \
        return hpt_fail(HPT_ERR_ARG, "dynamics: " #field " must be in [%g, %g] (got %g)", \
                        (double)(lo), (double)(hi), (double)c->field)

static hpt_status check_config(const hpt_dyn_config *c) {
    CFG_RANGE(n_in, HPT_ENC_NFEAT, 4096);
    CFG_RANGE(n_groups, 0, 64);
    CFG_RANGE(ensemble, 1, HPT_DYN_MAX_ENSEMBLE);
    CFG_RANGE(hidden, 1, 1024);
    CFG_RANGE(latent, 1, 256);
    CFG_RANGE(bptt, 1, 1024);
    CFG_RANGE(samples, 1, 256);
    CFG_RANGE(max_horizon, 1, 4096);
    CFG_RANGE(lr, 0.0, 1.0);
    CFG_RANGE(beta1, 0.0, 0.999999);
    CFG_RANGE(beta2, 0.0, 0.999999999);
    CFG_RANGE(eps, 1e-12, 1.0);
    CFG_RANGE(grad_clip, 0.0, 1e9);
    CFG_RANGE(kl_weight, 0.0, 1e3);
    CFG_RANGE(kl_balance, 0.0, 1.0);
    CFG_RANGE(free_nats, 0.0, 1e3);
    CFG_RANGE(prior_scale, 0.0, 1e3);
    CFG_RANGE(tol_loss, 1e-9, 1e9);
    CFG_RANGE(tol_update, 1e-9, 1e9);
    CFG_RANGE(evidence, 0.0, 1e9);
    CFG_RANGE(rls_forget, 0.5, 1.0);
    return HPT_OK;
}

static void init_member(hpt_dyn *d, int m) {
    const int D = d->D, H = d->H, Z = d->Z, T = d->T;
    const hpt_dyn_layout *L = &d->L;
    float *p = d->params + (size_t)m * L->n;
    hpt_rng *r = &d->s.rng[m];
    /* GRU: PyTorch's U(-1/sqrt(H), 1/sqrt(H)) for weights and biases (the
     * layout is transposed, the distribution is the same). */
    float k = 1.0f / sqrtf((float)H);
    for (size_t i = 0; i < (size_t)3 * H * D; i++) p[L->wx + i] = k * (2.0f * hpt_rng_uniform(r) - 1.0f);
    for (size_t i = 0; i < (size_t)3 * H * H; i++) p[L->wh + i] = k * (2.0f * hpt_rng_uniform(r) - 1.0f);
    for (int i = 0; i < 3 * H; i++) p[L->bx + i] = k * (2.0f * hpt_rng_uniform(r) - 1.0f);
    for (int i = 0; i < 3 * H; i++) p[L->bh + i] = k * (2.0f * hpt_rng_uniform(r) - 1.0f);
    /* Heads start small: prior and posterior near N(0, 1) (biases 0: mean 0,
     * log-std 0), so the first KL terms are near zero; decoder at unit
     * fan-in scale, observation sigma 1 (the targets' own std). */
    float kp = 0.1f / sqrtf((float)H), kq = 0.1f / sqrtf((float)(H + T)), kd = 1.0f / sqrtf((float)(H + Z));
    for (size_t i = 0; i < (size_t)2 * Z * H; i++) p[L->wp + i] = kp * hpt_rng_normal(r);
    for (size_t i = 0; i < (size_t)2 * Z * (H + T); i++) p[L->wq + i] = kq * hpt_rng_normal(r);
    for (size_t i = 0; i < (size_t)T * (H + Z); i++) p[L->wd + i] = kd * hpt_rng_normal(r);
    /* the fixed prior function: unit-variance output on unit-variance inputs */
    float *P = d->rpf + (size_t)m * T * D;
    for (size_t i = 0; i < (size_t)T * D; i++) P[i] = hpt_rng_normal(r) / sqrtf((float)D);
}

/* The state and scratch arenas' slices, carved by these size tables (type,
 * name, elements of 4 bytes; the fields are described in dynamics.h). The
 * state arena is saved byte for byte (hpt_dyn_regions): its slices keep
 * their order. The forecast store's integer columns live in the float arena:
 * same size, and the memory is only ever accessed as int32. */
#define DYN_STATE(X)                                                                  \
    X(float, xr, (size_t)R * D) X(float, yr, (size_t)R * T) X(float, wr, (size_t)R * E) \
    X(float, hr, (size_t)E * R * H) X(float, hcur, (size_t)E * H)                       \
    X(float, tmean, T) X(float, tvar, T) X(float, tcount, T)                            \
    X(int32_t, fc_step, F) X(int32_t, fc_len, F) X(float, fc_x, (size_t)F * D)          \
    X(float, fc_raw, (size_t)F * HM * T) X(float, fc_mean, (size_t)F * HM * T)          \
    X(float, fc_std, (size_t)F * HM * T)                                                \
    X(float, cal_n, (size_t)NB * T) X(float, cal_in, (size_t)NB * T)                    \
    X(float, cal_cov, (size_t)NB * T) X(float, cal_mse, (size_t)NB * T)                 \
    X(float, cal_z2, (size_t)NB * T) X(float, cal_rraw, (size_t)NB * T)                 \
    X(float, cal_rcorr, (size_t)NB * T) X(float, eff_raw, T) X(float, eff_corr, T)      \
    X(float, rls_w, (size_t)NB * T * NU) X(float, rls_p, (size_t)NB * NU * NU)          \
    X(float, last_dis, (size_t)HM * T) X(float, last_corr, (size_t)HM * T)              \
    X(float, rpf, (size_t)E * T * D) X(float, cor_steps, (size_t)NB * T)

#define DYN_SCRATCH(X)                                                                \
    X(float, noise, (size_t)E * W * Z) X(float, c_h, (size_t)(W + 1) * H)               \
    X(float, c_gate, (size_t)W * 7 * H) X(float, c_pr, (size_t)W * 2 * Z)               \
    X(float, c_po, (size_t)W * 2 * Z) X(float, c_z, (size_t)W * Z)                      \
    X(float, c_in, (size_t)W * (H + T)) X(float, c_yh, (size_t)W * T)                   \
    X(float, c_yt, (size_t)W * T) X(float, c_mk, (size_t)W * T) X(float, c_w, W)        \
    X(float, c_kl, W) X(float, v_hz, H + Z) X(float, v_dhz, H + Z) X(float, v_carry, H) \
    X(float, v_dh, H) X(float, v_h1, H) X(float, v_h2, H) X(float, v_dpo, 2 * Z)        \
    X(float, v_dpr, 2 * Z) X(float, v_pr, 2 * Z) X(float, v_z, Z + 1) X(float, v_sp, Z) \
    X(float, v_pf, T) X(float, v_feat, D) X(float, v_cache, 7 * H) X(float, v_work, 6 * H) \
    X(float, v_u, NU) X(float, v_pu, NU) X(float, acc, (size_t)7 * NB * T)              \
    X(float, f_mu, (size_t)E * S * HM * T) X(float, f_var, (size_t)E * S * HM * T)      \
    X(float, s_u, (size_t)HM * NU) X(float, s_r, (size_t)HM * T) X(float, s_b, HM)

_Static_assert(sizeof(int32_t) == sizeof(float), "int32 slices share the float arenas");

#define DYN_DIMS_                                                                     \
    const int D = d->D, H = d->H, Z = d->Z, T = d->T, E = d->E, W = d->W, S = d->S;    \
    const int HM = d->HM, R = d->R, F = d->F, NB = d->NB, NU = d->NU;                   \
    (void)D; (void)H; (void)Z; (void)T; (void)E; (void)W; (void)S; (void)HM; (void)R;  \
    (void)F; (void)NB; (void)NU
#define SIZE_(type, name, size) size,
#define COUNT_(type, name, size) +1
#define SET_(type, name, size) d->name = (type *)slice[i++];

static float *carve_state(hpt_dyn *d) {
    DYN_DIMS_;
    size_t sizes[] = {DYN_STATE(SIZE_)};
    float *slice[0 DYN_STATE(COUNT_)], **ptrs[0 DYN_STATE(COUNT_)];
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) ptrs[i] = &slice[i];
    float *a = hpt_arena_carve(sizes, (int)(sizeof sizes / sizeof sizes[0]), ptrs, &d->state_n);
    if (!a) return NULL;
    int i = 0;
    DYN_STATE(SET_)
    return a;
}

static float *carve_scratch(hpt_dyn *d) {
    DYN_DIMS_;
    size_t sizes[] = {DYN_SCRATCH(SIZE_)};
    float *slice[0 DYN_SCRATCH(COUNT_)], **ptrs[0 DYN_SCRATCH(COUNT_)];
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) ptrs[i] = &slice[i];
    float *a = hpt_arena_carve(sizes, (int)(sizeof sizes / sizeof sizes[0]), ptrs, &d->scratch_n);
    if (!a) return NULL;
    int i = 0;
    DYN_SCRATCH(SET_)
    return a;
}

hpt_status hpt_dyn_init(hpt_dyn *d, const hpt_dyn_config *cfg, const hpt_encoder *enc) {
    memset(d, 0, sizeof *d);
    HPT_TRY(check_config(cfg));
    if (!enc || !enc->arena) return hpt_fail(HPT_ERR_ARG, "dynamics: an initialised encoder is required");
    d->cfg = *cfg;
    d->enc = enc;
    const int D = cfg->n_in, H = cfg->hidden, Z = cfg->latent, T = 1 + cfg->n_groups, E = cfg->ensemble;
    const int W = cfg->bptt, S = cfg->samples, HM = cfg->max_horizon;
    d->D = D; d->H = H; d->Z = Z; d->T = T; d->E = E; d->W = W; d->S = S; d->HM = HM;
    d->R = W + 2;
    d->F = HM + 1;
    d->NB = hpt_dyn_bucket_of(HM) + 1;
    d->NU = D + 3;
    const int F = d->F, NB = d->NB, NU = d->NU;

    /* member layout: one slice per member, tensors back to back, so a member
     * is one contiguous range for Adam, clipping and copies */
    hpt_dyn_layout *L = &d->L;
    size_t o = 0;
    L->wx = o; o += (size_t)3 * H * D;
    L->wh = o; o += (size_t)3 * H * H;
    L->bx = o; o += (size_t)3 * H;
    L->bh = o; o += (size_t)3 * H;
    L->wp = o; o += (size_t)2 * Z * H;
    L->bp = o; o += (size_t)2 * Z;
    L->wq = o; o += (size_t)2 * Z * (H + T);
    L->bq = o; o += (size_t)2 * Z;
    L->wd = o; o += (size_t)T * (H + Z);
    L->bd = o; o += (size_t)T;
    L->ls = o; o += (size_t)T;
    L->n = (o + 15) / 16 * 16;

    d->params_n = d->grads_n = (size_t)E * L->n;
    d->adam_n = 2 * d->params_n;
    d->params = hpt_arena_alloc(d->params_n);
    d->grads = hpt_arena_alloc(d->grads_n);
    d->adam = hpt_arena_alloc(d->adam_n);

    d->state = carve_state(d);
    d->scratch = carve_scratch(d);
    if (!d->params || !d->grads || !d->adam || !d->state || !d->scratch) {
        hpt_dyn_free(d);
        return hpt_fail(HPT_ERR_NOMEM, "dynamics: out of memory");
    }
    for (int f = 0; f < F; f++) d->fc_step[f] = -1;
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < NU; i++) d->rls_p[((size_t)b * NU + i) * NU + i] = RLS_P0;
    d->s.level_prev = NAN;

    for (int m = 0; m < E; m++) {
        /* one independent stream per member: its init, its posterior noise,
         * its bootstrap weights (the sources of the members' disagreement) */
        hpt_rng_seed(&d->s.rng[m], cfg->seed * 0x9E3779B97F4A7C15ull + (uint64_t)m + 1);
        init_member(d, m);
    }
    return HPT_OK;
}

void hpt_dyn_free(hpt_dyn *d) {
    if (!d) return;
    hpt_arena_free(d->params);
    hpt_arena_free(d->grads);
    hpt_arena_free(d->adam);
    hpt_arena_free(d->state);
    hpt_arena_free(d->scratch);
    memset(d, 0, sizeof *d);
}

/* ---------------------------------------------------------------- scoring and corrector */

/* u = [x; log(1+j)/log(1+Hmax); j/Hmax; 1] */
static void corrector_input(const hpt_dyn *d, float *u, const float *x, int j) {
    memcpy(u, x, d->D * sizeof(float));
    u[d->D] = logf(1.0f + j) / logf(1.0f + d->HM);
    u[d->D + 1] = (float)j / d->HM;
    u[d->D + 2] = 1.0f;
}

/* One RLS update of bucket b's weights for every column with input u and
 * residuals res (NaN: column missing, its weights are left alone). P is
 * shared by the columns: they have the same inputs. */
static void rls_update(hpt_dyn *d, int b, const float *u, const float *res) {
    const int NU = d->NU;
    float *P = d->rls_p + (size_t)b * NU * NU, *pu = d->v_pu;
    for (int i = 0; i < NU; i++) pu[i] = dotf(P + (size_t)i * NU, u, NU);
    float den = 1.0f + dotf(u, pu, NU);
    for (int c = 0; c < d->T; c++) {
        if (!isfinite(res[c])) continue;
        float *w = d->rls_w + ((size_t)b * d->T + c) * NU;
        float e = res[c] - dotf(w, u, NU);
        axpy(w, e / den, pu, NU);
    }
    for (int i = 0; i < NU; i++) axpy(P + (size_t)i * NU, -pu[i] / den, pu, NU);
    d->s.rls_n++;
}

/* Correction of bucket b, column c for input u. */
static float correction(const hpt_dyn *d, int b, int c, const float *u) {
    return dotf(d->rls_w + ((size_t)b * d->T + c) * d->NU, u, d->NU);
}

/* Whether forecasts in bucket b apply the correction of column c: after
 * enough scored steps for the fit to mean something, and only while its
 * prequential error beats the raw forecast's (a corrector that does not
 * help stays out). */
static int corrector_active(const hpt_dyn *d, int b, int c) {
    float need = 2.0f * d->NU > 20.0f ? 2.0f * d->NU : 20.0f;
    int k = b * d->T + c;
    return d->cfg.apply_correction && d->cor_steps[k] >= need && d->cal_rcorr[k] < d->cal_rraw[k];
}

/* Scores every stored forecast that predicted step t against the realised
 * values rv (T, absolute log loss in column 0), and fits the correctors.
 * One corrector per horizon bucket: residuals are fitted at matching
 * horizons. (One corrector over all horizons, linear in x, learned the
 * correction right for the many long horizons, where a target can be pure
 * noise, and applied it to h = 1, where it cancelled what the model had
 * learned.) Each corrector is scored prequentially: its correction for a
 * matured forecast uses the weights from before this step, so the score
 * measures predictions on data it has not fitted (all forecasts maturing now
 * share rv; updating on one before scoring the next would leak its noise). */
static void score(hpt_dyn *d, int64_t t, const float *rv) {
    const int T = d->T, NB = d->NB, HM = d->HM, NU = d->NU;
    float *a_n = d->acc, *a_in = a_n + NB * T, *a_se = a_in + NB * T, *a_z2 = a_se + NB * T;
    float *a_rr = a_z2 + NB * T, *a_rc = a_rr + NB * T, *a_ri = a_rc + NB * T;
    memset(d->acc, 0, (size_t)7 * NB * T * sizeof(float));
    int ns = 0;
    for (int f = 0; f < d->F; f++) {
        int64_t j = t - d->fc_step[f];
        if (d->fc_step[f] < 0 || j < 1 || j > d->fc_len[f]) continue;
        int b = hpt_dyn_bucket_of((int)j);
        size_t row = ((size_t)f * HM + (size_t)(j - 1)) * T;
        float *u = d->s_u + (size_t)ns * NU, *res = d->s_r + (size_t)ns * T;
        corrector_input(d, u, d->fc_x + (size_t)f * d->D, (int)j);
        int any = 0;
        for (int c = 0; c < T; c++) {
            float raw = d->fc_raw[row + c], mean = d->fc_mean[row + c], sd = d->fc_std[row + c];
            res[c] = NAN;
            if (!isfinite(rv[c]) || !isfinite(raw)) continue;
            /* er: raw forecast; ei: the forecast as issued; ep: the bucket's
             * corrector as it stands now, applied to the raw forecast */
            float er = rv[c] - raw, ei = rv[c] - mean, zc = ei / (sd > 1e-12f ? sd : 1e-12f);
            float ep = er - correction(d, b, c, u);
            int k = b * T + c;
            a_n[k] += 1.0f;
            a_in[k] += fabsf(zc) <= 2.0f;
            a_se[k] += ei * ei;
            a_z2[k] += zc * zc;
            a_rr[k] += fabsf(er);
            a_rc[k] += fabsf(ep);
            a_ri[k] += fabsf(ei);
            res[c] = er;
            any = 1;
        }
        d->s_b[ns] = (float)b;
        ns += any;
    }

    /* forgetting once per step and bucket (not per scored forecast: a step
     * scores up to 2^b forecasts in bucket b), then each covariance trace
     * is bounded: directions the inputs never excite would otherwise grow
     * as forget^-t (wind-up) */
    for (int b = 0; b < NB; b++) {
        int has = 0;
        for (int c = 0; c < T; c++) has |= a_n[b * T + c] > 0;
        if (!has) continue;
        float *P = d->rls_p + (size_t)b * NU * NU;
        float tr = 0.0f;
        for (int i = 0; i < NU; i++) tr += P[(size_t)i * NU + i];
        float sc = 1.0f / d->cfg.rls_forget;
        if (tr * sc > RLS_P0 * NU) sc = RLS_P0 * NU / tr;
        for (size_t i = 0; i < (size_t)NU * NU; i++) P[i] *= sc;
    }
    for (int i = 0; i < ns; i++) rls_update(d, (int)d->s_b[i], d->s_u + (size_t)i * NU, d->s_r + (size_t)i * T);

    for (int c = 0; c < T; c++) {
        float n = 0, rr = 0, ri = 0;
        for (int b = 0; b < NB; b++) {
            int k = b * T + c;
            if (a_n[k] == 0) continue;
            float inv = 1.0f / a_n[k];
            float r = d->cal_n[k] == 0 ? 1.0f : SCORE_RATE;
            d->cal_cov[k] += r * (a_in[k] * inv - d->cal_cov[k]);
            d->cal_mse[k] += r * (a_se[k] * inv - d->cal_mse[k]);
            d->cal_z2[k] += r * (a_z2[k] * inv - d->cal_z2[k]);
            d->cal_rraw[k] += r * (a_rr[k] * inv - d->cal_rraw[k]);
            d->cal_rcorr[k] += r * (a_rc[k] * inv - d->cal_rcorr[k]);
            d->cal_n[k] += a_n[k];
            d->cal_in[k] += a_in[k];
            d->cor_steps[k] += 1.0f;
            n += a_n[k]; rr += a_rr[k]; ri += a_ri[k];
        }
        if (n == 0) continue;
        /* the effect on the forecasts as issued (gated corrections included) */
        float r = d->eff_raw[c] == 0 && d->eff_corr[c] == 0 ? 1.0f : EFFECT_RATE;
        d->eff_raw[c] += r * (rr / n - d->eff_raw[c]);
        d->eff_corr[c] += r * (ri / n - d->eff_corr[c]);
    }
}

int hpt_dyn_corrector_active(const hpt_dyn *d, int h, int col) {
    int b = hpt_dyn_bucket_of(h < 1 ? 1 : h);
    if (b >= d->NB) b = d->NB - 1;
    return col >= 0 && col < d->T && corrector_active(d, b, col);
}

/* ---------------------------------------------------------------- observe */

/* Adam on member m, after clipping its global gradient norm. Each member is
 * clipped on its own: one member's bad window must not shrink the others'
 * steps (their disagreement is information). */
static void adam_step(hpt_dyn *d, int m) {
    const size_t n = d->L.n;
    float *restrict p = d->params + (size_t)m * n, *restrict mo = d->adam + (size_t)m * n;
    float *restrict vo = d->adam + d->params_n + (size_t)m * n;
    const float *restrict g = d->grads + (size_t)m * n;
    const hpt_dyn_config *c = &d->cfg;
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
    float norm = (float)sqrt(ss);
    /* constants in locals: read through c inside the loop they would be
     * reloaded after every store (float* may alias the config) */
    const float clip = c->grad_clip > 0 && norm > c->grad_clip ? c->grad_clip / norm : 1.0f;
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const hpt_adamw_bc bc = hpt_adamw_bias(b1, b2, d->s.adam_t);
    const float step1 = c->lr / bc.bc1, ib2c = 1.0f / bc.bc2;
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * clip;
        mo[i] = b1 * mo[i] + (1.0f - b1) * gi;
        vo[i] = b2 * vo[i] + (1.0f - b2) * gi * gi;
        p[i] -= step1 * mo[i] / (sqrtf(vo[i] * ib2c) + eps);
    }
}

hpt_status hpt_dyn_observe(hpt_dyn *d, const float *x, const float *y) {
    const int D = d->D, H = d->H, Z = d->Z, T = d->T, R = d->R, E = d->E;
    for (int i = 0; i < D; i++)
        if (!isfinite(x[i])) return hpt_fail(HPT_ERR_NUMERIC, "dynamics: input %d is %f", i, x[i]);
    const int64_t t = d->s.step;

    /* score the forecasts that predicted this step before anything learns
     * from it: the scores and the corrector's prequential test must only see
     * forecasts made without this step's values */
    score(d, t, y);

    /* the target row of step t: column 0 against the level after step t-1 */
    size_t slot = (size_t)(t % R);
    float *yrow = d->yr + slot * T;
    for (int c = 0; c < T; c++) yrow[c] = isfinite(y[c]) ? y[c] : NAN;
    yrow[0] = isfinite(y[0]) && isfinite(d->s.level_prev) ? y[0] - d->s.level_prev : NAN;
    memcpy(d->xr + slot * D, x, D * sizeof(float));
    for (int c = 0; c < T; c++) {
        if (!isfinite(yrow[c])) continue;
        if (d->tcount[c] < TARGET_WINDOW) d->tcount[c] += 1.0f;
        float a = 1.0f / d->tcount[c], dv = yrow[c] - d->tmean[c];
        d->tmean[c] += a * dv;
        d->tvar[c] = (1.0f - a) * (d->tvar[c] + a * dv * dv);
    }
    /* online bagging: each member counts this target 0, 1, 2, ... times,
     * drawn once, so every window it falls in sees the same weight */
    for (int m = 0; m < E; m++) d->wr[slot * E + m] = d->cfg.bootstrap ? poisson1(&d->s.rng[m]) : 1.0f;
    d->s.step = t + 1;

    int64_t k0;
    int nw;
    window(d, &k0, &nw);
    if (nw > 0) d->s.adam_t++;
    for (int m = 0; m < E; m++) {
        const float *p = d->params + (size_t)m * d->L.n;
        float *hm = d->hr + (size_t)m * R * H;
        const float *hprev;
        if (nw > 0) {
            fill_normal(&d->s.rng[m], d->noise + (size_t)m * d->W * Z, nw * Z);
            double loss = hpt_dyn_member_loss(d, m, 1);
            if (!isfinite(loss)) return hpt_fail(HPT_ERR_NUMERIC, "dynamics: member %d loss is %f", m, loss);
            /* refreshed states (weights before this update) become the
             * starting points of later windows */
            for (int i = 0; i < nw; i++)
                memcpy(hm + (size_t)((k0 + i) % R) * H, d->c_h + (size_t)(i + 1) * H, H * sizeof(float));
            adam_step(d, m);
            hprev = d->c_h + (size_t)nw * H;
        } else {   /* the very first step: no target yet, start from h = 0 */
            memset(d->v_h1, 0, H * sizeof(float));
            hprev = d->v_h1;
        }
        /* the current state: step t through the updated weights */
        hpt_gru_forward(d->v_h2, d->v_cache, x, hprev, p + d->L.wx, p + d->L.wh, p + d->L.bx, p + d->L.bh, D, H);
        memcpy(hm + slot * H, d->v_h2, H * sizeof(float));
        memcpy(d->hcur + (size_t)m * H, d->v_h2, H * sizeof(float));
        for (int i = 0; i < H; i++)
            if (!isfinite(d->v_h2[i])) return hpt_fail(HPT_ERR_NUMERIC, "dynamics: member %d state diverged", m);
    }
    d->s.level_prev = hpt_encoder_level(d->enc);
    return HPT_OK;
}

/* ---------------------------------------------------------------- forecast */

hpt_status hpt_dyn_forecast(hpt_dyn *d, int horizon, const float *lr_path, float *mean, float *std,
                            hpt_dyn_fc_info *info) {
    const int D = d->D, H = d->H, Z = d->Z, T = d->T, E = d->E, S = d->S, HM = d->HM, R = d->R;
    if (d->s.step == 0) return hpt_fail(HPT_ERR_ARG, "dynamics: forecast before any observation");
    if (horizon < 1 || horizon > HM)
        return hpt_fail(HPT_ERR_ARG, "dynamics: horizon %d out of [1, %d]", horizon, HM);
    const int64_t t = d->s.step - 1;
    const float *x0 = d->xr + (size_t)(t % R) * D;
    const hpt_dyn_layout *L = &d->L;
    float sd[64 + 1];
    for (int c = 0; c < T; c++) sd[c] = target_sd(d, c);

    for (int m = 0; m < E; m++) {
        const float *p = d->params + (size_t)m * L->n;
        const float *wp = p + L->wp, *bp = p + L->bp, *wd = p + L->wd, *bd = p + L->bd, *ls = p + L->ls;
        for (int si = 0; si < S; si++) {
            /* noise from (seed, step, member, path): forecasts are reproducible
             * and never consume the training streams */
            hpt_rng rng;
            hpt_rng_seed(&rng, d->cfg.seed ^ ((uint64_t)t * 0xD1B54A32D192ED03ull) ^
                                   ((uint64_t)(m * S + si + 1) * 0x9E3779B97F4A7C15ull));
            float *h = d->v_h1, *hn = d->v_h2, *feat = d->v_feat, *pr = d->v_pr;
            float *zz = d->v_z, *sp = d->v_sp, *pf = d->v_pf;
            memcpy(h, d->hcur + (size_t)m * H, H * sizeof(float));
            memcpy(feat, x0, D * sizeof(float));
            hpt_enc_roll roll;
            hpt_encoder_roll_begin(d->enc, &roll);
            float *mu = d->f_mu + (size_t)(m * S + si) * HM * T, *va = d->f_var + (size_t)(m * S + si) * HM * T;
            for (int j = 0; j < horizon; j++) {
                /* the predictive Gaussian of step t+j+1 given this path: the
                 * decoder is linear in z, so z ~ prior integrates in closed form */
                matvec(pr, wp, H, h, H, bp, 2 * Z);
                for (int i = 0; i < Z; i++) sp[i] = hpt_expf(clampf(pr[Z + i], LS_MIN, LS_MAX));
                memset(pf, 0, T * sizeof(float));
                prior_fn(d, m, feat, pf);
                float level = hpt_encoder_roll_level(&roll), y0 = 0.0f;
                for (int c = 0; c < T; c++) {
                    const float *row = wd + (size_t)c * (H + Z);
                    float so = hpt_expf(clampf(ls[c], LS_MIN, LSO_MAX));
                    float mn = bd[c] + dotf(row, h, H) + dotf(row + H, pr, Z) + pf[c], v = so * so;
                    for (int i = 0; i < Z; i++) v += row[H + i] * row[H + i] * sp[i] * sp[i];
                    if (c == 0) y0 = mn;
                    mu[j * T + c] = d->tmean[c] + sd[c] * mn + (c == 0 ? level : 0.0f);
                    va[j * T + c] = sd[c] * sd[c] * v;
                }
                if (j + 1 == horizon) break;
                /* sample this path's loss at t+j+1, feed it back through the
                 * encoder's loss EMAs, advance the GRU on the new features */
                fill_normal(&rng, zz, Z + 1);
                float ys = y0;
                for (int i = 0; i < Z; i++) ys += wd[H + i] * sp[i] * zz[i];   /* z - mu_p = sigma_p eps */
                ys += hpt_expf(clampf(ls[0], LS_MIN, LSO_MAX)) * zz[Z];
                float ll = level + d->tmean[0] + sd[0] * ys;
                hpt_encoder_roll_step(d->enc, &roll, ll, lr_path ? lr_path[j] : NAN, feat);
                hpt_gru_forward(hn, d->v_cache, feat, h, p + L->wx, p + L->wh, p + L->bx, p + L->bh, D, H);
                float *tmp = h; h = hn; hn = tmp;
            }
        }
    }

    /* mixture over the E*S paths (law of total variance: the mean of the
     * paths' variances plus the variance of their means, taken around the
     * mixture mean in double: float E[x^2] - E[x]^2 would cancel away a
     * 1e-4 spread on a log loss of ~1); disagreement = std of member means */
    double cabs = 0.0;
    for (int j = 0; j < horizon; j++) {
        int b = hpt_dyn_bucket_of(j + 1);
        corrector_input(d, d->v_u, x0, j + 1);
        for (int c = 0; c < T; c++) {
            double s1 = 0.0, sv = 0.0, dm = 0.0, dm2 = 0.0;
            for (int q = 0; q < E * S; q++) s1 += d->f_mu[((size_t)q * HM + j) * T + c];
            double mix = s1 / (E * S);
            for (int m = 0; m < E; m++) {
                double ms = 0.0;
                for (int si = 0; si < S; si++) {
                    size_t k = ((size_t)(m * S + si) * HM + j) * T + c;
                    double e = d->f_mu[k] - mix;
                    sv += d->f_var[k] + e * e;
                    ms += e;
                }
                ms /= S;
                dm += ms;
                dm2 += ms * ms;
            }
            double var = sv / (E * S), dis = dm2 / E - (dm / E) * (dm / E);
            float corr = corrector_active(d, b, c) ? correction(d, b, c, d->v_u) : 0.0f;
            if (!isfinite(mix)) corr = 0.0f;
            mean[j * T + c] = (float)mix + corr;
            std[j * T + c] = (float)sqrt(var > 0 ? var : 0);
            d->last_dis[j * T + c] = (float)sqrt(dis > 0 ? dis : 0);
            d->last_corr[j * T + c] = corr;
            cabs += fabsf(corr);
            /* into the store, scored when step t+j+1 arrives */
            size_t f = (size_t)(t % d->F), k = ((size_t)f * HM + j) * T + c;
            d->fc_raw[k] = (float)mix;
            d->fc_mean[k] = mean[j * T + c];
            d->fc_std[k] = std[j * T + c];
        }
    }
    size_t f = (size_t)(t % d->F);
    d->fc_step[f] = (int32_t)t;
    d->fc_len[f] = horizon;
    memcpy(d->fc_x + f * D, x0, D * sizeof(float));
    d->s.last_fc_len = horizon;
    d->s.last_fc_step = t;
    if (info) {
        info->step = t;
        info->confidence = hpt_dyn_confidence(d, horizon, -1);
        info->disagree_loss = d->last_dis[(horizon - 1) * T];
        info->corr_loss = d->last_corr[(horizon - 1) * T];
        info->corr_abs_mean = (float)(cabs / ((double)horizon * T));
    }
    return HPT_OK;
}

/* ---------------------------------------------------------------- confidence, state */

int hpt_dyn_buckets(const hpt_dyn *d) { return d->NB; }

/* confidence(h, c) of dynamics.h: evidence x accuracy. The error term adds
 * the recent realised MSE of the bucket (what the forecasts achieved) and the
 * current disagreement squared (what the members do not know now, which the
 * realised error of calmer times cannot show: out-of-distribution inputs). */
static float conf_col(const hpt_dyn *d, int h, int c) {
    int b = hpt_dyn_bucket_of(h);
    if (b >= d->NB) b = d->NB - 1;
    int k = b * d->T + c;
    float n = d->cal_n[k];
    if (n == 0 || d->s.last_fc_len == 0) return 0.0f;
    int hh = h < d->s.last_fc_len ? h : (int)d->s.last_fc_len;
    float dis = d->last_dis[(hh - 1) * d->T + c];
    float tol = c == 0 ? d->cfg.tol_loss : d->cfg.tol_update;
    float ev = n / (n + d->cfg.evidence);
    return ev / (1.0f + (d->cal_mse[k] + dis * dis) / (tol * tol));
}

float hpt_dyn_confidence(const hpt_dyn *d, int h, int col) {
    if (h < 1) h = 1;
    if (col >= 0) return col < d->T ? conf_col(d, h, col) : 0.0f;
    /* the weakest column that has been scored at all: a column the driver
     * never supplies must not pin the confidence at zero */
    float best = -1.0f;
    int b = hpt_dyn_bucket_of(h) < d->NB ? hpt_dyn_bucket_of(h) : d->NB - 1;
    for (int c = 0; c < d->T; c++) {
        if (d->cal_n[b * d->T + c] == 0) continue;
        float v = conf_col(d, h, c);
        if (best < 0 || v < best) best = v;
    }
    return best < 0 ? 0.0f : best;
}

void hpt_dyn_calibration(const hpt_dyn *d, int b, int c, hpt_dyn_calib *o) {
    memset(o, 0, sizeof *o);
    if (b < 0 || b >= d->NB || c < 0 || c >= d->T) return;
    int k = b * d->T + c;
    o->h_lo = 1 << b;
    o->h_hi = (2 << b) - 1 < d->HM ? (2 << b) - 1 : d->HM;
    o->n = d->cal_n[k];
    o->coverage = d->cal_cov[k];
    o->coverage_all = d->cal_n[k] > 0 ? d->cal_in[k] / d->cal_n[k] : 0.0f;
    o->rmse = sqrtf(d->cal_mse[k]);
    o->z_rms = sqrtf(d->cal_z2[k]);
    o->resid_raw = d->cal_rraw[k];
    o->resid_corr = d->cal_rcorr[k];
}

void hpt_dyn_corrector_effect(const hpt_dyn *d, int c, float *before, float *after) {
    *before = c >= 0 && c < d->T ? d->eff_raw[c] : NAN;
    *after = c >= 0 && c < d->T ? d->eff_corr[c] : NAN;
}

int hpt_dyn_regions(hpt_dyn *d, hpt_region *out) {
    out[0] = (hpt_region){"dyn_scalars", &d->s, sizeof d->s};
    out[1] = (hpt_region){"dyn_params", d->params, d->params_n * sizeof(float)};
    out[2] = (hpt_region){"dyn_adam", d->adam, d->adam_n * sizeof(float)};
    out[3] = (hpt_region){"dyn_state", d->state, d->state_n * sizeof(float)};
    return 4;
}

/* A save and a restore in one: region by region, after checking that every
 * region has the same size (the same config gives the same layout). */
hpt_status hpt_dyn_copy_state(hpt_dyn *dst, const hpt_dyn *src) {
    hpt_region a[4], b[4];
    int n = hpt_dyn_regions(dst, a);
    hpt_dyn_regions((hpt_dyn *)src, b);
    for (int i = 0; i < n; i++)
        if (a[i].bytes != b[i].bytes)
            return hpt_fail(HPT_ERR_ARG, "dynamics: cannot copy state between different configurations (%s)", a[i].name);
    for (int i = 0; i < n; i++) memcpy(a[i].ptr, b[i].ptr, a[i].bytes);
    return HPT_OK;
}

/* The indices and counters of a restored state (a checkpoint's bytes): the
 * step (ring slots are step % R), the forecast store's issue steps and
 * horizons (rows of fc_raw are read up to the horizon), the last forecast's
 * horizon (rows of last_dis), the statistics' counts. */
hpt_status hpt_dyn_check_state(const hpt_dyn *d) {
    const hpt_dyn_scalars *s = &d->s;
    const int64_t big = 1000000000;
    if (s->step < 0 || s->step > big || s->adam_t < 0 || s->adam_t > big || s->rls_n < 0 || s->rls_n > big)
        return hpt_fail(HPT_ERR_FORMAT, "dynamics state: a step counter is out of range");
    if (s->last_fc_len < 0 || s->last_fc_len > d->HM ||
        (s->last_fc_len > 0 && (s->last_fc_step < 0 || s->last_fc_step >= s->step)))
        return hpt_fail(HPT_ERR_FORMAT, "dynamics state: the last forecast's horizon or step is out of range");
    for (int f = 0; f < d->F; f++) {
        int32_t at = d->fc_step[f], len = d->fc_len[f];
        if (at == -1) continue;
        if (at < 0 || at >= s->step || at % d->F != f || len < 1 || len > d->HM)
            return hpt_fail(HPT_ERR_FORMAT, "dynamics state: forecast slot %d (step %d, horizon %d) is out of range",
                            f, at, len);
    }
    for (int c = 0; c < d->T; c++)
        if (!(d->tcount[c] >= 0.0f && d->tcount[c] <= TARGET_WINDOW))
            return hpt_fail(HPT_ERR_FORMAT, "dynamics state: target %d's count is out of range", c);
    for (int k = 0; k < d->NB * d->T; k++)
        if (!(d->cal_n[k] >= 0.0f && isfinite(d->cal_n[k])) || !(d->cor_steps[k] >= 0.0f && isfinite(d->cor_steps[k])))
            return hpt_fail(HPT_ERR_FORMAT, "dynamics state: a calibration count is out of range");
    return HPT_OK;
}
