/*
 * task.h — what the trainer trains on: a data source and the model built for
 * it. A task owns its data, its batch buffers and its data cursor; the
 * trainer asks it for batches and never looks at what is inside them, so the
 * optimizer, the run loop (and later the hybrid controller) are the same for
 * every task. Tasks: text (GPT-2 on a text file) and fashion-mnist (MLP or
 * CNN on Debian's Fashion-MNIST IDX files).
 */
#ifndef HPT_TASK_H
#define HPT_TASK_H

#include "../model/model.h"

#define HPT_CURSOR_MAX 64

typedef struct hpt_task hpt_task;
struct hpt_task {
    const char *name;
    void *impl;
    hpt_model *model;          /* built by the task's init; the trainer frees it */
    const hpt_text *text;      /* text tasks: the tokenizer, saved into model.bin */
    int classify;              /* 1: evaluation also reports accuracy */
    int batch_size;            /* micro-batch size */
    int tokens_per_sample;     /* T for text, 1 for images */
    int x_dim;                 /* floats per sample in batch x (0: token batches) */
    size_t train_examples;     /* windows or images available per epoch */
    /* The data's identity: the bytes the task read (text: the --data file;
     * token shards: every file, hpt_shards_identity; fashion-mnist: the
     * four IDX payloads after gunzip, train images and labels, then test
     * images and labels) and their CRC-32, zlib's.
     * Checkpoints record it (DSRC) and a resume compares, so a run does not
     * train on silently after its data changed. data_source
     * names the file or directory in messages (the trainer's string). */
    uint64_t data_size;
    uint32_t data_crc;
    const char *data_source;

    /* Next training batch (buffers owned by the task, valid until the next
     * call); advances the data cursor. A data source read as the run goes
     * (token shards) can fail mid-run, a file truncated under it: the
     * status says so, naming the file, and the run ends with the last
     * checkpoint as it was. */
    hpt_status (*train_batch)(hpt_task *t, hpt_batch *b);
    /* Validation: a fixed number of fixed batches. */
    int (*val_batches)(const hpt_task *t);
    hpt_status (*val_batch)(hpt_task *t, int i, hpt_batch *b);
    /* Lines describing the data for the start-of-run log. */
    void (*describe)(const hpt_task *t, char *buf, size_t n);
    size_t (*data_bytes)(const hpt_task *t);
    /* The data cursor, for checkpoints: cursor_save writes at most
     * HPT_CURSOR_MAX bytes and returns the count; cursor_load restores it
     * (same task, same config), returning 0 when the bytes do not fit. */
    size_t (*cursor_save)(const hpt_task *t, unsigned char *buf);
    int (*cursor_load)(hpt_task *t, const unsigned char *buf, size_t n);
    void (*free)(hpt_task *t);
};

hpt_status hpt_task_text_init(hpt_task **out, const hpt_train_config *c, const hpt_device *dev);
/* text.c's, for the text task's identity: the size and CRC-32 of the file a
 * corpus was read from (0 and 0 for one built from a vocabulary alone). */
void hpt_text_source(const hpt_text *t, uint64_t *bytes, uint32_t *crc);
hpt_status hpt_task_fashion_init(hpt_task **out, const hpt_train_config *c, const hpt_device *dev);

#endif /* HPT_TASK_H */
