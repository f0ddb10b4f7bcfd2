/* OpenAI completions / chat and Triton generate: request bodies in, responses out (openai.h). */
#include "lib/serve/openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/util/mem.h"
#include "lib/util/rng.h"

static int fail(char *msg, size_t len, const char **param, const char *p, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int fail(char *msg, size_t len, const char **param, const char *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	*param = p;
	return -1;
}

/* a JSON string equal to lit (strings may hold NULs) */
static int str_is(const struct jd_value *v, const char *lit)
{
	return v && v->type == JD_STRING && v->len == strlen(lit) && !memcmp(v->str, lit, v->len);
}

static char *dup_str(const struct jd_value *v)
{
	char *s = xmalloc(v->len + 1);
	memcpy(s, v->str, v->len);
	s[v->len] = '\0';
	return s;
}

/* a member that is absent or null counts as absent */
static const struct jd_value *member(const struct jd_value *obj, const char *key)
{
	const struct jd_value *v = jd_get(obj, key);
	return v && v->type != JD_NULL ? v : NULL;
}

/* a number member in [lo, hi]: 1 set, 0 absent, -1 bad */
static int number(const struct jd_value *obj, const char *key, double lo, double hi, double *out)
{
	const struct jd_value *v = member(obj, key);
	if (!v)
		return 0;
	if (v->type != JD_NUMBER || !(v->num >= lo && v->num <= hi))
		return -1;
	*out = v->num;
	return 1;
}

static int integer(const struct jd_value *obj, const char *key, long long lo, long long hi, long long *out)
{
	const struct jd_value *v = member(obj, key);
	if (!v)
		return 0;
	return jd_int(v, lo, hi, out) ? 1 : -1;
}

/* fields that change the answer in ways dlk does not do: refused unless at their default */
static int unsupported(const struct jd_value *root, char *msg, size_t len, const char **param)
{
	static const char *const zero[] = { "presence_penalty", "frequency_penalty" };
	static const char *const off[] = { "echo", "logprobs" };
	const struct jd_value *v;

	for (size_t i = 0; i < sizeof(zero) / sizeof(*zero); i++)
		if ((v = member(root, zero[i])) && !(v->type == JD_NUMBER && v->num == 0))
			return fail(msg, len, param, zero[i], "'%s' is not supported by this server (only 0)", zero[i]);
	for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
		if ((v = member(root, off[i])) && !(v->type == JD_BOOL && !v->boolean))
			return fail(msg, len, param, off[i], "'%s' is not supported by this server", off[i]);
	if ((v = member(root, "top_logprobs")) && !(v->type == JD_NUMBER && v->num == 0))
		return fail(msg, len, param, "top_logprobs", "'top_logprobs' is not supported by this server");
	if ((v = member(root, "best_of")) && !(v->type == JD_NUMBER && v->num == 1))
		return fail(msg, len, param, "best_of", "'best_of' must be 1: this server answers one choice per prompt");
	if ((v = member(root, "n")) && !(v->type == JD_NUMBER && v->num == 1))
		return fail(msg, len, param, "n", "'n' must be 1: this server answers one choice per prompt");
	if ((v = member(root, "logit_bias")) && !(v->type == JD_OBJECT && !v->n_items))
		return fail(msg, len, param, "logit_bias", "'logit_bias' is not supported by this server");
	if ((v = member(root, "suffix")) && !(v->type == JD_STRING && !v->len))
		return fail(msg, len, param, "suffix", "'suffix' (insertion) is not supported by this server");
	if ((v = member(root, "tools")) && !(v->type == JD_ARRAY && !v->n_items))
		return fail(msg, len, param, "tools", "'tools' (function calling) is not supported by this server");
	if ((v = member(root, "response_format"))) {
		const struct jd_value *t = jd_get(v, "type");
		if (!str_is(t, "text"))
			return fail(msg, len, param, "response_format", "'response_format' other than text is not supported by this server");
	}
	return 0;
}

/* the sampling fields, from one object (the body, or Triton's parameters) */
static int sampling(const struct jd_value *o, enum dlk_oai_kind kind, struct dlk_oai_request *req, char *msg, size_t len,
                    const char **param)
{
	struct dlk_gen_params *p = &req->params;
	double d;
	long long n;
	int r;

	if (number(o, "temperature", 0, kind == DLK_OAI_TRITON ? 100 : 2, &p->sampling.temperature) < 0)
		return fail(msg, len, param, "temperature", "'temperature' must be a number from 0 to %d (0 is greedy)",
		            kind == DLK_OAI_TRITON ? 100 : 2);
	if ((r = number(o, "top_p", 0, 1, &d)) < 0 || (r && d <= 0))
		return fail(msg, len, param, "top_p", "'top_p' must be a number above 0, at most 1");
	if (r)
		p->sampling.top_p = d;
	if ((r = integer(o, "top_k", -1, 1 << 30, &n)) < 0)
		return fail(msg, len, param, "top_k", "'top_k' must be an integer, -1 or 0 for every token");
	if (r)
		p->sampling.top_k = n < 0 ? 0 : (int)n;
	const char *mt = kind == DLK_OAI_CHAT && member(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
	if ((r = integer(o, mt, 1, DLK_OAI_MAX_TOKENS, &n)) < 0)
		return fail(msg, len, param, mt, "'%s' must be an integer from 1 to %d", mt, DLK_OAI_MAX_TOKENS);
	if (r)
		p->max_tokens = (int)n;
	/* any JSON integer a client may send as a seed: its bits */
	const struct jd_value *sv = member(o, "seed");
	if (sv) {
		if (sv->type != JD_NUMBER || sv->num != floor(sv->num) || fabs(sv->num) > 9007199254740992.0)
			return fail(msg, len, param, "seed", "'seed' must be an integer");
		p->sampling.seed = (uint64_t)(int64_t)sv->num;
	}
	const char *sk = member(o, "stop") ? "stop" : "stop_words";
	const struct jd_value *st = member(o, sk);
	if (st) {
		const struct jd_value *one[1] = { st };
		size_t count = st->type == JD_STRING ? 1 : st->type == JD_ARRAY ? st->n_items : 0;
		if ((st->type != JD_STRING && st->type != JD_ARRAY) || (st->type == JD_ARRAY && st->n_numbers))
			return fail(msg, len, param, sk, "'%s' must be a string or a list of strings", sk);
		if (count > DLK_GEN_MAX_STOP)
			return fail(msg, len, param, sk, "'%s' has %zu strings: at most %d", sk, count, DLK_GEN_MAX_STOP);
		const struct jd_value *it = st->type == JD_STRING ? one[0] : st->first;
		for (; it; it = st->type == JD_STRING ? NULL : it->next) {
			if (it->type != JD_STRING)
				return fail(msg, len, param, sk, "'%s' must be a string or a list of strings", sk);
			if (!it->len)
				continue; /* TensorRT-LLM's clients send "" for none */
			p->stop[p->n_stop] = dup_str(it);
			p->stop_len[p->n_stop++] = it->len;
		}
	}
	const struct jd_value *sm = member(o, "stream");
	if (sm) {
		if (sm->type != JD_BOOL)
			return fail(msg, len, param, "stream", "'stream' must be true or false");
		req->stream = sm->boolean;
	}
	return 0;
}

static int content_of(const struct jd_value *c, struct dlk_oai_message *m, int i, char *msg, size_t len, const char **param)
{
	struct dlk_buf b = DLK_BUF_INIT;

	if (c && c->type == JD_STRING) {
		m->content = dup_str(c);
		m->len = c->len;
		return 0;
	}
	if (!c || c->type != JD_ARRAY || c->n_numbers)
		return fail(msg, len, param, "messages", "messages[%d].content must be a string or a list of text parts", i);
	for (const struct jd_value *p = c->first; p; p = p->next) {
		const struct jd_value *t = jd_get(p, "type"), *text = jd_get(p, "text");
		if (!str_is(t, "text") || !text || text->type != JD_STRING) {
			dlk_buf_release(&b);
			return fail(msg, len, param, "messages", "messages[%d].content: only parts of type \"text\" with a "
			            "\"text\" string are supported", i);
		}
		dlk_buf_add(&b, text->str, text->len);
	}
	dlk_buf_addc(&b, '\0');
	m->content = dlk_buf_detach(&b, &m->len);
	m->len--;
	return 0;
}

static int messages(const struct jd_value *root, struct dlk_oai_request *req, char *msg, size_t len, const char **param)
{
	const struct jd_value *ms = member(root, "messages");
	int i = 0;

	if (!ms || ms->type != JD_ARRAY || ms->n_numbers || !ms->n_items)
		return fail(msg, len, param, "messages", "'messages' must be a non-empty list of message objects");
	if (ms->n_items > DLK_OAI_MAX_MESSAGES)
		return fail(msg, len, param, "messages", "%zu messages: at most %d", ms->n_items, DLK_OAI_MAX_MESSAGES);
	req->messages = xcalloc(ms->n_items, sizeof(*req->messages));
	for (const struct jd_value *m = ms->first; m; m = m->next, i++) {
		const struct jd_value *role = jd_get(m, "role");
		struct dlk_oai_message *o = &req->messages[i];
		if (m->type != JD_OBJECT || !role || role->type != JD_STRING)
			return fail(msg, len, param, "messages", "messages[%d] must be an object with a 'role'", i);
		if (str_is(role, "system") || str_is(role, "developer"))
			o->role = DLK_CHAT_SYSTEM;
		else if (str_is(role, "user"))
			o->role = DLK_CHAT_USER;
		else if (str_is(role, "assistant"))
			o->role = DLK_CHAT_ASSISTANT;
		else
			return fail(msg, len, param, "messages", "messages[%d].role must be system, developer, user or assistant", i);
		req->n_messages = i + 1;
		if (content_of(jd_get(m, "content"), o, i, msg, len, param))
			return -1;
	}
	return 0;
}

static int prompts(const struct jd_value *v, const char *key, struct dlk_oai_request *req, char *msg, size_t len,
                   const char **param)
{
	if (!v || (v->type != JD_STRING && v->type != JD_ARRAY))
		return fail(msg, len, param, key, "'%s' must be a string%s", key, req->kind == DLK_OAI_TRITON ? "" : " or a list of strings");
	if (v->type == JD_ARRAY && (v->n_numbers || !v->n_items))
		return fail(msg, len, param, key, "'%s' must be a string or a non-empty list of strings (token ids are not "
		            "supported)", key);
	if (v->type == JD_ARRAY && req->kind == DLK_OAI_TRITON)
		return fail(msg, len, param, key, "'%s' must be a string", key);
	if (v->type == JD_ARRAY && v->n_items > DLK_OAI_MAX_PROMPTS)
		return fail(msg, len, param, key, "%zu prompts in one request: at most %d", v->n_items, DLK_OAI_MAX_PROMPTS);
	size_t n = v->type == JD_STRING ? 1 : v->n_items;
	req->prompts = xcalloc(n, sizeof(char *));
	req->prompt_len = xcalloc(n, sizeof(size_t));
	const struct jd_value *it = v->type == JD_STRING ? v : v->first;
	for (int i = 0; it; it = v->type == JD_STRING ? NULL : it->next, i++) {
		if (it->type != JD_STRING)
			return fail(msg, len, param, key, "'%s' must be a string or a list of strings (token ids are not supported)", key);
		req->prompts[i] = dup_str(it);
		req->prompt_len[i] = it->len;
		req->n_prompts = i + 1;
	}
	return 0;
}

int dlk_oai_parse(enum dlk_oai_kind kind, const char *body, size_t len, const struct jd_limits *lim,
                  struct dlk_oai_request *req, char *msg, size_t msg_len, const char **param)
{
	struct jd_doc doc = JD_DOC_INIT;
	const struct jd_value *root, *v;
	char jmsg[200];
	int ret = -1;

	memset(req, 0, sizeof(*req));
	req->kind = kind;
	req->params.sampling = (struct dlk_sampling)DLK_SAMPLING_INIT;
	req->params.max_tokens = kind == DLK_OAI_CHAT ? DLK_OAI_DEFAULT_CHAT_MAX_TOKENS : DLK_OAI_DEFAULT_MAX_TOKENS;
	*param = NULL;
	if (jd_parse(&doc, body, len, lim, jmsg, sizeof(jmsg)))
		return fail(msg, msg_len, param, NULL, "%s", jmsg);
	root = doc.root;
	if (root->type != JD_OBJECT) {
		fail(msg, msg_len, param, NULL, "the request must be a JSON object");
		goto out;
	}
	if (kind == DLK_OAI_TRITON) {
		const struct jd_value *pa = member(root, "parameters");
		if (pa && pa->type != JD_OBJECT) {
			fail(msg, msg_len, param, "parameters", "'parameters' must be an object");
			goto out;
		}
		if (prompts(member(root, "text_input"), "text_input", req, msg, msg_len, param) ||
		    sampling(root, kind, req, msg, msg_len, param) || (pa && sampling(pa, kind, req, msg, msg_len, param)))
			goto out;
		ret = 0;
		goto out;
	}
	v = member(root, "model");
	if (!v || v->type != JD_STRING) {
		fail(msg, msg_len, param, "model", "'model' must be given, the name of a served model (GET /v1/models lists them)");
		goto out;
	}
	req->model = dup_str(v);
	if (unsupported(root, msg, msg_len, param) || sampling(root, kind, req, msg, msg_len, param))
		goto out;
	if (kind == DLK_OAI_CHAT ? messages(root, req, msg, msg_len, param)
	                         : prompts(member(root, "prompt"), "prompt", req, msg, msg_len, param))
		goto out;
	v = member(root, "stream_options");
	if (v) {
		const struct jd_value *u = member(v, "include_usage");
		if (v->type != JD_OBJECT || (u && u->type != JD_BOOL)) {
			fail(msg, msg_len, param, "stream_options", "'stream_options' must be an object whose include_usage is true or false");
			goto out;
		}
		req->include_usage = u && u->boolean;
	}
	ret = 0;
out:
	jd_release(&doc);
	if (ret)
		dlk_oai_request_release(req);
	return ret;
}

void dlk_oai_request_release(struct dlk_oai_request *req)
{
	free(req->model);
	for (int i = 0; i < req->n_prompts; i++)
		free(req->prompts[i]);
	free(req->prompts);
	free(req->prompt_len);
	for (int i = 0; i < req->n_messages; i++)
		free(req->messages[i].content);
	free(req->messages);
	for (int i = 0; i < req->params.n_stop; i++)
		free(req->params.stop[i]);
	enum dlk_oai_kind k = req->kind;
	memset(req, 0, sizeof(*req));
	req->kind = k;
}

void dlk_oai_chat_prompt(const struct dlk_oai_request *req, const struct dlk_chat_template *t, struct dlk_buf *out)
{
	for (int i = 0; i < req->n_messages; i++)
		dlk_chat_template_add(t, req->messages[i].role, req->messages[i].content, req->messages[i].len, out);
	dlk_buf_adds(out, t->generation);
}

void dlk_oai_new_id(enum dlk_oai_kind kind, char *id, size_t id_len)
{
	static _Atomic unsigned long long counter;
	struct dlk_rng r;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	dlk_rng_seed(&r, ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^
	                         (counter++ * 0x9e3779b97f4a7c15ull));
	snprintf(id, id_len, "%s%016llx%08llx", kind == DLK_OAI_CHAT ? "chatcmpl-" : "cmpl-",
	         (unsigned long long)dlk_rng_next(&r), (unsigned long long)(dlk_rng_next(&r) & 0xffffffffu));
}

static void head(struct dlk_buf *out, enum dlk_oai_kind kind, const char *id, long long created, const char *model,
                 int chunk)
{
	dlk_buf_adds(out, "{\"id\":");
	jd_write_string(out, id, strlen(id));
	dlk_buf_addf(out, ",\"object\":\"%s\",\"created\":%lld,\"model\":",
	             kind == DLK_OAI_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion", created);
	jd_write_string(out, model, strlen(model));
	dlk_buf_adds(out, ",\"system_fingerprint\":null");
}

static void finish_field(struct dlk_buf *out, enum dlk_finish f)
{
	const char *n = dlk_finish_name(f);
	if (n)
		dlk_buf_addf(out, ",\"finish_reason\":\"%s\"", n);
	else
		dlk_buf_adds(out, ",\"finish_reason\":null");
}

static void usage_field(struct dlk_buf *out, const struct dlk_oai_usage *u)
{
	dlk_buf_addf(out, ",\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld}",
	             u->prompt_tokens, u->completion_tokens, u->prompt_tokens + u->completion_tokens);
}

void dlk_oai_write_response(enum dlk_oai_kind kind, const char *id, long long created, const char *model,
                            const struct dlk_oai_choice *choices, int n, const struct dlk_oai_usage *usage,
                            struct dlk_buf *out)
{
	head(out, kind, id, created, model, 0);
	dlk_buf_adds(out, ",\"choices\":[");
	for (int i = 0; i < n; i++) {
		if (i)
			dlk_buf_addc(out, ',');
		dlk_buf_addf(out, "{\"index\":%d,", i);
		if (kind == DLK_OAI_CHAT) {
			dlk_buf_adds(out, "\"message\":{\"role\":\"assistant\",\"content\":");
			jd_write_string(out, choices[i].text, choices[i].len);
			dlk_buf_adds(out, "}");
		} else {
			dlk_buf_adds(out, "\"text\":");
			jd_write_string(out, choices[i].text, choices[i].len);
		}
		dlk_buf_adds(out, ",\"logprobs\":null");
		finish_field(out, choices[i].finish);
		dlk_buf_addc(out, '}');
	}
	dlk_buf_addc(out, ']');
	usage_field(out, usage);
	dlk_buf_addc(out, '}');
}

void dlk_oai_write_chunk(enum dlk_oai_kind kind, const char *id, long long created, const char *model, int index,
                         int role, const char *text, size_t len, enum dlk_finish finish,
                         const struct dlk_oai_usage *usage, struct dlk_buf *out)
{
	dlk_buf_adds(out, "data: ");
	head(out, kind, id, created, model, 1);
	if (usage && !text) {
		dlk_buf_adds(out, ",\"choices\":[]");
		usage_field(out, usage);
		dlk_buf_adds(out, "}\n\n");
		return;
	}
	dlk_buf_addf(out, ",\"choices\":[{\"index\":%d,", index);
	if (kind == DLK_OAI_CHAT) {
		dlk_buf_adds(out, "\"delta\":{");
		if (role)
			dlk_buf_adds(out, "\"role\":\"assistant\"");
		if (text && (len || role)) {
			dlk_buf_adds(out, role ? ",\"content\":" : "\"content\":");
			jd_write_string(out, text, len);
		}
		dlk_buf_addc(out, '}');
	} else {
		dlk_buf_adds(out, "\"text\":");
		jd_write_string(out, text ? text : "", text ? len : 0);
	}
	dlk_buf_adds(out, ",\"logprobs\":null");
	finish_field(out, finish);
	dlk_buf_adds(out, "}]}\n\n");
}

void dlk_oai_write_done(struct dlk_buf *out)
{
	dlk_buf_adds(out, "data: [DONE]\n\n");
}

void dlk_oai_write_error(int status, const char *msg, const char *param, struct dlk_buf *out)
{
	const char *type = status == 404 ? "not_found_error" : status == 503 ? "service_unavailable_error"
	                   : status >= 500 ? "server_error" : status == 413 ? "invalid_request_error"
	                                                                    : "invalid_request_error";
	dlk_buf_adds(out, "{\"error\":{\"message\":");
	jd_write_string(out, msg, strlen(msg));
	dlk_buf_addf(out, ",\"type\":\"%s\",\"param\":", type);
	if (param)
		jd_write_string(out, param, strlen(param));
	else
		dlk_buf_adds(out, "null");
	dlk_buf_addf(out, ",\"code\":%s}}", status == 404 ? "\"model_not_found\"" : "null");
}

void dlk_oai_write_models(const char *const *names, int n, long long created, struct dlk_buf *out)
{
	dlk_buf_adds(out, "{\"object\":\"list\",\"data\":[");
	for (int i = 0; i < n; i++) {
		if (i)
			dlk_buf_addc(out, ',');
		dlk_buf_adds(out, "{\"id\":");
		jd_write_string(out, names[i], strlen(names[i]));
		dlk_buf_addf(out, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"dlk\"}", created);
	}
	dlk_buf_adds(out, "]}");
}

void dlk_triton_write_generate(const char *model, const char *text, size_t len, enum dlk_finish finish,
                               struct dlk_buf *out)
{
	dlk_buf_adds(out, "{\"model_name\":");
	jd_write_string(out, model, strlen(model));
	dlk_buf_adds(out, ",\"model_version\":\"1\",\"text_output\":");
	jd_write_string(out, text, len);
	if (finish)
		dlk_buf_addf(out, ",\"finish_reason\":\"%s\"", dlk_finish_name(finish));
	dlk_buf_addc(out, '}');
}

void dlk_triton_write_error_event(const char *msg, struct dlk_buf *out)
{
	dlk_buf_adds(out, "data: {\"error\":");
	jd_write_string(out, msg, strlen(msg));
	dlk_buf_adds(out, "}\n\n");
}
