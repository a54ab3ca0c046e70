/*
 * shards.h — token shards: a corpus tokenised once into uint16 ids and
 * memory-mapped by every run after (shards.c), and the writer behind
 * `hpt tokenize --out` (shard_write.c).
 *
 * Formats read: hpt's own (a directory with manifest.json and llm.c shards),
 * llm.c's shards (a 256 x int32 header: magic 20240520, version 1, token
 * count; then the uint16 ids) and nanoGPT's train.bin / val.bin (bare uint16
 * ids). A source holds train and validation shards; nothing is copied: the
 * batches gather their windows from the mappings.
 */
#ifndef HPT_SHARDS_H
#define HPT_SHARDS_H

#include "hpt.h"

#include <stddef.h>
#include <stdint.h>

#define HPT_SHARD_MANIFEST "manifest.json"

typedef struct hpt_shards hpt_shards;

/* Opens the shards spec names (hpt_data_is_shards): their headers and sizes
 * checked, mapped, the vocabulary from the manifest or, without one, from
 * kind (gpt2 or byte: llm.c and nanoGPT files carry none), and every id
 * checked against it (the manifest's max ids, else one scan). */
hpt_status hpt_shards_open(hpt_shards **out, const char *spec, hpt_tokenizer_kind kind);
void hpt_shards_free(hpt_shards *s);
/* "hpt", "llm.c" or "nanoGPT" */
const char *hpt_shards_format(const hpt_shards *s);
size_t hpt_shards_tokens(const hpt_shards *s, int split /* 0 train, 1 val */);
int hpt_shards_files(const hpt_shards *s, int split);
/* The i-th shard of a split: its ids (mapped), count and path. */
const uint16_t *hpt_shards_ids(const hpt_shards *s, int split, int i, size_t *n, const char **path);
/* The shards' tokenizer as a vocabulary without tokens (for model.bin). */
hpt_status hpt_shards_vocab(const hpt_shards *s, hpt_text **out);
/* Refuses shards made with another tokenizer than vocab's (a model's). */
hpt_status hpt_shards_match(const hpt_shards *s, const hpt_text *vocab, const char *whose);
/* Prepares windows of T+1 tokens (each inside one shard): refuses a split
 * with no shard long enough. */
hpt_status hpt_shards_windows(hpt_shards *s, int T);
/* As hpt_text_train_batch / hpt_text_val_batch, over every shard of the
 * split: a window start uniform over all starts of all shards. */
void hpt_shards_train_batch(const hpt_shards *s, uint64_t *rng_state, int B, int T, int *x, int *y);
void hpt_shards_val_batch(const hpt_shards *s, int i, int n, int B, int T, int *x, int *y);

/* A text file for tokenizer kind: gpt2 and char refuse NUL bytes and
 * invalid UTF-8 (with the offset, and what to pass when the file looks like
 * token shards); byte takes anything. */
hpt_status hpt_text_file_check(const char *path, hpt_tokenizer_kind kind);

/* Valid UTF-8 at s[i] (n bytes in all): its length and codepoint, or 0 for
 * a byte that does not start a valid sequence (overlong, surrogate, > U+10FFFF). */
int hpt_utf8_valid_at(const unsigned char *s, size_t n, size_t i, uint32_t *cp);

extern const char *const hpt_tokenizer_names[3];
/* text.c: the gpt2 vocabulary's directory set by hpt_set_vocab_dir ("" default) */
const char *hpt_text_vocab_dir(void);  /* by hpt_tokenizer_kind */

#endif /* HPT_SHARDS_H */
