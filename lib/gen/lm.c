/* A bundle as a language model, and one sequence's generation state (see lm.h). */
#include "lib/gen/lm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "lib/util/mem.h"
#include "lib/util/utf8.h"

static const char *const role_names[DLK_CHAT_N_ROLES] = { "system", "user", "assistant" };

static int template_field(const cJSON *obj, const char *key, const char *name, int need_content, char **out,
                          struct dlk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	*out = NULL;
	if (!v)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the chat template has no \"%s\"", name, key);
	if (!cJSON_IsString(v))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the chat template's \"%s\" must be a string", name, key);
	if (need_content) {
		const char *c = strstr(v->valuestring, "{content}");
		if (!c || strstr(c + 1, "{content}"))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the chat template's \"%s\" must hold {content} once, where the "
			                "message goes", name, key);
	}
	*out = xstrdup(v->valuestring);
	return 0;
}

static int template_from(const cJSON *obj, const char *name, struct dlk_chat_template *t, struct dlk_err *err)
{
	memset(t, 0, sizeof(*t));
	if (!cJSON_IsObject(obj))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: a chat template is a JSON object with \"system\", \"user\", "
		                "\"assistant\" and \"generation\"", name);
	for (int r = 0; r < DLK_CHAT_N_ROLES; r++)
		if (template_field(obj, role_names[r], name, 1, &t->role[r], err))
			goto fail;
	if (template_field(obj, "generation", name, 0, &t->generation, err))
		goto fail;
	return 0;
fail:
	dlk_chat_template_release(t);
	return -1;
}

int dlk_chat_template_parse(const char *json, size_t len, const char *name, struct dlk_chat_template *t,
                            struct dlk_err *err)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	int rc;

	memset(t, 0, sizeof(*t));
	if (!root)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not valid JSON", name);
	rc = template_from(root, name, t, err);
	cJSON_Delete(root);
	return rc;
}

void dlk_chat_template_add(const struct dlk_chat_template *t, enum dlk_chat_role role, const char *content, size_t len,
                           struct dlk_buf *prompt)
{
	const char *f = t->role[role], *c = strstr(f, "{content}");
	dlk_buf_add(prompt, f, (size_t)(c - f));
	dlk_buf_add(prompt, content, len);
	dlk_buf_adds(prompt, c + strlen("{content}"));
}

void dlk_chat_template_release(struct dlk_chat_template *t)
{
	for (int r = 0; r < DLK_CHAT_N_ROLES; r++)
		free(t->role[r]);
	free(t->generation);
	memset(t, 0, sizeof(*t));
}

int dlk_lm_init(struct dlk_lm *lm, const struct dlk_bundle *b, const char *path, struct dlk_err *err)
{
	size_t in = (size_t)b->model.input[0] * (size_t)b->model.input[1] * (size_t)b->model.input[2];

	memset(lm, 0, sizeof(*lm));
	if (b->model.task == DLK_TASK_LM) {
		/* model.task lm: the bundle says it (one place for the context and the vocabulary) */
		struct dlk_lm_info info;
		if (dlk_bundle_lm(b, path, &info, err))
			return -1;
		lm->tok = info.tokenizer;
		lm->context = info.context;
		lm->vocab = info.vocab;
		lm->per_position = 1;
		lm->out_size = (size_t)info.context * (size_t)info.vocab;
		if ((size_t)b->n_classes != lm->out_size)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the language model's output has %d values, not context x "
			                "vocabulary (%d x %d)", path, b->n_classes, info.context, info.vocab);
		goto chat;
	}
	if (!b->tokenizer)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a language model: the bundle has no tokenizer (a model "
		                "trained on text data keeps one)", path);
	lm->tok = b->tokenizer;
	lm->vocab = b->tokenizer->vocab_size;
	lm->context = (int)in;
	lm->out_size = (size_t)b->n_classes;
	if (in < 1 || in > (1u << 20))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': an input of %zu values is not a window of tokens", path, in);
	if ((size_t)b->n_classes == in * (size_t)lm->vocab)
		lm->per_position = 1;
	else if (b->n_classes != lm->vocab)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a language model: its output has %d values, neither the "
		                "vocabulary (%d tokens) nor context x vocabulary (%zu x %d)", path, b->n_classes, lm->vocab,
		                in, lm->vocab);
chat:;
	const cJSON *ct = cJSON_GetObjectItemCaseSensitive(b->meta, "chat_template");
	if (ct) {
		if (template_from(ct, path, &lm->chat, err))
			return dlk_err_prefix(err, "model.json's chat_template");
		lm->has_chat = 1;
	}
	return 0;
}

void dlk_lm_release(struct dlk_lm *lm)
{
	dlk_chat_template_release(&lm->chat);
	lm->has_chat = 0;
}

int dlk_lm_input(const struct dlk_lm *lm, const int32_t *toks, size_t n, float *row)
{
	size_t c = (size_t)lm->context, k = n < c ? n : c;
	const int32_t *w = toks + (n - k);
	for (size_t i = 0; i < k; i++)
		row[i] = (float)w[i];
	for (size_t i = k; i < c; i++)
		row[i] = (float)lm->tok->pad_id;
	return (int)k - 1;
}

const float *dlk_lm_logits(const struct dlk_lm *lm, const float *out_row, int pos)
{
	return lm->per_position ? out_row + (size_t)(pos < 0 ? 0 : pos) * (size_t)lm->vocab : out_row;
}

