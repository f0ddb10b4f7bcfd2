/* Plain text corpora for language models (model.task lm): their text, tokenized once, packed into
 * sequences of context + 1 tokens, and the token cache that spares a second run the tokenizing.
 *
 * Packing: the token stream t[0, n) gives sequences i = 0, 1, ... of T inputs t[iT, iT + T) and
 * T targets t[iT + 1, iT + T + 1), the next token of each input (nanoGPT's and llm.c's x and y);
 * consecutive sequences share one token, so every token but the first is a target once. A tail
 * shorter than T + 1 tokens is dropped. The training loop shuffles the sequences by the run's seed.
 *
 * Validation (data.validation: f): the last f of the token stream, cut at a token, is the
 * validation split and the rest the training split; neither sees the other's text. */
#ifndef DLK_DATA_CORPUS_H
#define DLK_DATA_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/data/bpe.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

/* Every regular file of an archive (tar, zip; compressed or not) appended to out in the archive's
 * order, or the one file itself when plain or a lone compressed file; bounded by max_bytes
 * unpacked (0 = no limit). Errors name `name`. Returns the number of files read, or -1. */
int dlk_corpus_read(const char *path, const char *name, unsigned long long max_bytes, struct dlk_buf *out,
                    struct dlk_err *err);

/* The part [*lo, *hi) of n tokens that split "train" or "test" takes with validation fraction f
 * (0: all of it is "train" and "test" is empty). */
void dlk_corpus_split(size_t n, double f, int test, size_t *lo, size_t *hi);

/* Packs ids[0, n) into sequences of T: returns how many; *x and *t (caller frees) get count * T
 * inputs and targets as floats (the engine's token ids). */
size_t dlk_corpus_pack(const int32_t *ids, size_t n, int T, float **x, float **t);

/* The cache key of a corpus and a tokenizer recipe: sha256 hex of both. */
void dlk_corpus_key(const void *text, size_t len, const char *recipe, char hex[65]);

/* The token cache file:
 *   dlk-tokens 1\n
 *   tokenizer BYTES\n   then BYTES of dlk_tokenizer_save()'s text
 *   ids N\n             then N little-endian int32 ids, each in [0, the tokenizer's vocab_size)
 * parse() checks every part and names `name` in errors; *tok and *ids are the caller's. */
void dlk_token_cache_write(struct dlk_buf *out, const struct dlk_tokenizer *tok, const int32_t *ids, size_t n);
int dlk_token_cache_parse(const void *buf, size_t len, const char *name, struct dlk_tokenizer **tok, int32_t **ids,
                          size_t *n, struct dlk_err *err);

#endif
