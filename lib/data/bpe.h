/* Tokenizers for text data: byte-level (every byte a token) and byte-level BPE, either trained here
 * on the training split or read from a GPT-2-style vocab.json + merges.txt pair.
 *
 * Text is first cut into words as GPT-2 cuts it ('s 't 're 've 'm 'll 'd, an optional space then
 * letters, an optional space then digits, an optional space then other symbols, runs of spaces),
 * with one simplification: every byte of a multi-byte UTF-8 sequence counts as a letter (GPT-2's
 * \p{L}), so accented words stay whole and non-Latin punctuation joins the letters around it.
 * Merges never cross a word's edge. Within a word, the pair of adjacent tokens with the lowest
 * merge rank is merged (everywhere in the word, left to right) until no pair has a rank: GPT-2's
 * encoder, which gives the same ids as GPT-2 on text that the simplification does not touch.
 *
 * Ids. Byte and trained tokenizers: 0 is padding, 1 + b is byte b, 257 + i is the result of merge
 * i. A GPT-2 pair: the file's ids, and padding is one past its largest id. vocab_size counts
 * padding. */
#ifndef DLK_DATA_BPE_H
#define DLK_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

struct dlk_bpe_merge {
	int32_t left, right, result;
};

struct dlk_tokenizer {
	int bpe;                  /* 0: byte-level only (no merges) */
	int32_t vocab_size;       /* ids are in [0, vocab_size) */
	int32_t pad_id;
	int32_t byte_id[256];     /* the token of each single byte */
	struct dlk_bpe_merge *merges; /* in rank order, n_merges of them, owned */
	int32_t n_merges;
	/* id -> its bytes: tok_off[id] .. tok_off[id + 1] in tok_bytes (the pad's is empty); owned */
	uint32_t *tok_off;
	uint8_t *tok_bytes;
	/* (left, right) -> rank, open addressing; owned */
	uint64_t *pair_keys;
	int32_t *pair_rank;
	size_t pair_cap;
};

/* The byte tokenizer: vocab_size 257. Caller frees with dlk_tokenizer_free(). */
struct dlk_tokenizer *dlk_tokenizer_byte(void);
void dlk_tokenizer_free(struct dlk_tokenizer *t);

/* Trains a byte-level BPE of vocab_size ids (257 + merges; at least 258) on text: words are
 * counted, then the most frequent adjacent pair over all words is merged, again and again; ties go
 * to the pair of smaller (left, right) ids, so the result depends on the text alone. Stops early
 * when no pair occurs twice. Never fails for any bytes; NULL only for a vocab_size below 258. */
struct dlk_tokenizer *dlk_bpe_train(const void *text, size_t len, int vocab_size, struct dlk_err *err);

/* The same over several texts (the rows of a split), each cut into words on its own. */
struct dlk_bpe_counter;
struct dlk_bpe_counter *dlk_bpe_counter_new(void);
void dlk_bpe_counter_add(struct dlk_bpe_counter *c, const void *text, size_t len);
struct dlk_tokenizer *dlk_bpe_counter_train(struct dlk_bpe_counter *c, int vocab_size, struct dlk_err *err);
void dlk_bpe_counter_free(struct dlk_bpe_counter *c);

/* Reads a GPT-2 vocab.json ({"token": id, ...}, tokens written in GPT-2's byte-to-unicode
 * alphabet) and merges.txt ("#version" line optional, then "LEFT RIGHT" per line in rank order).
 * Every byte must have a token, every merge's parts and result must be in the vocabulary; errors
 * name the file and line. */
int dlk_bpe_read_gpt2(const void *vocab, size_t vocab_len, const char *vocab_name, const void *merges,
                      size_t merges_len, const char *merges_name, struct dlk_tokenizer **out, struct dlk_err *err);

/* Encodes text into at most max ids (all of it when max is 0 ... returns how many ids the whole
 * text has; ids[0, min(that, max)) are written). */
size_t dlk_tokenizer_encode(const struct dlk_tokenizer *t, const void *text, size_t len, int32_t *ids, size_t max);
/* The bytes of ids appended to out (the pad and unknown ids add nothing). */
void dlk_tokenizer_decode(const struct dlk_tokenizer *t, const int32_t *ids, size_t n, struct dlk_buf *out);

/* The tokenizer as text that dlk_tokenizer_load() reads back (what a bundle keeps):
 *   dlk-tokenizer 1
 *   kind byte|bpe
 *   vocab_size V
 *   pad P
 *   bytes ID ID ... (256 ids)
 *   merges N
 *   LEFT RIGHT RESULT      (N lines, in rank order) */
void dlk_tokenizer_save(const struct dlk_tokenizer *t, struct dlk_buf *out);
int dlk_tokenizer_load(const void *buf, size_t len, const char *name, struct dlk_tokenizer **out, struct dlk_err *err);

#endif
