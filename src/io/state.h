/*
 * state.h — the state-file container of weights.c, for the checkpoint code
 * (src/train/checkpoint.c): writing the header, sections and CRC trailer, and
 * reading a file back as a validated list of sections (docs/format.md).
 */
#ifndef HPT_STATE_H
#define HPT_STATE_H

#include "../base/base.h"
#include "../device/device.h"

/* Header (32 bytes) for a file of `size` bytes in all, trailer included. */
void hpt_state_header(hpt_writer *w, uint64_t size);
/* A section's 16-byte header; the caller writes len payload bytes after it. */
void hpt_state_section(hpt_writer *w, const char *tag, uint64_t len);
/* The END! trailer with the CRC of everything before it. */
void hpt_state_trailer(hpt_writer *w);
#define HPT_STATE_HEADER_SIZE 32u
#define HPT_STATE_TRAILER_SIZE 20u

/* The CONF, TOKN and PARM sections of a model: their total bytes (section
 * headers included) and the writer of them. tok may be NULL. */
uint64_t hpt_state_model_bytes(const hpt_model *m, const hpt_text *tok);
void hpt_state_write_model(hpt_writer *w, const hpt_model *m, const hpt_text *tok);

typedef struct hpt_state_sec { char tag[4]; const unsigned char *p; uint64_t n; } hpt_state_sec;
#define HPT_STATE_MAX_SECTIONS 32

/* Reads path whole and checks magic, version, byte order, size and CRC, then
 * splits it into sections (END! excluded). *buf owns the bytes (free it). */
hpt_status hpt_state_read(const char *path, unsigned char **buf, hpt_state_sec *secs, int *nsec);
/* The first section with tag, or NULL. */
const hpt_state_sec *hpt_state_find(const hpt_state_sec *secs, int nsec, const char *tag);
/* A model and tokenizer from a file's sections, reserved for B x T, its
 * arenas in dev's memory. */
hpt_status hpt_state_load_model(const char *path, const hpt_state_sec *secs, int nsec, int B, int T,
                                const hpt_device *dev, hpt_model **m, hpt_text **tok);
/* HPT_ERR_NUMERIC, naming the tensor and element, unless each of the n
 * little-endian floats at params (a PARM section's, or a host model's
 * arena; m names the tensors) is finite. */
hpt_status hpt_state_params_finite(const char *path, const void *params, size_t n, const hpt_model *m);

#endif /* HPT_STATE_H */
