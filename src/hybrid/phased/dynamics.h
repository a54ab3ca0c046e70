/*
 * dynamics.h — the dynamics model of hybrid predictive training: an ensemble
 * of small recurrent state-space models ("RSSM-lite") trained online on the
 * encoder's features (encoder.h), forecasting the loss and K per-tensor update
 * scales some steps ahead, with a confidence measured against its own
 * realised errors and a residual corrector.
 *
 * ------------------------------------------------------------ the model
 * Per ensemble member (E members, own init, own noise, own bootstrap):
 *   h_t   = GRU(h_{t-1}, x_t)                  deterministic path, hidden H,
 *                                              x_t = features after step t
 *   prior     p(z | h_t)         = N(mu_p, sigma_p)   diagonal, dim Z
 *   posterior q(z | h_t, y_t+1)  = N(mu_q, sigma_q)   sees the targets it explains
 *   y^_t+1 = Wd [h_t; z] + bd + prior_scale P_m x_t,  y_t+1 ~ N(y^_t+1, sigma_obs)
 *                                              (normalised units)
 * P_m is a fixed random matrix per member, never trained (a randomized prior
 * function, Osband et al. 2018): training cancels it on the inputs seen, and
 * off them the members' different P_m make their forecasts spread, where
 * init and bootstrap alone left saturated GRUs agreeing.
 * Training maximises the ELBO: z is drawn from the posterior by
 * reparameterisation, the KL(q || p) term (weight kl_weight, optional free
 * nats, and DreamerV2's balancing: the prior moves 2*kl_balance times and the
 * posterior 2*(1 - kl_balance) times as fast as plain KL would move them) makes
 * the prior learn the spread of what the posterior saw. Forecasts draw z from
 * the prior. This is a conditional VAE in the RSSM indexing: the observation
 * of step t+1 is the target row y_{t+1}, and the state h_t is everything
 * known before it. (The original's "stochastic" state was a deterministic
 * softmax of hidden units with no prior, posterior or KL.)
 * z is not fed back into the GRU: forecasts feed the sampled loss back
 * through the feature vector (below), which already carries a sampled path's
 * randomness into the future; a second path would double it and make every
 * BPTT gradient depend on sampled noise.
 *
 * ------------------------------------------------------------ targets
 * The target row at step t has T = 1 + K columns:
 *   column 0: log(loss_t) - level_{t-1}, where level is the encoder's E_0.1 of
 *             log loss after the previous step (hpt_encoder_level). Predicting
 *             the next loss against a smoothed level keeps the target
 *             stationary and its noise independent from step to step (a
 *             difference of consecutive losses would have MA(1) noise, and
 *             summed forecasts would overstate the spread by sqrt(h/2)).
 *             The driver passes log(loss_t) itself (y[0]); the model forms
 *             the difference.
 *   columns 1..K: the driver's per-tensor targets, used as given: the
 *             optimal scale of the AdamW-direction prediction of the step's
 *             update, <real update, predicted update> / |predicted update|^2
 *             over the tensor's sampled parameters (hybrid.c,
 *             after_real_step); NaN until there is a previous update. The
 *             driver scales each tensor's predicted step by their forecast.
 * Any column may be NaN (missing): it is masked out of training and of the
 * error statistics. Targets are standardised per column by running
 * statistics (the same rule as the encoder's) before training.
 *
 * ------------------------------------------------------------ online training
 * hpt_dyn_observe(x_t, y_t): a ring buffer keeps the last W+2 inputs,
 * targets and hidden states. Each call re-runs every member over the last W
 * steps (truncated BPTT from the stored state W steps back, as computed by
 * the previous call), averages the per-step negative ELBO (each step weighted
 * by the member's Poisson(1) bootstrap weight when bootstrap is on), clips the
 * member's global gradient norm and takes one Adam step. The refreshed
 * hidden states are written back to the ring; the current state h_t comes
 * from the refreshed h_{t-1} and the updated weights.
 *
 * ------------------------------------------------------------ forecasts
 * hpt_dyn_forecast(horizon) rolls every member forward S times (S sample
 * paths) from its current state. At each future step j it decodes the
 * predictive distribution of the targets from the prior (Gaussian in closed
 * form: the decoder is linear in z), records it, then samples a log loss
 * from it, feeds it to a copy of the encoder's loss EMAs
 * (hpt_encoder_roll_step: slots 0-3 from the sampled loss, slot 8 from
 * lr_path when given, slot 15 one step further; all other slots, and any
 * inputs after the encoder's, keep their last observed value) and advances
 * the GRU on the rewritten feature vector. Output per step j = 1..horizon:
 *   mean[j-1][0]   predicted log(loss_{t+j}) (absolute: level + column 0),
 *   mean[j-1][k]   predicted target k at step t+j,
 *   std            predictive std over the mixture of all E*S paths (law of
 *                  total variance: within-path Gaussian + spread of paths);
 * mean includes the residual corrector's correction (below).
 *
 * ------------------------------------------------------------ confidence
 * Every forecast is stored (issue step, x, raw and corrected means, stds) for
 * max_horizon steps. When step s+j arrives, each stored forecast issued at s
 * with horizon >= j is scored against the realised values (log loss, and
 * the K targets): error, z = error / std, inside = |z| <= 2. Scores are
 * kept per horizon bucket (b = floor(log2 j): 1, 2-3, 4-7, 8-15, ...) and
 * column, as EMAs (rate 0.1 per step) and cumulative counts:
 *   calibration = fraction inside mean +- 2 std (recent EMA and since start);
 *   confidence(h, c) = n / (n + n0) / (1 + (rmse_b^2 + dis_h^2) / tol_c^2)
 * where rmse_b is the recent RMS realised error of bucket(h), dis_h the member
 * disagreement (std of member means) of the latest forecast at h, tol_c the
 * error that is acceptable (tol_loss for column 0, tol_update otherwise) and
 * n the number of scored forecasts in the bucket (no evidence, no confidence:
 * the original started at 0.85 before any error was seen).
 *
 * ------------------------------------------------------------ residual corrector
 * One linear model per horizon bucket and column, on u = [x_s; log(1+j) /
 * log(1+Hmax); j/Hmax; 1], fitted by recursive least squares (forgetting
 * rls_forget per step, covariance trace bounded against wind-up) to the
 * residual realised - raw forecast of every scored forecast in its bucket:
 * residuals are fitted at matching horizons (one model across all horizons
 * learned corrections that were right for long horizons and wrong at h = 1).
 * Each is scored prequentially: a matured forecast's correction is computed
 * with the weights from before that step. Forecasts add bucket b's w_c . u to
 * column c only after max(2 dim(u), 20) scored steps and while its
 * prequential error is below the raw forecast's. Kept for logs: per bucket,
 * mean |residual| raw and corrected-prequential (hpt_dyn_calibration); per
 * column over all horizons, raw and as issued (hpt_dyn_corrector_effect).
 *
 * Memory: everything is allocated in hpt_dyn_init, in five arenas (params,
 * grads, adam moments, state, scratch); observe and forecast allocate
 * nothing. The persistent state is the scalars struct plus the params, adam
 * and state arenas (hpt_dyn_regions); grads and scratch are rebuilt by every
 * call. Deterministic for a given seed and call sequence; forecasts draw
 * their noise from (seed, step, member), so they do not perturb training.
 */
