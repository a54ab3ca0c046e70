/*
 * shards.h — token shards: a corpus tokenised once into uint16 ids and
 * read window by window by every run after (shards.c), and the writer behind
 * `hpt tokenize --out` (shard_write.c).
 *
 * Formats read: hpt's own (a directory with manifest.json and llm.c shards),
 * llm.c's shards (a 256 x int32 header: magic 20240520, version 1, token
 * count; then the uint16 ids) and nanoGPT's train.bin / val.bin (bare uint16
 * ids). A source holds train and validation shards; nothing is copied: the
 * batches read their windows from the files (pread).
 */
#ifndef HPT_SHARDS_H
#define HPT_SHARDS_H

#include "hpt.h"

#include <stddef.h>
#include <stdint.h>

#define HPT_SHARD_MANIFEST "manifest.json"

typedef struct hpt_shards hpt_shards;

/* Opens the shards spec names (hpt_data_is_shards): their headers and sizes
 * checked, each file read once (its CRC-32 for the identity, its largest
 * id), the vocabulary from the manifest or, without one, from kind (gpt2
 * or byte: llm.c and nanoGPT files carry none), and every id checked
 * against it and against the manifest's max_id. The files stay open and
 * are read with pread (shards.c says why not mapped). val_only: the train
 * files are left out (hpt eval). */
hpt_status hpt_shards_open(hpt_shards **out, const char *spec, hpt_tokenizer_kind kind, int val_only);
void hpt_shards_free(hpt_shards *s);
/* "hpt", "llm.c" or "nanoGPT" */
const char *hpt_shards_format(const hpt_shards *s);
size_t hpt_shards_tokens(const hpt_shards *s, int split /* 0 train, 1 val */);
int hpt_shards_files(const hpt_shards *s, int split);
size_t hpt_shards_file_tokens(const hpt_shards *s, int split, int i);
/* n ids of the i-th shard of a split from token off, into dst (n ints):
 * a short read (the file truncated under the run) or an id outside the
 * vocabulary is an error naming the file and the offset. */
hpt_status hpt_shards_read(const hpt_shards *s, int split, int i, size_t off, size_t n, int *dst);
/* The source's identity, as a checkpoint records it (DSRC) and compare's
 * reuse key holds it: the bytes of every file read and one CRC-32 over
 * each file's split, size and bytes, in order. */
void hpt_shards_identity(const hpt_shards *s, uint64_t *bytes, uint32_t *crc);
/* The identity of whatever --data PATH names, without a vocabulary: a
 * text file's size and CRC-32 (hpt_text_source's), or the shards' as
 * above. */
hpt_status hpt_data_identity(const char *spec, uint64_t *bytes, uint32_t *crc);
/* 1 for the names hpt tokenize --out uses before its manifest is written
 * (.part-N.tmp, shard_{train,val}_N.bin and their atomic-save temps):
 * what marks a directory as an unfinished tokenisation. */
int hpt_shard_leftover_name(const char *name);
/* The shards' tokenizer as a vocabulary without tokens (for model.bin). */
hpt_status hpt_shards_vocab(const hpt_shards *s, hpt_text **out);
/* Refuses shards made with another tokenizer than vocab's (a model's). */
hpt_status hpt_shards_match(const hpt_shards *s, const hpt_text *vocab, const char *whose);
/* Prepares windows of T+1 tokens (each inside one shard): refuses a split
 * with no shard long enough. */
hpt_status hpt_shards_windows(hpt_shards *s, int T);
/* As hpt_text_train_batch / hpt_text_val_batch, over every shard of the
 * split: a window start uniform over all starts of all shards. A failed
 * read is returned (the cursor then is not advanced). */
hpt_status hpt_shards_train_batch(hpt_shards *s, uint64_t *rng_state, int B, int T, int *x, int *y);
hpt_status hpt_shards_val_batch(hpt_shards *s, int i, int n, int B, int T, int *x, int *y);

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
