/*
 * model.c — the family-independent half of hpt_model: the tensor table, the
 * two parameter-shaped arenas, and the public accessors.
 */
#include "model.h"
#include "../base/prof.h"
#include "../kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

hpt_status hpt_model_alloc_params(hpt_model *m, const hpt_tensor_spec *specs, int n) {
    HPT_ASSERT(n <= HPT_MAX_TENSORS);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        hpt_tensor_info *t = &m->tensors[i];
        t->name = specs[i].name;
        t->ndim = specs[i].ndim;
        t->decay = specs[i].decay;
        m->hidden[i] = specs[i].hidden != 0;
        t->numel = 1;
        for (int d = 0; d < 4; d++) t->shape[d] = d < t->ndim ? specs[i].shape[d] : 1;
        for (int d = 0; d < t->ndim; d++) t->numel *= (size_t)specs[i].shape[d];
        /* No padding between tensors: the arena length is the parameter
         * count, and the CRC of the arena is the CRC of the parameters. */
        t->offset = off;
        off += t->numel;
    }
    m->ntensors = n;
    m->nparams = off;
    if (!m->dev) m->dev = &hpt_device_cpu;   /* a family that runs on the CPU alone sets none */
    m->params = m->dev->alloc(m->dev, off);
    if (!m->params_only) m->grads = m->dev->alloc(m->dev, off);
    if (!m->params || (!m->grads && !m->params_only)) return hpt_fail(HPT_ERR_NOMEM, "cannot allocate %zu parameters", off);
    return HPT_OK;
}

/* The pieces a device buffer is read back to the host in: 256 KiB on the
 * stack, so that a checkpoint of any size needs no host copy of it. */
enum { PIECE = 65536 };

uint32_t hpt_model_crc32(const hpt_model *m, const float *src, size_t n) {
    float piece[PIECE];
    uint32_t crc = 0;
    for (size_t off = 0; off < n; off += PIECE) {
        size_t k = n - off < PIECE ? n - off : PIECE;
        m->dev->download(piece, src + off, k);
        crc = hpt_crc32(crc, piece, k * sizeof(float));
    }
    return crc;
}

void hpt_model_write(hpt_writer *w, const hpt_model *m, const float *src, size_t n) {
    float piece[PIECE];
    for (size_t off = 0; off < n; off += PIECE) {
        size_t k = n - off < PIECE ? n - off : PIECE;
        m->dev->download(piece, src + off, k);
        hpt_w_bytes(w, piece, k * sizeof(float));
    }
}

void hpt_model_free(hpt_model *m) {
    if (!m) return;
    if (m->ops && m->ops->free_impl) m->ops->free_impl(m->impl);
    if (m->params) m->dev->free(m->dev, m->params);
    if (m->grads) m->dev->free(m->dev, m->grads);
    hpt_device_close(m->own_dev);
    free(m);
}

hpt_status hpt_model_forward(hpt_model *m, const hpt_batch *b, float *loss) {
    if (!m || !b) return hpt_fail(HPT_ERR_ARG, "forward: NULL argument");
    if (b->B < 1 || b->B > m->max_B || b->T < 1 || b->T > m->max_T)
        return hpt_fail(HPT_ERR_ARG, "forward: batch %dx%d exceeds the reserved %dx%d",
                        b->B, b->T, m->max_B, m->max_T);
    /* The caller's x is a bare pointer: its length is B x x_dim by the
     * batch's own word, and the families read B x in_dim floats from it. A
     * width that differs would read past the caller's array (or misread a
     * narrower row layout), so it is refused here, for every family. */
    if (m->in_dim) {
        if (!b->x) return hpt_fail(HPT_ERR_ARG, "forward: the model takes %d features per sample (x); the batch has none",
                                   m->in_dim);
        if (b->x_dim != m->in_dim)
            return hpt_fail(HPT_ERR_ARG, "forward: the batch has %d features per sample (x_dim), the model takes %d",
                            b->x_dim, m->in_dim);
    } else if (b->x || b->x_dim) {
        return hpt_fail(HPT_ERR_ARG, "forward: a token model takes tokens, not features (the batch has x_dim %d)",
                        b->x_dim);
    }
    m->have_targets = 0;
    hpt_status st = m->ops->forward(m, b, loss);
    if (st == HPT_OK) m->have_targets = b->targets != NULL;
    m->last_rows = st == HPT_OK ? b->B * (m->in_dim ? 1 : b->T) : 0;
    return st;
}

static hpt_status backward(hpt_model *m, float loss_scale, int fresh) {
    if (!m->have_targets)
        return hpt_fail(HPT_ERR_ARG, "backward: the last forward had no targets");
    m->have_targets = 0;  /* the in-place softmax is consumed by backward */
    m->backward_calls++;
    if (fresh && m->ops->backward_first) return m->ops->backward_first(m, loss_scale);
    if (fresh) hpt_model_zero_grad(m);
    return m->ops->backward(m, loss_scale);
}