#ifndef HPT_DYNAMICS_H
#define HPT_DYNAMICS_H

#include "encoder.h"

#define HPT_DYN_MAX_ENSEMBLE 16

typedef struct hpt_dyn_config {
    int n_in;            /* input features; the first HPT_ENC_NFEAT are the encoder's */
    int n_groups;        /* K update-scale targets (0 allowed) */
    int ensemble;        /* E members (3) */
    int hidden;          /* H (32) */
    int latent;          /* Z (8) */
    int bptt;            /* W: truncated-BPTT window (16) */
    int samples;         /* S sample paths per member in a forecast (4) */
    int max_horizon;     /* longest forecast, and how long forecasts are kept for scoring (32) */
    float lr, beta1, beta2, eps, grad_clip;      /* Adam, per-member global-norm clip */
    float kl_weight;     /* beta of the KL term (1) */
    float kl_balance;    /* 0.5: plain KL; 0.8: prior learns 4x faster than posterior moves (0.8) */
    float free_nats;     /* KL below this many nats per step is not penalised (0) */
    int bootstrap;       /* 1: Poisson(1) weight per member and step (online bagging) */
    float prior_scale;   /* weight of each member's fixed random prior function (0.5; 0: off) */
    float tol_loss;      /* acceptable error of the log-loss forecast (0.05 = 5% of the loss) */
    float tol_update;    /* acceptable error of the K update targets (0.1) */
    float evidence;      /* n0 of the confidence's evidence factor n / (n + n0) (20) */
    float rls_forget;    /* corrector forgetting per step (0.995) */
    int apply_correction;   /* 1: forecasts apply the gated corrections; 0: scored and fitted only (ablations) */
    uint64_t seed;
} hpt_dyn_config;