const char *dlk_finish_name(enum dlk_finish f)
{
	return f == DLK_FINISH_STOP ? "stop" : f == DLK_FINISH_LENGTH ? "length" : NULL;
}

static void push_tok(struct dlk_gen_seq *s, int32_t t)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->toks = xrealloc(s->toks, s->cap * sizeof(int32_t));
	}
	s->toks[s->n++] = t;
}

int dlk_gen_seq_init(struct dlk_gen_seq *s, const struct dlk_lm *lm, const char *prompt, size_t len,
                     const struct dlk_gen_params *p, struct dlk_err *err)
{
	memset(s, 0, sizeof(*s));
	s->params = *p;
	size_t n = dlk_tokenizer_encode(lm->tok, prompt, len, NULL, 0);
	if (!n)
		return dlk_errf(err, DLK_EXIT_USAGE, "the prompt is empty: generation starts from at least one token");
	s->cap = n + (size_t)(p->max_tokens > 0 ? p->max_tokens : 1);
	s->toks = xmalloc(s->cap * sizeof(int32_t));
	s->n = dlk_tokenizer_encode(lm->tok, prompt, len, s->toks, n);
	s->prompt_tokens = s->n;
	s->masked = xmalloc((size_t)lm->vocab * sizeof(float));
	dlk_rng_seed(&s->rng, p->sampling.seed);
	return 0;
}

int dlk_gen_seq_input(const struct dlk_gen_seq *s, const struct dlk_lm *lm, float *row)
{
	return dlk_lm_input(lm, s->toks, s->n, row);
}

/* the earliest stop string in text at or after `from`: its offset, or -1 */
static long find_stop(const struct dlk_gen_seq *s, size_t from)
{
	long best = -1;
	for (int i = 0; i < s->params.n_stop; i++) {
		size_t sl = s->params.stop_len[i];
		if (!sl || sl > s->text.len)
			continue;
		for (size_t o = from; o + sl <= s->text.len; o++)
			if (!memcmp(s->text.data + o, s->params.stop[i], sl)) {
				if (best < 0 || (long)o < best)
					best = (long)o;
				break;
			}
	}
	return best;
}

int32_t dlk_gen_seq_push(struct dlk_gen_seq *s, const struct dlk_lm *lm, const float *out_row, int pos)
{
	const float *l = dlk_lm_logits(lm, out_row, pos);
	size_t before = s->text.len, maxstop = 0;
	int32_t t;

	if (s->finish)
		return -1;
	memcpy(s->masked, l, (size_t)lm->vocab * sizeof(float));
	if (lm->tok->pad_id >= 0 && lm->tok->pad_id < lm->vocab)
		s->masked[lm->tok->pad_id] = -INFINITY;
	/* logits past the tokenizer's ids (a vocabulary padded for speed) are no tokens */
	for (int i = lm->tok->vocab_size; i < lm->vocab; i++)
		s->masked[i] = -INFINITY;
	t = dlk_sample(&s->sampler, s->masked, lm->vocab, &s->params.sampling, &s->rng);
	s->generated++;
	if (t < 0) {
		/* every logit NaN or -inf: nothing can follow */
		s->finish = DLK_FINISH_STOP;
		return t;
	}
	push_tok(s, t);
	dlk_tokenizer_decode(lm->tok, &t, 1, &s->text);
	for (int i = 0; i < s->params.n_stop; i++)
		if (s->params.stop_len[i] > maxstop)
			maxstop = s->params.stop_len[i];
	long at = find_stop(s, before + 1 > maxstop ? before + 1 - maxstop : 0);
	if (at >= 0 && (size_t)at >= s->emitted) {
		s->text.len = (size_t)at;
		s->finish = DLK_FINISH_STOP;
	} else if (s->generated >= s->params.max_tokens) {
		s->finish = DLK_FINISH_LENGTH;
	}
	return t;
}

/* bytes at the end of text that may still become a character */
static size_t incomplete_tail(const unsigned char *u, size_t len)
{
	for (size_t back = 1; back <= 3 && back <= len; back++) {
		unsigned char c = u[len - back];
		if ((c & 0xc0) == 0x80)
			continue;
		size_t need = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 1;
		return need > back ? back : 0;
	}
	return 0;
}

size_t dlk_gen_seq_take(struct dlk_gen_seq *s, struct dlk_buf *out)
{
	const unsigned char *u = (const unsigned char *)s->text.data;
	size_t end = s->text.len, start = out->len;

	if (!s->finish) {
		end -= incomplete_tail(u, end);
		/* an end that a stop string may begin */
		size_t hold = 0;
		for (int i = 0; i < s->params.n_stop; i++)
			for (size_t k = s->params.stop_len[i] ? s->params.stop_len[i] - 1 : 0; k > hold; k--)
				if (k <= end && !memcmp(u + end - k, s->params.stop[i], k)) {
					hold = k;
					break;
				}
		end -= hold;
	}
	if (end <= s->emitted)
		return 0;
	for (size_t i = s->emitted; i < end;) {
		uint32_t cp;
		size_t k = dlk_utf8_decode(u + i, end - i, &cp);
		if (!k) {
			dlk_buf_adds(out, "\xef\xbf\xbd");
			i++;
		} else {
			dlk_buf_add(out, u + i, k);
			i += k;
		}
	}
	s->emitted = end;
	return out->len - start;
}

void dlk_gen_seq_release(struct dlk_gen_seq *s)
{
	free(s->toks);
	free(s->masked);
	dlk_buf_release(&s->text);
	dlk_sampler_release(&s->sampler);
	memset(s, 0, sizeof(*s));
}