hpt_status hpt_model_backward(hpt_model *m, float loss_scale) { return backward(m, loss_scale, 0); }
hpt_status hpt_model_backward_fresh(hpt_model *m, float loss_scale) { return backward(m, loss_scale, 1); }

void hpt_model_zero_grad(hpt_model *m) {
    if (!m->grads) return;  /* a parameters-only model */
    /* through the row: the gradients are its memory, which the host may not
     * touch (a memset here was a SIGSEGV on a GPU). fill(0) writes +0.0,
     * memset's bits, on every row. */
    HPT_PROF(HPT_PROF_ZERO_GRAD, 0, m->dev->fill(m->grads, 0.0f, m->nparams));
}

float *hpt_model_params(hpt_model *m, size_t *n) { if (n) *n = m->nparams; return m->params; }
float *hpt_model_grads(hpt_model *m, size_t *n) { if (n) *n = m->nparams; return m->grads; }
const hpt_tensor_info *hpt_model_tensors(const hpt_model *m, int *n) { *n = m->ntensors; return m->tensors; }
size_t hpt_model_num_params(const hpt_model *m) { return m->nparams; }
const char *hpt_model_describe(const hpt_model *m) { return m->desc; }

const float *hpt_model_logits(const hpt_model *m, int *n_out, int *row) {
    if (n_out) *n_out = m->n_out;
    if (row) *row = m->out_row;
    return m->logits;
}

hpt_status hpt_model_logits_copy(const hpt_model *m, int r, float *out) {
    if (!m->logits) return hpt_fail(HPT_ERR_ARG, "logits: no forward pass yet");
    if (r < 0 || r >= m->last_rows)
        return hpt_fail(HPT_ERR_ARG, "logits: row %d out of range [0,%d)", r, m->last_rows);
    const size_t row = (size_t)r * m->out_row;
    if (m->logit_bytes)
        m->dev->nn->download_acts(m->dev, out, (const hpt_act *)((const char *)m->logits + row * m->logit_bytes),
                                  (size_t)m->n_out);
    else
        m->dev->download(out, m->logits + row, (size_t)m->n_out);
    return HPT_OK;
}

void hpt_model_bytes(const hpt_model *m, size_t *params, size_t *grads, size_t *acts) {
    if (params) *params = m->nparams * sizeof(float);
    if (grads) *grads = m->grads ? m->nparams * sizeof(float) : 0;
    if (acts) *acts = m->act_bytes;
}

double hpt_model_train_flops(const hpt_model *m, int B, int T) { return m->ops->train_flops(m, B, T); }

int hpt_model_block_size(const hpt_model *m) { return m->max_T; }
int hpt_model_input_dim(const hpt_model *m) { return m->in_dim; }
size_t hpt_model_backward_calls(const hpt_model *m) { return m->backward_calls; }

hpt_status hpt_model_from_conf(hpt_model **out, const uint32_t *conf, int nconf, int B, int T,
                               const hpt_device *dev) {
    *out = NULL;
    dev = hpt_device_or_cpu(dev);
    if (nconf >= 1 && conf[0] != HPT_FAMILY_GPT2 && strcmp(dev->name, "cpu"))
        return hpt_fail(HPT_ERR_ARG, "--device %s: the classifiers (mlp, cnn) run on the CPU only in this version; "
                        "the GPT-2 family runs on every device", dev->name);
    if (nconf < 1) return hpt_fail(HPT_ERR_FORMAT, "empty model config");
    /* a file's config may ask for more than the machine has (a forged one,
     * or one from a bigger machine): refuse before allocating */
    HPT_TRY(hpt_model_check_memory(conf, nconf, B, T, NULL, 0));
    switch (conf[0]) {
    case HPT_FAMILY_GPT2: {
        if (nconf < 6) return hpt_fail(HPT_ERR_FORMAT, "short GPT-2 config");
        for (int i = 1; i < 6; i++)
            if (conf[i] > (1u << 24)) return hpt_fail(HPT_ERR_FORMAT, "GPT-2 config value %u out of range", conf[i]);
        hpt_gpt2_config c = {.vocab_size = (int)conf[1], .block_size = (int)conf[2], .n_layer = (int)conf[3],
                             .n_head = (int)conf[4], .n_embd = (int)conf[5]};
        return hpt_gpt2_init(out, &c, B, T > 0 ? T : c.block_size, 0, dev);
    }
    case HPT_FAMILY_MLP: {
        /* [family, n_in, n_classes, n_hidden, hidden[0..3]] */
        if (nconf < 8 || conf[3] > HPT_MLP_MAX_HIDDEN) return hpt_fail(HPT_ERR_FORMAT, "bad MLP config");
        hpt_mlp_config c = {.n_in = (int)conf[1], .n_classes = (int)conf[2], .n_hidden = (int)conf[3]};
        for (int i = 0; i < HPT_MLP_MAX_HIDDEN; i++) c.hidden[i] = (int)conf[4 + i];
        for (int i = 1; i < 8; i++)
            if (conf[i] > (1u << 24)) return hpt_fail(HPT_ERR_FORMAT, "MLP config value %u out of range", conf[i]);
        return hpt_mlp_init(out, &c, B, 0);
    }
    case HPT_FAMILY_CNN: {
        /* [family, in_c, in_h, in_w, c1, c2, hidden, n_classes] */
        if (nconf < 8) return hpt_fail(HPT_ERR_FORMAT, "bad CNN config");
        for (int i = 1; i < 8; i++)
            if (conf[i] > (1u << 24)) return hpt_fail(HPT_ERR_FORMAT, "CNN config value %u out of range", conf[i]);
        hpt_cnn_config c = {.in_c = (int)conf[1], .in_h = (int)conf[2], .in_w = (int)conf[3], .c1 = (int)conf[4],
                            .c2 = (int)conf[5], .hidden = (int)conf[6], .n_classes = (int)conf[7]};
        return hpt_cnn_init(out, &c, B, 0);
    }
    default:
        return hpt_fail(HPT_ERR_FORMAT, "unknown model family %u", conf[0]);
    }
}