/* Offsets (floats) of one member's tensors inside its slice of the params arena. */
typedef struct hpt_dyn_layout {
    size_t wx, wh, bx, bh;   /* GRU: (D, 3H), (H, 3H), (3H), (3H); input-major (PyTorch's
                                weight_ih/hh transposed), gate order r, z, n as PyTorch */
    size_t wp, bp;           /* prior head (2Z, H), (2Z): rows mu then log-std */
    size_t wq, bq;           /* posterior head (2Z, H+T), (2Z) on [h; y~] */
    size_t wd, bd;           /* decoder (T, H+Z), (T) on [h; z] */
    size_t ls;               /* (T) log sigma_obs, normalised units */
    size_t n;                /* floats per member, padded to 16 */
} hpt_dyn_layout;

/* Everything persistent that is not in an arena. */
typedef struct hpt_dyn_scalars {
    int64_t step;            /* observations so far; the last one has index step-1 */
    int64_t adam_t;          /* Adam steps taken */
    int64_t rls_n;           /* corrector updates */
    int64_t last_fc_len;     /* horizon of the latest forecast (0: none) */
    int64_t last_fc_step;
    float level_prev;        /* encoder level after the previous observation (NaN: none) */
    float pad_;
    hpt_rng rng[HPT_DYN_MAX_ENSEMBLE];   /* per member: training noise, bootstrap */
} hpt_dyn_scalars;

/* Scores of one horizon bucket and column. */
typedef struct hpt_dyn_calib {
    int h_lo, h_hi;          /* horizons in the bucket */
    double n;                /* forecasts scored since start */
    float coverage;          /* recent fraction inside mean +- 2 std */
    float coverage_all;      /* the same since start */
    float rmse;              /* recent RMS error of the (corrected) forecast */
    float z_rms;             /* recent RMS of error / std (1 = calibrated spread) */
    float resid_raw;         /* recent mean |realised - raw forecast| */
    float resid_corr;        /* recent mean |realised - raw forecast - correction|, the
                                correction computed before the corrector saw this step
                                (applied or not: the evidence the gate uses) */
} hpt_dyn_calib;

/* Summary of one forecast (for logs). */
typedef struct hpt_dyn_fc_info {
    int64_t step;            /* index of the last observed step (the forecast starts after it) */
    float confidence;        /* hpt_dyn_confidence(d, horizon, -1) */
    float disagree_loss;     /* std of member means of the log-loss forecast at the last horizon */
    float corr_loss;         /* correction added to the log-loss forecast at the last horizon */
    float corr_abs_mean;     /* mean |correction| over horizons and columns */
} hpt_dyn_fc_info;

