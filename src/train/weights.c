/*
 * weights.c — hpt's state file: a versioned container of tagged sections.
 *
 *   header   "HPTSTATE" | u32 version | u32 header_size (32) | u32 0x01020304
 *            (byte-order check) | u32 flags | u64 file_size
 *   sections u8[4] tag | u32 reserved | u64 length | length bytes   (repeated)
 *   trailer  "END!" | u32 0 | u64 4 | u32 CRC-32 of every byte before it
 *
 * Version 1 defines CONF (model family and config words), TOKN (tokenizer,
 * text models only) and PARM (the parameter arena). Readers skip tags they do not know, so a later version
 * can add optimizer, RNG, data and hybrid sections (issue: whole-state
 * checkpoints) and still serve `hpt sample`. docs/format.md has the layout.
 */
#include "../model/model.h"

#include <stdlib.h>
#include <string.h>

#define MAGIC "HPTSTATE"
#define VERSION 1u
#define HEADER_SIZE 32u
#define BYTE_ORDER_MARK 0x01020304u

typedef struct save_ctx {
    hpt_model *m;
    const hpt_text *tok;   /* NULL: no TOKN section */
} save_ctx;

static void section(hpt_writer *w, const char *tag, uint64_t len) {
    hpt_w_bytes(w, tag, 4);
    hpt_w_u32(w, 0);
    hpt_w_u64(w, len);
}

static hpt_status write_weights(FILE *f, void *p) {
    save_ctx *s = p;
    int V = s->tok ? hpt_text_vocab_size(s->tok) : 0;
    int is_char = s->tok && hpt_text_kind(s->tok) == HPT_TOK_CHAR;
    uint64_t conf_len = 4 + 4ull * s->m->nconf, tok_len = 8 + (is_char ? 4ull * V : 0);
    uint64_t parm_len = 8 + s->m->nparams * sizeof(float);
    uint64_t size = HEADER_SIZE + (16 + conf_len) + (s->tok ? 16 + tok_len : 0) + (16 + parm_len) + (16 + 4);

    hpt_writer w = {.f = f};
    hpt_w_bytes(&w, MAGIC, 8);
    hpt_w_u32(&w, VERSION);
    hpt_w_u32(&w, HEADER_SIZE);
    hpt_w_u32(&w, BYTE_ORDER_MARK);
    hpt_w_u32(&w, 0);
    hpt_w_u64(&w, size);

    section(&w, "CONF", conf_len);
    hpt_w_u32(&w, (uint32_t)s->m->nconf);
    hpt_w_bytes(&w, s->m->conf, 4ull * s->m->nconf);

    if (s->tok) {
        section(&w, "TOKN", tok_len);
        hpt_w_u32(&w, is_char ? 1 : 0);
        hpt_w_u32(&w, (uint32_t)V);
        if (is_char) hpt_w_bytes(&w, hpt_text_codepoints(s->tok), 4ull * V);
    }

    section(&w, "PARM", parm_len);
    hpt_w_u64(&w, s->m->nparams);
    hpt_w_bytes(&w, s->m->params, s->m->nparams * sizeof(float));

    section(&w, "END!", 4);
    uint32_t crc = w.crc;
    hpt_w_u32(&w, crc);
    if (w.err) return hpt_fail(HPT_ERR_IO, "write failed: %s", strerror(w.err));
    return HPT_OK;
}

hpt_status hpt_weights_save(const char *path, hpt_model *m, const hpt_text *tok) {
    save_ctx s = {m, tok};
    return hpt_save_atomic(path, write_weights, &s);
}

#define BAD(...) do { st = hpt_fail(HPT_ERR_FORMAT, __VA_ARGS__); goto done; } while (0)

