/*
 * weights.c — hpt's state file: a versioned container of tagged sections.
 *
 *   header   "HPTSTATE" | u32 version | u32 header_size (32) | u32 0x01020304
 *            (byte-order check) | u32 flags | u64 file_size
 *   sections u8[4] tag | u32 reserved | u64 length | length bytes   (repeated)
 *   trailer  "END!" | u32 0 | u64 4 | u32 CRC-32 of every byte before it
 *
 * Version 1 defines CONF (model family and config words), TOKN (tokenizer,
 * text models only) and PARM (the parameter arena); checkpoint.c adds the
 * training-state sections (TCFG, ADAM, TRST, DATA) to the same container.
 * Readers skip tags they do not know, so `hpt sample` reads a checkpoint as
 * a model. docs/format.md has the layout.
 */
#include "../model/model.h"
#include "state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "HPTSTATE"
#define VERSION 1u
#define HEADER_SIZE 32u
#define BYTE_ORDER_MARK 0x01020304u

void hpt_state_section(hpt_writer *w, const char *tag, uint64_t len) {
    hpt_w_bytes(w, tag, 4);
    hpt_w_u32(w, 0);
    hpt_w_u64(w, len);
}

void hpt_state_header(hpt_writer *w, uint64_t size) {
    hpt_w_bytes(w, MAGIC, 8);
    hpt_w_u32(w, VERSION);
    hpt_w_u32(w, HEADER_SIZE);
    hpt_w_u32(w, BYTE_ORDER_MARK);
    hpt_w_u32(w, 0);
    hpt_w_u64(w, size);
}

void hpt_state_trailer(hpt_writer *w) {
    hpt_state_section(w, "END!", 4);
    uint32_t crc = w->crc;
    hpt_w_u32(w, crc);
}

/* TOKN: kind, V, then the char tokenizer's codepoints or the gpt2
 * tokenizer's token-table CRC (a different vocabulary is refused at load). */
static uint64_t tok_len(const hpt_text *tok) {
    hpt_tokenizer_kind k = tok ? hpt_text_kind(tok) : HPT_TOK_BYTE;
    return 8 + (k == HPT_TOK_CHAR ? 4ull * hpt_text_vocab_size(tok) : k == HPT_TOK_GPT2 ? 4 : 0);
}

uint64_t hpt_state_model_bytes(const hpt_model *m, const hpt_text *tok) {
    uint64_t conf_len = 4 + 4ull * m->nconf, parm_len = 8 + m->nparams * sizeof(float);
    return (16 + conf_len) + (tok ? 16 + tok_len(tok) : 0) + (16 + parm_len);
}

void hpt_state_write_model(hpt_writer *w, const hpt_model *m, const hpt_text *tok) {
    hpt_state_section(w, "CONF", 4 + 4ull * m->nconf);
    hpt_w_u32(w, (uint32_t)m->nconf);
    hpt_w_bytes(w, m->conf, 4ull * m->nconf);
    if (tok) {
        int V = hpt_text_vocab_size(tok);
        hpt_tokenizer_kind k = hpt_text_kind(tok);
        hpt_state_section(w, "TOKN", tok_len(tok));
        hpt_w_u32(w, (uint32_t)k);
        hpt_w_u32(w, (uint32_t)V);
        if (k == HPT_TOK_CHAR) hpt_w_bytes(w, hpt_text_codepoints(tok), 4ull * V);
        if (k == HPT_TOK_GPT2) hpt_w_u32(w, hpt_text_vocab_crc(tok));
    }
    hpt_state_section(w, "PARM", 8 + m->nparams * sizeof(float));
    hpt_w_u64(w, m->nparams);
    hpt_model_write(w, m, m->params, m->nparams);
}

typedef struct save_ctx {
    hpt_model *m;
    const hpt_text *tok;   /* NULL: no TOKN section */
} save_ctx;

static hpt_status write_weights(FILE *f, void *p) {
    save_ctx *s = p;
    hpt_writer w = {.f = f};
    hpt_state_header(&w, HEADER_SIZE + hpt_state_model_bytes(s->m, s->tok) + HPT_STATE_TRAILER_SIZE);
    hpt_state_write_model(&w, s->m, s->tok);
    hpt_state_trailer(&w);
    if (w.err) return hpt_fail(HPT_ERR_IO, "write failed: %s", strerror(w.err));
    return HPT_OK;
}

hpt_status hpt_weights_save(const char *path, hpt_model *m, const hpt_text *tok) {
    save_ctx s = {m, tok};
    return hpt_save_atomic(path, write_weights, &s);
}