/* The parameter count a conf describes, computed without allocating: the
 * loaders compare it with the size of the stored arena before building the
 * model, so that a forged config cannot make them reserve gigabytes for a
 * file that holds kilobytes. Mirrors each family's tensor table (test_model
 * checks the two agree). */
hpt_status hpt_model_conf_params(const uint32_t *conf, int nconf, size_t *out) {
    *out = 0;
    double n = 0;
    if (nconf < 1) return hpt_fail(HPT_ERR_FORMAT, "empty model config");
    for (int i = 1; i < nconf && i < 8; i++)
        if (conf[i] > (1u << 24)) return hpt_fail(HPT_ERR_FORMAT, "model config value %u out of range", conf[i]);
    switch (conf[0]) {
    case HPT_FAMILY_GPT2: {
        if (nconf < 6 || conf[1] < 2) return hpt_fail(HPT_ERR_FORMAT, "bad GPT-2 config");
        double Vp = hpt_gpt2_padded_vocab((int)conf[1]), T = conf[2], L = conf[3], C = conf[5];
        n = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
        break;
    }
    case HPT_FAMILY_MLP: {
        if (nconf < 8 || conf[3] > HPT_MLP_MAX_HIDDEN) return hpt_fail(HPT_ERR_FORMAT, "bad MLP config");
        double din = conf[1];
        for (uint32_t l = 0; l <= conf[3]; l++) {
            double dout = l == conf[3] ? conf[2] : conf[4 + l];
            n += din * dout + dout;
            din = dout;
        }
        break;
    }
    case HPT_FAMILY_CNN: {
        if (nconf < 8) return hpt_fail(HPT_ERR_FORMAT, "bad CNN config");
        double C0 = conf[1], c1 = conf[4], c2 = conf[5], HD = conf[6], K = conf[7];
        double F = c2 * (double)(conf[2] / 2 / 2) * (double)(conf[3] / 2 / 2);
        n = c1 * C0 * 9 + c1 + c2 * c1 * 9 + c2 + HD * F + HD + K * HD + K;
        break;
    }
    default:
        return hpt_fail(HPT_ERR_FORMAT, "unknown model family %u", conf[0]);
    }
    if (n > 1e11) return hpt_fail(HPT_ERR_FORMAT, "model config describes %.3g parameters", n);
    *out = (size_t)n;
    return HPT_OK;
}

int hpt_muon_matrix(const hpt_model *m, int i, int *count, int *rows, int *cols) {
    const hpt_tensor_info *t = &m->tensors[i];
    if (!m->hidden[i]) return 0;
    /* a 3-D tensor is a stack of per-layer matrices; any other shape is one
     * matrix of its first dimension by the rest (a convolution kernel:
     * out-channels x in-channels x the window) */
    *count = t->ndim == 3 ? t->shape[0] : 1;
    *rows = t->ndim == 3 ? t->shape[1] : t->shape[0];
    *cols = (int)(t->numel / ((size_t)*count * (size_t)*rows));
    return 1;
}

/* the larger of the scratch the current largest and one more matrix need:
 * the update (rows x cols) beside the iteration's own, as optim.c's
 * hpt_muon_scratch_floats counts it (tests/test_muon.c holds them equal) */
static size_t ns_max(size_t cur, double rows, double cols) {
    size_t f = (size_t)rows * (size_t)cols + newton_schulz_scratch_floats((int)rows, (int)cols);
    return f > cur ? f : cur;
}