hpt_status hpt_weights_load(const char *path, int B, int T, hpt_model **mout, hpt_text **tok) {
    *mout = NULL; *tok = NULL;
    unsigned char *buf;
    size_t len;
    HPT_TRY(hpt_read_file(path, &buf, &len));
    hpt_status st = HPT_OK;
    hpt_model *m = NULL;
    hpt_text *t = NULL;
    hpt_cursor c = {buf, len, 0};
    char magic[8];
    uint32_t version, hsize, bom, flags;
    uint64_t fsize;
    if (!hpt_cur_bytes(&c, magic, 8) || memcmp(magic, MAGIC, 8) != 0)
        BAD("'%s' is not an hpt state file (bad magic)", path);
    if (!hpt_cur_u32(&c, &version) || !hpt_cur_u32(&c, &hsize) || !hpt_cur_u32(&c, &bom) ||
        !hpt_cur_u32(&c, &flags) || !hpt_cur_u64(&c, &fsize))
        BAD("'%s' is truncated inside its header", path);
    if (version > VERSION)
        BAD("'%s' has format version %u, newer than this hpt (%u): upgrade hpt to read it", path, version, VERSION);
    if (version < 1) BAD("'%s' has unknown format version %u", path, version);
    if (bom != BYTE_ORDER_MARK) BAD("'%s' was written with another byte order", path);
    if (hsize < HEADER_SIZE || hsize > len) BAD("'%s' has a bad header size %u", path, hsize);
    if (fsize != len)
        BAD("'%s' is %zu bytes but its header says %llu: truncated or appended to", path, len, (unsigned long long)fsize);
    if (len < hsize + 20) BAD("'%s' is truncated", path);
    uint32_t crc_stored;
    memcpy(&crc_stored, buf + len - 4, 4);
    if (hpt_crc32(0, buf, len - 4) != crc_stored) BAD("'%s' is corrupt (CRC-32 mismatch)", path);
    c.pos = hsize;

    int have_conf = 0, have_parm = 0, have_end = 0;
    uint32_t conf[16] = {0}, nconf = 0;
    const unsigned char *parm = NULL;
    uint64_t parm_n = 0;
    while (!have_end) {
        char tag[4];
        uint32_t rsv;
        uint64_t slen;
        if (!hpt_cur_bytes(&c, tag, 4) || !hpt_cur_u32(&c, &rsv) || !hpt_cur_u64(&c, &slen) || slen > len - c.pos)
            BAD("'%s' has a truncated section", path);
        hpt_cursor s = {buf + c.pos, (size_t)slen, 0};
        c.pos += slen;
        if (!memcmp(tag, "CONF", 4)) {
            if (have_conf || !hpt_cur_u32(&s, &nconf) || nconf < 1 || nconf > 16 || slen != 4 + 4ull * nconf)
                BAD("'%s': bad CONF section", path);
            for (uint32_t i = 0; i < nconf; i++) hpt_cur_u32(&s, &conf[i]);
            have_conf = 1;
        } else if (!memcmp(tag, "TOKN", 4)) {
            uint32_t kind, V;
            if (t) BAD("'%s' has two TOKN sections", path);
            if (!hpt_cur_u32(&s, &kind) || !hpt_cur_u32(&s, &V) || kind > 1) BAD("'%s': bad TOKN section", path);
            if (kind == 1) {
                if (V < 2 || V > (1u << 24) || (uint64_t)V * 4 != slen - 8) BAD("'%s': bad char vocabulary", path);
                uint32_t *cps = malloc((size_t)V * 4);
                if (!cps) { st = hpt_fail(HPT_ERR_NOMEM, "out of memory"); goto done; }
                hpt_cur_bytes(&s, cps, (size_t)V * 4);
                st = hpt_text_from_vocab(&t, HPT_TOK_CHAR, cps, (int)V);
                free(cps);
                if (st != HPT_OK) goto done;
            } else {
                HPT_ASSERT(hpt_text_from_vocab(&t, HPT_TOK_BYTE, NULL, 256) == HPT_OK);
            }
        } else if (!memcmp(tag, "PARM", 4)) {
            if (!hpt_cur_u64(&s, &parm_n) || parm_n * 4 != slen - 8) BAD("'%s': bad PARM section", path);
            parm = s.p + 8;
            have_parm = 1;
        } else if (!memcmp(tag, "END!", 4)) {
            have_end = 1;
        }  /* unknown tags: sections of later versions, skipped */
    }
    if (!have_conf || !have_parm) BAD("'%s' lacks a CONF or PARM section", path);
    if (conf[0] == HPT_FAMILY_GPT2 && (!t || (uint32_t)hpt_text_vocab_size(t) != conf[1]))
        BAD("'%s': the GPT-2 vocabulary (%u) has no matching tokenizer section", path, conf[1]);
    st = hpt_model_from_conf(&m, conf, (int)nconf, B, T);
    if (st != HPT_OK) goto done;
    if (parm_n != m->nparams)
        BAD("'%s' holds %llu parameters, the config needs %zu", path, (unsigned long long)parm_n, m->nparams);
    memcpy(m->params, parm, parm_n * sizeof(float));
done:
    free(buf);
    if (st != HPT_OK) { hpt_model_free(m); hpt_text_free(t); return st; }
    *mout = m; *tok = t;
    return HPT_OK;
}