#define BAD(...) do { st = hpt_fail(HPT_ERR_FORMAT, __VA_ARGS__); goto done; } while (0)

hpt_status hpt_state_read(const char *path, unsigned char **out, hpt_state_sec *secs, int *nsec) {
    *out = NULL; *nsec = 0;
    unsigned char *buf;
    size_t len;
    HPT_TRY(hpt_read_file(path, &buf, &len));
    hpt_status st = HPT_OK;
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
    for (;;) {
        char tag[4];
        uint32_t rsv;
        uint64_t slen;
        if (!hpt_cur_bytes(&c, tag, 4) || !hpt_cur_u32(&c, &rsv) || !hpt_cur_u64(&c, &slen) || slen > len - c.pos)
            BAD("'%s' has a truncated section", path);
        if (!memcmp(tag, "END!", 4)) break;
        if (*nsec >= HPT_STATE_MAX_SECTIONS) BAD("'%s' has more than %d sections", path, HPT_STATE_MAX_SECTIONS);
        hpt_state_sec *s = &secs[(*nsec)++];
        memcpy(s->tag, tag, 4);
        s->p = buf + c.pos;
        s->n = slen;
        c.pos += slen;
    }
done:
    if (st != HPT_OK) { free(buf); *nsec = 0; return st; }
    *out = buf;
    return HPT_OK;
}

const hpt_state_sec *hpt_state_find(const hpt_state_sec *secs, int nsec, const char *tag) {
    for (int i = 0; i < nsec; i++) if (!memcmp(secs[i].tag, tag, 4)) return &secs[i];
    return NULL;
}

hpt_status hpt_state_load_model(const char *path, const hpt_state_sec *secs, int nsec, int B, int T,
                                const hpt_device *dev, hpt_model **mout, hpt_text **tok) {
    *mout = NULL; *tok = NULL;
    hpt_status st = HPT_OK;
    hpt_model *m = NULL;
    hpt_text *t = NULL;
    int have_conf = 0, have_parm = 0;
    uint32_t conf[16] = {0}, nconf = 0;
    const unsigned char *parm = NULL;
    uint64_t parm_n = 0;
    for (int i = 0; i < nsec; i++) {
        const char *tag = secs[i].tag;
        uint64_t slen = secs[i].n;
        hpt_cursor s = {secs[i].p, (size_t)slen, 0};
        if (!memcmp(tag, "CONF", 4)) {
            if (have_conf || !hpt_cur_u32(&s, &nconf) || nconf < 1 || nconf > 16 || slen != 4 + 4ull * nconf)
                BAD("'%s': bad CONF section", path);
            for (uint32_t k = 0; k < nconf; k++) hpt_cur_u32(&s, &conf[k]);
            have_conf = 1;
        } else if (!memcmp(tag, "TOKN", 4)) {
            uint32_t kind, V;
            if (t) BAD("'%s' has two TOKN sections", path);
            if (!hpt_cur_u32(&s, &kind) || !hpt_cur_u32(&s, &V) || kind > 2) BAD("'%s': bad TOKN section", path);
            if (kind == HPT_TOK_GPT2) {
                uint32_t crc;
                if (slen != 12 || V != 50257 || !hpt_cur_u32(&s, &crc)) BAD("'%s': bad gpt2 TOKN section", path);
                if ((st = hpt_text_from_vocab(&t, HPT_TOK_GPT2, NULL, (int)V)) != HPT_OK) goto done;
                if (hpt_text_vocab_crc(t) != crc)
                    BAD("'%s' was made with a GPT-2 vocabulary whose token table has CRC %08x; the one loaded has "
                        "%08x (--vocab / HPT_VOCAB point elsewhere?)", path, crc, hpt_text_vocab_crc(t));
            } else if (kind == 1) {
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
            if (have_parm || !hpt_cur_u64(&s, &parm_n) || parm_n * 4 != slen - 8) BAD("'%s': bad PARM section", path);
            parm = s.p + 8;
            have_parm = 1;
        }  /* other tags: training state or sections of later versions */
    }
    if (!have_conf || !have_parm) BAD("'%s' lacks a CONF or PARM section", path);
    if (conf[0] == HPT_FAMILY_GPT2 && (!t || (uint32_t)hpt_text_vocab_size(t) != conf[1]))
        BAD("'%s': the GPT-2 vocabulary (%u) has no matching tokenizer section", path, conf[1]);
    size_t want;
    if ((st = hpt_model_conf_params(conf, (int)nconf, &want)) != HPT_OK) goto done;
    if (parm_n != want)  /* before allocating: the config may be forged */
        BAD("'%s' holds %llu parameters, the config needs %zu", path, (unsigned long long)parm_n, want);
    st = hpt_model_from_conf(&m, conf, (int)nconf, B, T, dev);
    if (st != HPT_OK) goto done;
    if (parm_n != m->nparams)
        BAD("'%s' holds %llu parameters, the config needs %zu", path, (unsigned long long)parm_n, m->nparams);
    m->dev->upload(m->params, (const float *)parm, parm_n);
done:
    if (st != HPT_OK) { hpt_model_free(m); hpt_text_free(t); return st; }
    *mout = m; *tok = t;
    return HPT_OK;
}

hpt_status hpt_weights_gpt2_info(const char *path, hpt_gpt2_config *cfg, hpt_tokenizer_kind *tok) {
    unsigned char *buf;
    hpt_state_sec secs[HPT_STATE_MAX_SECTIONS];
    int nsec;
    HPT_TRY(hpt_state_read(path, &buf, secs, &nsec));
    const hpt_state_sec *cf = hpt_state_find(secs, nsec, "CONF"), *tk = hpt_state_find(secs, nsec, "TOKN");
    uint32_t w[7] = {0};
    if (cf && cf->n == 4 + 6 * 4) memcpy(w, cf->p, sizeof(uint32_t) * 7);
    uint32_t kind = 0;
    if (tk && tk->n >= 8) memcpy(&kind, tk->p, 4);
    free(buf);
    if (w[0] != 6 || w[1] != HPT_FAMILY_GPT2 || !tk)
        return hpt_fail(HPT_ERR_FORMAT, "'%s' is not a GPT-2 language model file", path);
    *cfg = (hpt_gpt2_config){.vocab_size = (int)w[2], .block_size = (int)w[3], .n_layer = (int)w[4],
                             .n_head = (int)w[5], .n_embd = (int)w[6]};
    *tok = (hpt_tokenizer_kind)kind;
    return HPT_OK;
}

hpt_status hpt_state_params_finite(const char *path, const void *params, size_t n, const hpt_model *m) {
    const unsigned char *p = params;
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, p + 4 * i, 4);  /* a section's floats need not be aligned */
        if (isfinite(v)) continue;
        int nt;
        const hpt_tensor_info *t = hpt_model_tensors(m, &nt), *in = NULL;
        for (int k = 0; k < nt && !in; k++) if (i >= t[k].offset && i < t[k].offset + t[k].numel) in = &t[k];
        return hpt_fail(HPT_ERR_NUMERIC, "'%s': the model's weights are not finite: %s at parameter %zu (tensor "
                        "'%s', element %zu); a diverged run or a damaged file, which eval, sample and export refuse",
                        path, isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf", i, in ? in->name : "?",
                        in ? i - in->offset : i);
    }
    return HPT_OK;
}