size_t hpt_model_conf_muon_floats(const uint32_t *conf, int nconf) {
    size_t n, f = 0;
    if (hpt_model_conf_params(conf, nconf, &n) != HPT_OK) return 0;
    /* the hidden matrices of each family's tensor table (gpt2.c, mlp.c,
     * cnn.c: the specs with hidden 1) */
    switch (conf[0]) {
    case HPT_FAMILY_GPT2: {
        double C = conf[5];
        f = ns_max(ns_max(f, 3 * C, C), 4 * C, C);
        break;
    }
    case HPT_FAMILY_MLP: {
        double din = conf[1];
        for (uint32_t l = 0; l < conf[3]; l++) {
            f = ns_max(f, conf[4 + l], din);
            din = conf[4 + l];
        }
        break;
    }
    case HPT_FAMILY_CNN: {
        double C0 = conf[1], c1 = conf[4], c2 = conf[5], HD = conf[6];
        double F = c2 * (double)(conf[2] / 2 / 2) * (double)(conf[3] / 2 / 2);
        f = ns_max(ns_max(ns_max(f, c1, C0 * 9), c2, c1 * 9), HD, F);
        break;
    }
    }
    return f;
}

/* ---------------------------------------------------------------- memory */

int hpt_model_conf_bytes(const uint32_t *conf, int nconf, int B, int T, const hpt_device *dev, size_t *param_bytes,
                         size_t *act_bytes) {
    size_t n, acts = 0;
    *param_bytes = *act_bytes = 0;
    if (hpt_model_conf_params(conf, nconf, &n) != HPT_OK || B < 1) return 0;
    /* outside a family's init limits the products below could overflow, and
     * its init refuses the config anyway (with its own message) */
    switch (conf[0]) {
    case HPT_FAMILY_GPT2: {
        hpt_gpt2_config c = {.vocab_size = (int)conf[1], .block_size = (int)conf[2], .n_layer = (int)conf[3],
                             .n_head = (int)conf[4], .n_embd = (int)conf[5]};
        if (T <= 0) T = c.block_size;
        if (c.block_size < 1 || c.block_size > 8192 || c.n_layer < 1 || c.n_layer > 256 || c.n_head < 1 ||
            c.n_embd < 1 || c.n_embd > 16384 || c.n_head > c.n_embd || B > 65536 || T > c.block_size)
            return 0;
        acts = hpt_gpt2_act_floats(&c, B, T, dev);
        break;
    }
    case HPT_FAMILY_MLP: {
        hpt_mlp_config c = {.n_in = (int)conf[1], .n_classes = (int)conf[2], .n_hidden = (int)conf[3]};
        for (int i = 0; i < HPT_MLP_MAX_HIDDEN; i++) c.hidden[i] = (int)conf[4 + i];
        if (B > (1 << 20)) return 0;
        acts = hpt_mlp_act_floats(&c, B);
        break;
    }
    case HPT_FAMILY_CNN: {
        hpt_cnn_config c = {.in_c = (int)conf[1], .in_h = (int)conf[2], .in_w = (int)conf[3], .c1 = (int)conf[4],
                            .c2 = (int)conf[5], .hidden = (int)conf[6], .n_classes = (int)conf[7]};
        if (c.in_c > 64 || c.in_h > 1024 || c.in_w > 1024 || c.c1 > 4096 || c.c2 > 4096 || B > (1 << 20)) return 0;
        acts = hpt_cnn_act_floats(&c, B);
        break;
    }
    default:
        return 0;
    }
    *param_bytes = n * sizeof(float);
    *act_bytes = acts * sizeof(float);
    return 1;
}

hpt_status hpt_model_check_memory(const uint32_t *conf, int nconf, int B, int T, const char *extra_name,
                                  size_t extra_bytes) {
    size_t pb, ab;
    if (!hpt_model_conf_bytes(conf, nconf, B, T, NULL, &pb, &ab)) return HPT_OK;  /* init refuses it */
    char detail[256], pbs[32], abs_[32], ebs[32];
    hpt_fmt_bytes(pbs, sizeof pbs, pb);
    hpt_fmt_bytes(abs_, sizeof abs_, ab);
    int k = snprintf(detail, sizeof detail, "parameters %s, gradients %s, activations %s", pbs, pbs, abs_);
    if (extra_name) {
        hpt_fmt_bytes(ebs, sizeof ebs, extra_bytes);
        snprintf(detail + k, sizeof detail - (size_t)k, ", %s %s", extra_name, ebs);
    }
    /* saturating: a sum past SIZE_MAX is "too much" all the same */
    size_t need = 2 * pb + ab;
    need = need + extra_bytes < need ? SIZE_MAX : need + extra_bytes;
    return hpt_mem_check(extra_name ? "training" : "the model", need, detail);
}
