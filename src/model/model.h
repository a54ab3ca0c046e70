/*
 * model.h — what every model looks like to the layers above it.
 *
 * A model is two flat arenas (parameters, gradients; same length, same
 * offsets) described by a tensor table, plus a forward/backward pair. The
 * optimizer, the weights file and the hybrid trainer only ever touch these:
 * an update is a loop over the arena, a snapshot is a memcpy, a per-tensor
 * scale indexes the table. A model family implements hpt_model_ops and fills
 * the common fields; nothing above this header knows which family it runs.
 */
#ifndef HPT_MODEL_H
#define HPT_MODEL_H

#include "hpt.h"
#include "../base/base.h"
#include "../device/device.h"

#define HPT_MAX_TENSORS 32

typedef struct hpt_model_ops {
    hpt_status (*forward)(hpt_model *m, const hpt_batch *b, float *loss);
    hpt_status (*backward)(hpt_model *m, float loss_scale);
    /* optional: backward that writes every gradient instead of accumulating
     * (the bits of zero_grad + backward, without the zeroing sweep) */
    hpt_status (*backward_first)(hpt_model *m, float loss_scale);
    double (*train_flops)(const hpt_model *m, int B, int T);
    void (*free_impl)(void *impl);
} hpt_model_ops;

struct hpt_model {
    const hpt_model_ops *ops;
    void *impl;                      /* family-specific state (config, activations) */
    char desc[160];

    const hpt_device *dev;           /* where the arenas live: their allocator and the sweeps
                                        over them (the optimizer, copies, norms) */
    hpt_device *own_dev;             /* dev, where the model opened it itself (by name: a
                                        loaded model's); closed with the model */
    float *params;                   /* (nparams) the parameter arena */
    float *grads;                    /* (nparams) the gradient arena, same offsets; NULL in a
                                        parameters-only model */
    int params_only;                 /* set before hpt_model_alloc_params: no gradient arena
                                        and no activations (max_B, max_T 0: forward refuses) */
    size_t nparams;
    hpt_tensor_info tensors[HPT_MAX_TENSORS];
    int ntensors;
    /* per tensor, 1: a hidden weight matrix, the ones --optimizer muon
     * orthogonalises (hpt_tensor_spec's hidden; not in the public table,
     * whose layout bindings mirror) */
    unsigned char hidden[HPT_MAX_TENSORS];

    size_t act_bytes;                /* activation arena(s) owned by impl */
    int max_B, max_T;                /* shapes reserved at init */
    int in_dim;                      /* floats per sample a classifier reads from batch->x;
                                        0: a token model (gpt2). hpt_model_forward checks
                                        batch->x_dim against it, since the families copy
                                        B x in_dim floats from x without knowing its length */

    /* the family and its config as fixed-width words, written to the CONF
     * section of state files; hpt_model_from_conf rebuilds the model */
    uint32_t conf[16];
    int nconf;

    /* last forward: outputs for sampling/evaluation */
    const float *logits;             /* (B, T, out_row): logits, or probabilities
                                        after a forward with targets (same argmax) */
    size_t logit_bytes;              /* 0: floats; else hpt_act elements of this size
                                        (the device's activation type, read with its
                                        download_acts) */
    int n_out, out_row;
    int last_rows;                   /* rows of logits the last forward wrote (B, or B x T) */
    int have_targets;                /* backward is legal only after a forward with targets */
    size_t backward_calls;           /* backward passes run: tests count calls, not time */
};

/* Fills m->tensors from parallel name/shape arrays, assigning consecutive
 * offsets, and allocates params and (unless m->params_only) grads. Used by
 * every family's init. */
/* hidden 1: a weight matrix between two hidden layers (a 3-D shape is a
 * stack of shape[0] matrices, one per layer; a 4-D convolution kernel is
 * the matrix out-channels x the rest), not an embedding, an output head, a
 * bias or a gain: where --optimizer muon applies Muon (hpt_muon_matrix). */
typedef struct hpt_tensor_spec { const char *name; int ndim; int shape[4]; int decay; int hidden; } hpt_tensor_spec;
hpt_status hpt_model_alloc_params(hpt_model *m, const hpt_tensor_spec *specs, int n);
/* A GPT-2 holding its parameter arena only (zeroed): no gradients, no
 * activations, so forward and backward refuse it. For code that only fills
 * and saves weights (hpt import): a model file is converted at the memory of
 * its parameters, not of a training model. */
hpt_status hpt_gpt2_init_params_only(hpt_model **out, const hpt_gpt2_config *cfg);
/* Model families, the first word of conf. */
enum { HPT_FAMILY_GPT2 = 1, HPT_FAMILY_MLP = 2, HPT_FAMILY_CNN = 3 };

/* Each family's activation arena in floats, computed from its own size table
 * without allocating (for hpt_model_check_memory; configs within the
 * family's init limits). */
/* on dev (NULL: the CPU), whose kernels' scratch and activation element
 * (its precision) it counts */
size_t hpt_gpt2_act_floats(const hpt_gpt2_config *cfg, int B, int T, const hpt_device *dev);
size_t hpt_mlp_act_floats(const hpt_mlp_config *cfg, int B);
size_t hpt_cnn_act_floats(const hpt_cnn_config *cfg, int B);

/* The bytes a model of this config needs at batch B x T (T <= 0: its
 * block size) on dev (NULL: the CPU): parameters (as many again for
 * gradients) and activations, from the family's size tables, without
 * allocating. Returns 0 (and leaves the sizes 0) for a config the family's
 * init would refuse. */
int hpt_model_conf_bytes(const uint32_t *conf, int nconf, int B, int T, const hpt_device *dev, size_t *param_bytes,
                         size_t *act_bytes);
/* Refuses (HPT_ERR_NOMEM, with the figures) a model whose arenas, plus
 * extra_bytes named extra_name (a trainer's AdamW state; NULL: none), exceed
 * the memory available (hpt_mem_check). Called before anything is allocated. */
hpt_status hpt_model_check_memory(const uint32_t *conf, int nconf, int B, int T, const char *extra_name,
                                  size_t extra_bytes);

/* A model's buffers (its arenas and the trainer's beside them) are its
 * device's memory: the host reads them through these, in pieces. The
 * CRC-32 (hpt_crc32's, chained) of n floats at src, and hpt_w_bytes of
 * them. */
uint32_t hpt_model_crc32(const hpt_model *m, const float *src, size_t n);
void hpt_model_write(hpt_writer *w, const hpt_model *m, const float *src, size_t n);

/* Tensor i as Muon sees it (m->hidden[i]): count matrices of rows x cols
 * each, one after the other; 0 where it is not a hidden matrix. */
int hpt_muon_matrix(const hpt_model *m, int i, int *count, int *rows, int *cols);
/* The floats the Newton-Schulz scratch needs for the largest hidden matrix
 * of the model this config builds (newton_schulz_scratch_floats), without
 * building it: for the memory check before anything is allocated. */
size_t hpt_model_conf_muon_floats(const uint32_t *conf, int nconf);

/* Pointer to tensor i inside an arena (params or grads). */
static inline float *hpt_tensor_ptr(float *arena, const hpt_model *m, int i) {
    return arena + m->tensors[i].offset;
}

#endif /* HPT_MODEL_H */