/* finite: refuse parameters that are not all finite (checked on the file's
 * bytes, in host memory whatever the device) */
static hpt_status load_file(const char *path, int B, int T, const char *device, int finite, hpt_model **m,
                            hpt_text **tok) {
    *m = NULL; *tok = NULL;
    hpt_device *dev = NULL;
    if (device) HPT_TRY(hpt_device_open(device, NULL, &dev));
    unsigned char *buf;
    hpt_state_sec secs[HPT_STATE_MAX_SECTIONS];
    int nsec;
    hpt_status st = hpt_state_read(path, &buf, secs, &nsec);
    if (st != HPT_OK) { hpt_device_close(dev); return st; }
    st = hpt_state_load_model(path, secs, nsec, B, T, dev, m, tok);
    if (st == HPT_OK) (*m)->own_dev = dev;   /* the model closes it */
    else hpt_device_close(dev);
    const hpt_state_sec *parm = hpt_state_find(secs, nsec, "PARM");
    if (st == HPT_OK && finite && parm) st = hpt_state_params_finite(path, parm->p + 8, (size_t)(parm->n - 8) / 4, *m);
    if (st != HPT_OK && *m) { hpt_model_free(*m); hpt_text_free(*tok); *m = NULL; *tok = NULL; }
    free(buf);
    return st;
}

/* A named device (sample, eval, a device's copy) is checked: they use the
 * model as it is. NULL is not: --init from a model whose weights are not
 * finite is the trainer's to report (its NaN check stops at step 1 with the
 * reason), and the binding's sample refuses non-finite logits. */
hpt_status hpt_weights_load(const char *path, int B, int T, const char *device, hpt_model **m, hpt_text **tok) {
    return load_file(path, B, T, device, device != NULL, m, tok);
}