typedef struct hpt_dyn {
    hpt_dyn_config cfg;
    const hpt_encoder *enc;  /* not owned; must outlive the model */
    int D, H, Z, T, E, W, S, HM;   /* n_in, hidden, latent, 1+K, ensemble, bptt, samples, max_horizon */
    int R;                   /* ring length W+2 */
    int F;                   /* forecast store slots max_horizon+1 */
    int NB;                  /* horizon buckets */
    int NU;                  /* corrector inputs D+3 */
    hpt_dyn_layout L;
    hpt_dyn_scalars s;

    /* arenas: pointer + size (floats) */
    float *params;  size_t params_n;    /* (E, L.n) */
    float *grads;   size_t grads_n;     /* (E, L.n) scratch, rebuilt per member and call */
    float *adam;    size_t adam_n;      /* m (E, L.n) then v (E, L.n) */
    float *state;   size_t state_n;     /* rings, statistics, forecast store, corrector */
    float *scratch; size_t scratch_n;   /* window caches, noise, forecast accumulators */

    /* state arena */
    float *xr;          /* (R, D) inputs by step */
    float *yr;          /* (R, T) raw targets by step (column 0 already relative to the level) */
    float *wr;          /* (R, E) bootstrap weights of each step's targets */
    float *hr;          /* (E, R, H) hidden state after each step */
    float *hcur;        /* (E, H) current state */
    float *tmean, *tvar, *tcount;     /* (T) target statistics */
    int32_t *fc_step, *fc_len;        /* (F) issue step (-1: empty), horizon */
    float *fc_x;        /* (F, D) features at issue */
    float *fc_raw;      /* (F, HM, T) means before correction */
    float *fc_mean;     /* (F, HM, T) corrected means */
    float *fc_std;      /* (F, HM, T) */
    float *cal_n, *cal_in, *cal_cov, *cal_mse, *cal_z2, *cal_rraw, *cal_rcorr;   /* (NB, T) */
    float *eff_raw, *eff_corr;        /* (T) recent mean |residual| over all horizons, raw / as issued */
    float *rls_w;       /* (NB, T, NU) corrector weights per horizon bucket and column */
    float *rls_p;       /* (NB, NU, NU) RLS covariance per bucket */
    float *last_dis;    /* (HM, T) member disagreement of the latest forecast */
    float *last_corr;   /* (HM, T) correction of the latest forecast */
    float *rpf;         /* (E, T, D) fixed random prior functions (set at init, never trained) */
    float *cor_steps;   /* (NB, T) steps with scored forecasts per bucket and column */

    /* scratch arena */
    float *noise;       /* (E, W, Z) posterior noise of this call's training pass */
    float *c_h;         /* (W+1, H) window states, c_h[0] = start */
    float *c_gate;      /* (W, 7H) GRU caches */
    float *c_pr, *c_po; /* (W, 2Z) prior / posterior head outputs (mu, log-std) */
    float *c_z;         /* (W, Z) */
    float *c_in;        /* (W, H+T) posterior input [h; y~] */
    float *c_yh, *c_yt, *c_mk;        /* (W, T) prediction, normalised target, mask */
    float *c_w;         /* (W) step weights */
    float *c_kl;        /* (W) KL of each step */
    float *v_hz, *v_dhz;              /* (H+Z) decoder input and its gradient */
    float *v_carry, *v_dh, *v_h1, *v_h2;   /* (H) */
    float *v_dpo, *v_dpr, *v_pr;      /* (2Z) */
    float *v_z;         /* (Z+1) normals of one rollout step */
    float *v_sp;        /* (Z) prior sigmas of one rollout step */
    float *v_pf;        /* (T) prior-function output of one rollout step */
    float *v_feat;      /* (D) rollout features */
    float *v_cache;     /* (7H) GRU cache outside the window */
    float *v_work;      /* (6H) GRU backward workspace */
    float *v_u, *v_pu;  /* (NU) corrector input, P u */
    float *acc;         /* (7, NB, T) sums of this call's scores */
    float *f_mu, *f_var;   /* (E*S, HM, T) per-path predictive mean and variance (raw units) */
    float *s_u, *s_r, *s_b;   /* (HM, NU), (HM, T), (HM) corrector samples of one step, their buckets */
} hpt_dyn;

void hpt_dyn_config_default(hpt_dyn_config *c, int n_in, int n_groups);
/* Checks the config, allocates every arena, initialises the members from
 * cfg->seed. enc supplies the loss level and the rollout (it must be the
 * encoder whose features are passed as the first HPT_ENC_NFEAT inputs). */
hpt_status hpt_dyn_init(hpt_dyn *d, const hpt_dyn_config *cfg, const hpt_encoder *enc);
void hpt_dyn_free(hpt_dyn *d);   /* NULL-safe */

