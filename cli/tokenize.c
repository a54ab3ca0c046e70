/*
 * tokenize.c — `hpt tokenize`: a file's token ids, one per line (or, with
 * --decode, ids back to their bytes). How the tokenizer tests look at the
 * encoding, and handy for counting a corpus's tokens. With --out DIR, the
 * files become token shards for training (src/data/shard_write.c).
 */
#include "cli.h"
#include "../src/base/base.h"   /* hpt_read_file */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void usage_tokenize(FILE *f) {
    fputs("  hpt tokenize [--tokenizer gpt2|byte] [--vocab DIR] [--decode] FILE\n"
          "                         FILE's token ids, one per line (gpt2 by default); --decode: FILE holds\n"
          "                         ids (whitespace-separated), their bytes go to stdout\n"
          "  hpt tokenize --out DIR [--tokenizer gpt2|byte|char] [--threads N] [--shard-tokens N]\n"
          "               [--val-tokens N] [--doc-sep STR] FILE|DIR...\n"
          "                         token shards for --data DIR: llm.c's format (uint16 ids) and\n"
          "                         DIR/manifest.json; each file (a DIR's files) a document, or split at\n"
          "                         --doc-sep (C escapes: '\\n\\n'); gpt2 puts its end-of-text token before\n"
          "                         each; the first --val-tokens (default: a tenth, at most a shard of\n"
          "                         --shard-tokens, default 100M) are validation; the same bytes at any\n"
          "                         --threads (default: all cores)\n", f);
}

/* --out: the files as shards (the library's hpt_tokenize_shards) */
static int shard_files(const char *out, char **paths, int n, const hpt_tokenize_options *o) {
    hpt_tokenize_result r;
    hpt_status st = hpt_tokenize_shards(out, (const char *const *)paths, n, o, &r);
    if (st != HPT_OK) die_status(st);
    fprintf(stderr, "hpt: %d document(s), %llu bytes: %zu train tokens in %d shard(s), %zu val tokens in %d, in %s\n",
            r.documents, (unsigned long long)r.bytes, r.tokens[0], r.shards[0], r.tokens[1], r.shards[1], out);
    return 0;
}

static int encode_file(hpt_tokenizer_kind kind, const char *path) {
    unsigned char *buf;
    size_t len;
    hpt_status st = hpt_read_file(path, &buf, &len);
    if (st != HPT_OK) die_status(st);
    free(buf);
    if (len == 0) return 0;  /* no tokens (hpt_text_load refuses an empty corpus) */
    hpt_text *t;
    if ((st = hpt_text_load(&t, path, kind)) != HPT_OK) die_status(st);
    size_t n;
    const int *ids = hpt_text_ids(t, &n);
    /* a failed write (a full disk) stops the listing; main's close_stdout
     * reports it and exits 1 */
    for (size_t i = 0; i < n && !ferror(stdout); i++) printf("%d\n", ids[i]);
    hpt_text_free(t);
    return 0;
}

/* The separators between ids. Not strchr(" \t\r\n", c): it finds the
 * string's own terminator for c == 0, which made NUL bytes separators. */
