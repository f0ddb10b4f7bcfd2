/* Generating text from a language-model bundle: what the bundle's network means as a language
 * model, the input row for the tokens so far, and one sequence's state as tokens are added
 * (stop strings, the text that may be handed out yet). Nothing here runs a network: the caller
 * runs the forward pass (dlk_net_forward, or a server's batcher, many sequences per pass) and hands
 * the output row back, so one pass serves any number of sequences, each at its own position.
 *
 * A model.task lm bundle is one, as dlk_bundle_lm (lib/train/bundle.h) reads its context and
 * vocabulary. Another bundle is one when it has a tokenizer (tokenizer.txt) and its network maps a
 * window of `context` token ids (its input size; ids as floats, as text data feeds them) to either
 *   [context, vocab] logits, the next token's after every position (a causal LM), or
 *   [vocab] logits, the next token's after the whole window,
 * vocab being the tokenizer's vocab_size. The window is the last `context` tokens, written from
 * position 0 and followed by the pad id when there are fewer (as text data is padded), and the
 * next token's logits are read at the position of the last token. This is a full forward over the
 * window for every token, correct for any such network; the pad id is never generated. */
#ifndef DLK_GEN_LM_H
#define DLK_GEN_LM_H

#include <stddef.h>
#include <stdint.h>

#include "lib/data/bpe.h"
#include "lib/gen/sample.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

enum dlk_chat_role { DLK_CHAT_SYSTEM, DLK_CHAT_USER, DLK_CHAT_ASSISTANT, DLK_CHAT_N_ROLES };

/* A chat template: how messages become the prompt. Each role's text holds "{content}" once,
 * where the message goes; the prompt is the messages' texts in order, then `generation` (what
 * opens the assistant's answer). Read from a JSON object
 *   {"system": "...{content}...", "user": "...", "assistant": "...", "generation": "..."}
 * (the bundle's model.json "chat_template", or a file given to dlk serve). */
struct dlk_chat_template {
	char *role[DLK_CHAT_N_ROLES];
	char *generation;
};

/* Parses a chat template (above) from JSON text; errors name `name` and the field. */
int dlk_chat_template_parse(const char *json, size_t len, const char *name, struct dlk_chat_template *t,
                            struct dlk_err *err);
/* Appends one message to a prompt (content is the caller's bytes). */
void dlk_chat_template_add(const struct dlk_chat_template *t, enum dlk_chat_role role, const char *content, size_t len,
                           struct dlk_buf *prompt);
void dlk_chat_template_release(struct dlk_chat_template *t);

struct dlk_lm {
	const struct dlk_tokenizer *tok; /* the bundle's */
	int context;                     /* tokens in the window */
	int vocab;
	int per_position;                /* output [context, vocab]; else [vocab] */
	size_t out_size;                 /* floats per output row */
	struct dlk_chat_template chat;   /* from the bundle; has_chat 0 when it has none */
	int has_chat;
};

/* What the bundle means as a language model, or DLK_EXIT_CONFIG saying why it is not one (no
 * tokenizer, an output that is neither [context, vocab] nor [vocab]). The bundle outlives lm. */
int dlk_lm_init(struct dlk_lm *lm, const struct dlk_bundle *b, const char *path, struct dlk_err *err);
void dlk_lm_release(struct dlk_lm *lm);
/* Writes the window for toks[0..n) into row[context] and returns the position of the last token
 * in it (its logits are the next token's); n >= 1. */
int dlk_lm_input(const struct dlk_lm *lm, const int32_t *toks, size_t n, float *row);
/* The next token's logits in an output row, for the position dlk_lm_input returned. */
const float *dlk_lm_logits(const struct dlk_lm *lm, const float *out_row, int pos);

enum dlk_finish { DLK_FINISH_NONE, DLK_FINISH_STOP, DLK_FINISH_LENGTH };
/* "stop", "length" (OpenAI's finish_reason), NULL while running */
const char *dlk_finish_name(enum dlk_finish f);

#define DLK_GEN_MAX_STOP 4

struct dlk_gen_params {
	int max_tokens;                   /* >= 1 */
	struct dlk_sampling sampling;
	int n_stop;
	char *stop[DLK_GEN_MAX_STOP];     /* not owned */
	size_t stop_len[DLK_GEN_MAX_STOP];
};

/* One sequence being generated. */
struct dlk_gen_seq {
	int32_t *toks;
	size_t n, cap;
	size_t prompt_tokens;
	int generated;                    /* tokens sampled */
	struct dlk_buf text;              /* the generated text, cut before a stop string */
	size_t emitted;                   /* bytes of text already handed out */
	enum dlk_finish finish;
	struct dlk_gen_params params;
	struct dlk_rng rng;
	struct dlk_sampler sampler;
	float *masked;                    /* the logits with the pad id removed */
};

/* Encodes the prompt. An empty prompt (no token) is DLK_EXIT_USAGE. */
int dlk_gen_seq_init(struct dlk_gen_seq *s, const struct dlk_lm *lm, const char *prompt, size_t len,
                     const struct dlk_gen_params *p, struct dlk_err *err);
/* The window of the sequence for the next forward pass (dlk_lm_input). */
int dlk_gen_seq_input(const struct dlk_gen_seq *s, const struct dlk_lm *lm, float *row);
/* Samples the next token from the pass's output row (pos: what dlk_gen_seq_input returned),
 * appends it, and sets finish when a stop string appears (the text is cut before it) or
 * max_tokens are reached. Returns the token. */
int32_t dlk_gen_seq_push(struct dlk_gen_seq *s, const struct dlk_lm *lm, const float *out_row, int pos);
/* Appends to out the text that can be handed out now, as well-formed UTF-8 (a byte that can never
 * be UTF-8 becomes U+FFFD): all of it once finished; before that, not an incomplete character at
 * the end, nor an end that may be the start of a stop string. Returns the bytes appended. */
size_t dlk_gen_seq_take(struct dlk_gen_seq *s, struct dlk_buf *out);
void dlk_gen_seq_release(struct dlk_gen_seq *s);

#endif