/* One step: x (n_in) the encoder's features after step t (plus any extra
 * inputs), y (1+K): y[0] = log(loss_t) or NaN, y[1..K] the update targets of
 * step t or NaN. Call after hpt_encoder_update for the same step. Scores the
 * forecasts that mature at t, updates the correctors, trains every member on
 * the last W steps. HPT_ERR_NUMERIC on a non-finite x (nothing changed) or a
 * diverged member (the model is then unusable: restore a saved state). */
hpt_status hpt_dyn_observe(hpt_dyn *d, const float *x, const float *y);

/* Forecast of steps t+1..t+horizon (1 <= horizon <= max_horizon) after the
 * last observed step t. lr_path (horizon): lr_path[j] is the learning rate of
 * step t+1+j (the last entry is not needed), or NULL (hold the current one).
 * mean, std: (horizon, 1+K), layout above; column 0 is NaN until a loss has
 * been observed. info may be NULL. The forecast is stored for scoring, one per
 * step: a second forecast after the same step replaces the first. */
hpt_status hpt_dyn_forecast(hpt_dyn *d, int horizon, const float *lr_path, float *mean, float *std,
                            hpt_dyn_fc_info *info);

/* Confidence in [0, 1) of the latest forecast at horizon h for column col
 * (0 loss, 1..K updates), or the minimum over scored columns for col = -1. */
float hpt_dyn_confidence(const hpt_dyn *d, int h, int col);
/* Scores of horizon bucket b (0 .. hpt_dyn_buckets()-1) and column col. */
void hpt_dyn_calibration(const hpt_dyn *d, int bucket, int col, hpt_dyn_calib *out);
int hpt_dyn_buckets(const hpt_dyn *d);
int hpt_dyn_bucket_of(int h);
/* Recent mean |residual| over all horizons of column col: of the raw
 * forecasts (before) and of the forecasts as issued, with whatever
 * corrections were applied (after). */
void hpt_dyn_corrector_effect(const hpt_dyn *d, int col, float *before, float *after);
/* Whether forecasts at horizon h apply the correction of column col now. */
int hpt_dyn_corrector_active(const hpt_dyn *d, int h, int col);

/* The persistent state (scalars, params, adam, state); returns the count (4). */
int hpt_dyn_regions(hpt_dyn *d, hpt_region *out);
/* Copies src's persistent state into dst (same config): a save and a restore. */
hpt_status hpt_dyn_copy_state(hpt_dyn *dst, const hpt_dyn *src);

/* ---------------------------------------------------------------- internals (tests)
 * GRU cell, PyTorch's formulation:
 *   r = sig(Wx_r x + bx_r + Wh_r h + bh_r),  z = sig(Wx_z x + bx_z + Wh_z h + bh_z)
 *   n = tanh(Wx_n x + bx_n + r * (Wh_n h + bh_n)),  h' = (1 - z) * n + z * h
 * with wx (D, 3H) and wh (H, 3H) stored input-major: column j of PyTorch's
 * (3H, D) weight_ih is row j here. Input-major makes every inner loop a
 * 3H-long axpy or dot (3H = 96 against D = 16 inputs at the defaults), 3x
 * faster than row-major at these sizes. cache (7H) keeps r, z, Wh_n h + bh_n,
 * n and a workspace; h_out must not alias h. The backward pass ACCUMULATES
 * into dx (may be NULL), dh, dwx, dwh, dbx, dbh (kernels.h rule); work (6H). */
void hpt_gru_forward(float *h_out, float *cache, const float *x, const float *h,
                     const float *wx, const float *wh, const float *bx, const float *bh, int D, int H);
void hpt_gru_backward(float *dx, float *dh, float *dwx, float *dwh, float *dbx, float *dbh,
                      const float *dout, const float *cache, const float *x, const float *h,
                      const float *wx, const float *wh, float *work, int D, int H);
/* Loss of member m over the current window with the noise of the last
 * observe (the training objective), and when grad != 0 its gradient in
 * d->grads + m * d->L.n (overwritten). */
double hpt_dyn_member_loss(hpt_dyn *d, int m, int grad);

/* After a restore from a checkpoint (hpt_dyn_regions): HPT_ERR_FORMAT
 * (naming what) unless every index and counter of the state is in range. */
hpt_status hpt_dyn_check_state(const hpt_dyn *d);

#endif /* HPT_DYNAMICS_H */