static int is_sep(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int decode_file(hpt_tokenizer_kind kind, const char *path) {
    unsigned char *buf;
    size_t len;
    hpt_status st = hpt_read_file(path, &buf, &len);
    if (st != HPT_OK) die_status(st);
    /* ids are decimal text: a NUL byte means the file is something else (a
     * binary, UTF-16 text), and strtol would stop at it as at the end of the
     * buffer, so it is refused up front, naming its line */
    const unsigned char *nul = memchr(buf, 0, len);
    if (nul) {
        size_t line = 1;
        for (const unsigned char *p = buf; p < nul; p++) line += *p == '\n';
        fprintf(stderr, "hpt: tokenize --decode: '%s' line %zu: a NUL byte (ids are decimal text separated by "
                "spaces, tabs or newlines)\n", path, line);
        exit(1);
    }
    hpt_text *t;
    if ((st = hpt_text_from_vocab(&t, kind, NULL, kind == HPT_TOK_GPT2 ? 50257 : 256)) != HPT_OK) die_status(st);
    const int V = hpt_text_vocab_size(t);
    char out[HPT_TOKEN_MAX_BYTES];
    size_t k = 0, line = 1;
    while (k < len && !ferror(stdout)) {  /* a failed write: close_stdout (main.c) exits 1 */
        while (k < len && is_sep(buf[k])) line += buf[k++] == '\n';
        if (k == len) break;
        char *end;
        long id = strtol((const char *)buf + k, &end, 10);
        if (end == (const char *)buf + k || (end < (const char *)buf + len && !is_sep((unsigned char)*end)) || id < 0 ||
            id >= V) {
            fprintf(stderr, "hpt: tokenize --decode: '%s' line %zu: not a token id in [0, %d)\n", path, line, V);
            exit(1);
        }
        fwrite(out, 1, (size_t)hpt_text_decode(t, (int)id, out), stdout);
        k = (size_t)(end - (const char *)buf);
    }
    hpt_text_free(t);
    free(buf);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL, *kind_name = "gpt2", *out = NULL;
    int decode = 0, npaths = 0;
    char **paths = cli_xrealloc(NULL, (size_t)(argc + 1) * sizeof *paths);
    hpt_tokenize_options o;
    hpt_tokenize_options_default(&o);
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (a.i < argc) {
        if (!strcmp(argv[a.i], "-h")) { usage_tokenize(stdout); free(paths); return 0; }
        if (strncmp(argv[a.i], "--", 2)) {  /* the file, anywhere among the flags */
            paths[npaths++] = argv[a.i];
            path = argv[a.i++];
            continue;
        }
        next_flag(&a);
        if (!strcmp(a.name, "--help")) { usage_tokenize(stdout); free(paths); return 0; }
        else if (!strcmp(a.name, "--tokenizer")) kind_name = flag_value(&a);
        else if (!strcmp(a.name, "--vocab")) hpt_set_vocab_dir(flag_value(&a));
        else if (!strcmp(a.name, "--decode")) decode = 1;
        else if (!strcmp(a.name, "--out")) out = flag_value(&a);
        else if (!strcmp(a.name, "--threads")) o.threads = (int)parse_int("--threads", flag_value(&a), 0, 1024);
        else if (!strcmp(a.name, "--shard-tokens"))
            o.shard_tokens = (size_t)parse_int("--shard-tokens", flag_value(&a), 2, 2147483647L);
        else if (!strcmp(a.name, "--val-tokens")) o.val_tokens = parse_int("--val-tokens", flag_value(&a), 1, 2147483647L);
        else if (!strcmp(a.name, "--doc-sep")) o.doc_sep = flag_value(&a);
        else die_usage("unknown option '%s' for 'hpt tokenize'", a.name);
    }
    if (!path) die_usage("%s", "tokenize needs a FILE");
    if (npaths > 1 && !out) die_usage("tokenize takes one FILE without --out, got a second: '%s'", paths[1]);
    hpt_tokenizer_kind kind;
    if (!strcmp(kind_name, "gpt2")) kind = HPT_TOK_GPT2;
    else if (!strcmp(kind_name, "byte")) kind = HPT_TOK_BYTE;
    else if (out && !strcmp(kind_name, "char")) kind = HPT_TOK_CHAR;
    else die_usage("--tokenizer: '%s' is not gpt2 or byte (char only with --out: its vocabulary is a corpus's own)",
                   kind_name);
    int rc;
    if (out) {
        if (decode) die_usage("%s", "--decode and --out do not go together");
        o.tokenizer = kind;
        hpt_set_threads(o.threads);
        rc = shard_files(out, paths, npaths, &o);
    } else rc = decode ? decode_file(kind, path) : encode_file(kind, path);
    free(paths);   /* the file names point into argv: only the array is ours */
    return rc;
}
