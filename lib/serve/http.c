/* The HTTP front end on libmicrohttpd: routes, limits, the answer to every request.
 *
 * Threads: a pool of MHD threads (epoll) decodes and encodes; an inference request's connection
 * is suspended while its job waits in the batcher, and the compute worker that finishes the job
 * resumes it, so an HTTP thread never blocks on the model and a few threads carry any number of
 * connections. Status codes follow Triton: 400 for a request that does not fit the protocol or
 * the model, 404 unknown model or route, 405 wrong method, 413 body over the limit, 503 not
 * ready or draining, 500 a failed forward pass. Errors are {"error": "..."}. A body too slow to
 * arrive loses its connection (libmicrohttpd cannot answer in the middle of one). */
#include "lib/serve/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "lib/serve/openai.h"
#include "lib/serve/tfs.h"
#include "lib/serve/v2.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"

enum route {
	R_NOT_FOUND,
	R_ROOT,            /* GET /: KServe's v1 liveness */
	R_V2_SERVER,       /* GET /v2 */
	R_LIVE,            /* GET /v2/health/live */
	R_READY,           /* GET /v2/health/ready */
	R_V2_MODEL,        /* GET /v2/models/{m}[/versions/{v}] */
	R_V2_MODEL_READY,  /* GET .../ready */
	R_V2_INFER,        /* POST .../infer */
	R_V1_STATUS,       /* GET /v1/models/{m}[/versions/{v}] */
	R_V1_METADATA,     /* GET .../metadata */
	R_V1_PREDICT,      /* POST ...:predict */
	R_V1_OTHER_VERB,   /* POST ...:classify, :regress: not served */
	R_METRICS,         /* GET /metrics */
	R_OAI_MODELS,      /* GET /v1/models: OpenAI's list */
	R_OAI_COMPLETIONS, /* POST /v1/completions */
	R_OAI_CHAT,        /* POST /v1/chat/completions */
	R_V2_GENERATE,     /* POST /v2/models/{m}[/versions/{v}]/generate */
	R_V2_GENERATE_STREAM, /* POST .../generate_stream */
};

static int is_post_route(enum route r)
{
	return r == R_V2_INFER || r == R_V1_PREDICT || r == R_V1_OTHER_VERB || r == R_OAI_COMPLETIONS || r == R_OAI_CHAT ||
	       r == R_V2_GENERATE || r == R_V2_GENERATE_STREAM;
}

static int is_oai_route(enum route r)
{
	return r == R_OAI_MODELS || r == R_OAI_COMPLETIONS || r == R_OAI_CHAT;
}

static int is_gen_route(enum route r)
{
	return r == R_OAI_COMPLETIONS || r == R_OAI_CHAT || r == R_V2_GENERATE || r == R_V2_GENERATE_STREAM;
}

enum phase { READING, WAITING, ANSWERED };

struct request {
	struct dlk_server *srv;
	struct MHD_Connection *conn;
	enum route route;
	char model_name[DLK_SERVE_NAME_MAX + 1];
	char version[32];
	int has_version, bad_name;
	struct dlk_serve_model *model; /* for inference routes, once found */
	double t0;
	enum phase phase;
	int status;
	size_t bytes_out;
	char method[16];
	char *url;
	struct dlk_buf body;
	long long header_len;          /* Inference-Header-Content-Length, -1 when absent */
	int is_infer;                  /* counts in the model's success/failure metrics */
	int failed_reason;             /* enum dlk_fail_reason, or -1 */
	struct dlk_job job;
	atomic_int job_done;
	int submit_failed;
	int too_large;                 /* the body passed the limit: discarded as it arrives */
	int close;                     /* the connection ends after the answer (bad framing) */
	struct dlk_v2_request v2;
	struct dlk_tfs_request tfs;
	float *logits;
	const char *err_param;         /* OpenAI's error param */
	/* generation: one sequence per prompt */
	struct dlk_oai_request oai;
	int n_gen, stream;
	struct dlk_gen_req **gen;
	struct dlk_buf *gen_text;      /* non-streamed: each choice's text */
	int *gen_state;                /* 0 running, 1 finished, -1 failed */
	enum dlk_finish *gen_finish;
	int *gen_started;              /* streamed: its first chunk is out */
	char gen_msg[256];
	char oai_id[48];
	long long created;
	struct dlk_buf sout;           /* streamed: events not yet handed to libmicrohttpd */
	size_t sout_off;
	int stream_ended;
};

/* ---- answers ---- */

static void free_buf(void *p) { free(p); }

static enum MHD_Result answer_buf(struct request *rq, int status, const char *ctype, struct dlk_buf *body, size_t json_len,
                                  const char *allow)
{
	size_t len = 0;
	char *data = dlk_buf_detach(body, &len);
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, data, free_buf);
	enum MHD_Result r;

	if (!resp) {
		free(data);
		return MHD_NO;
	}
	if (ctype)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (json_len) {
		char n[32];
		snprintf(n, sizeof(n), "%zu", json_len);
		MHD_add_response_header(resp, "Inference-Header-Content-Length", n);
	}
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	if (atomic_load(&rq->srv->draining) || rq->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	rq->status = status;
	rq->bytes_out = len;
	rq->phase = ANSWERED;
	r = MHD_queue_response(rq->conn, (unsigned int)status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result answer_json(struct request *rq, int status, struct dlk_buf *body)
{
	return answer_buf(rq, status, "application/json", body, 0, NULL);
}

static enum MHD_Result answer_error(struct request *rq, int status, int reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static enum MHD_Result answer_error(struct request *rq, int status, int reason, const char *fmt, ...)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rq->failed_reason = reason;
	if (is_oai_route(rq->route))
		dlk_oai_write_error(status, msg, rq->err_param, &b);
	else
		dlk_v2_write_error(msg, &b);
	return answer_buf(rq, status, "application/json", &b, 0,
	                  status == 405 ? (is_post_route(rq->route) ? "POST" : "GET, HEAD") : NULL);
}

/* ---- routes ---- */

/* A URL segment shown in a message: printable ASCII only */
static void copy_segment(char *dst, size_t cap, const char *s, size_t len, int *bad)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		dst[o++] = c > 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
	}
	dst[o] = '\0';
	if (len >= cap)
		*bad = 1;
}

static int seg_is(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && !memcmp(s, lit, len);
}

/* Splits url (without the query) into route, model and version. */
static void route_of(struct request *rq, const char *url)
{
	const char *seg[8];
	size_t seglen[8];
	int n = 0;
	const char *p = url;

	rq->route = R_NOT_FOUND;
	while (*p == '/')
		p++;
	while (*p && n < 8) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		seg[n] = p;
		seglen[n++] = l;
		p += l;
		while (*p == '/')
			p++;
	}
	if (*p)
		return;
	if (n == 0) {
		rq->route = R_ROOT;
		return;
	}
	if (n == 1 && seg_is(seg[0], seglen[0], "metrics")) {
		rq->route = R_METRICS;
		return;
	}
	if (n < 1 || (!seg_is(seg[0], seglen[0], "v2") && !seg_is(seg[0], seglen[0], "v1")))
		return;
	int v1 = seg[0][1] == '1';
	if (!v1 && n == 1) {
		rq->route = R_V2_SERVER;
		return;
	}
	if (v1 && n == 2 && seg_is(seg[1], seglen[1], "models")) {
		rq->route = R_OAI_MODELS;
		return;
	}
	if (v1 && n == 2 && seg_is(seg[1], seglen[1], "completions")) {
		rq->route = R_OAI_COMPLETIONS;
		return;
	}
	if (v1 && n == 3 && seg_is(seg[1], seglen[1], "chat") && seg_is(seg[2], seglen[2], "completions")) {
		rq->route = R_OAI_CHAT;
		return;
	}
	if (!v1 && n == 3 && seg_is(seg[1], seglen[1], "health")) {
		if (seg_is(seg[2], seglen[2], "live"))
			rq->route = R_LIVE;
		else if (seg_is(seg[2], seglen[2], "ready"))
			rq->route = R_READY;
		return;
	}
	if (n < 3 || !seg_is(seg[1], seglen[1], "models"))
		return;
	/* v1 puts the verb after a colon on the last segment: /v1/models/m:predict */
	const char *verb = NULL;
	size_t verb_len = 0;
	if (v1) {
		const char *colon = memchr(seg[n - 1], ':', seglen[n - 1]);
		if (colon) {
			verb = colon + 1;
			verb_len = seglen[n - 1] - (size_t)(colon - seg[n - 1]) - 1;
			seglen[n - 1] = (size_t)(colon - seg[n - 1]);
		}
	}
	copy_segment(rq->model_name, sizeof(rq->model_name), seg[2], seglen[2], &rq->bad_name);
	int i = 3;
	if (n >= 5 && seg_is(seg[3], seglen[3], "versions")) {
		int bad = 0;
		copy_segment(rq->version, sizeof(rq->version), seg[4], seglen[4], &bad);
		rq->has_version = 1;
		i = 5;
	}
	if (v1) {
		if (i == n && !verb)
			rq->route = R_V1_STATUS;
		else if (i == n && seg_is(verb, verb_len, "predict"))
			rq->route = R_V1_PREDICT;
		else if (i == n && (seg_is(verb, verb_len, "classify") || seg_is(verb, verb_len, "regress")))
			rq->route = R_V1_OTHER_VERB;
		else if (i + 1 == n && !verb && seg_is(seg[i], seglen[i], "metadata"))
			rq->route = R_V1_METADATA;
		return;
	}
	if (i == n)
		rq->route = R_V2_MODEL;
	else if (i + 1 == n && seg_is(seg[i], seglen[i], "ready"))
		rq->route = R_V2_MODEL_READY;
	else if (i + 1 == n && seg_is(seg[i], seglen[i], "infer"))
		rq->route = R_V2_INFER;
	else if (i + 1 == n && seg_is(seg[i], seglen[i], "generate"))
		rq->route = R_V2_GENERATE;
	else if (i + 1 == n && seg_is(seg[i], seglen[i], "generate_stream"))
		rq->route = R_V2_GENERATE_STREAM;
}


/* The model a route names: 0 when found, else the status to answer (404, 503) with msg. */
static int lookup_model(struct request *rq, char *msg, size_t len)
{
	struct dlk_server *srv = rq->srv;
	int n = atomic_load(&srv->n_loaded);

	for (int i = 0; i < n && !rq->bad_name; i++)
		if (!strcmp(srv->models[i].name, rq->model_name)) {
			rq->model = &srv->models[i];
			if (rq->has_version && strcmp(rq->version, DLK_V2_VERSION)) {
				snprintf(msg, len, "model '%s' has no version '%s' (it serves version " DLK_V2_VERSION ")",
				         rq->model_name, rq->version);
				rq->model = NULL;
				return 404;
			}
			return 0;
		}
	if (n < srv->n_models) {
		snprintf(msg, len, "the server is still loading its models");
		return 503;
	}
	{
		/* a client that guessed wrong learns the names there are */
		const char *names[64];
		char sug[160];
		int k = 0;
		for (int i = 0; i < n && k < 64; i++)
			names[k++] = srv->models[i].name;
		dlk_suggest_or_list(sug, sizeof(sug), rq->model_name, names, (size_t)k, "models here are");
		snprintf(msg, len, "unknown model '%.60s'%s", rq->model_name, sug);
	}
	return 404;
}

/* lookup_model, answering the error itself: 0 when found */
static int find_model(struct request *rq, enum MHD_Result *res)
{
	char msg[256];
	int st = lookup_model(rq, msg, sizeof(msg));
	if (st)
		*res = answer_error(rq, st, st == 503 ? DLK_FAIL_UNAVAILABLE : DLK_FAIL_BAD_REQUEST, "%s", msg);
	return st;
}

static enum MHD_Result answer_metrics(struct request *rq)
{
	struct dlk_server *srv = rq->srv;
	int n = atomic_load(&srv->n_loaded);
	struct dlk_metrics_model *mm = xcalloc((size_t)(n ? n : 1), sizeof(*mm));
	struct dlk_metrics_server ms;
	struct dlk_buf b = DLK_BUF_INIT;

	memset(&ms, 0, sizeof(ms));
	ms.ready = atomic_load(&srv->ready);
	ms.draining = atomic_load(&srv->draining);
	ms.start_time = srv->start_time;
	for (int c = 1; c <= 5; c++)
		ms.http_requests[c] = atomic_load(&srv->http_class[c]);
	for (int i = 0; i < n; i++) {
		mm[i].name = srv->models[i].name;
		mm[i].stats = &srv->models[i].stats;
		mm[i].ready = atomic_load(&srv->models[i].ready);
	}
	dlk_metrics_write(&b, &ms, mm, n);
	{
		const char **names = xcalloc((size_t)(n ? n : 1), sizeof(char *));
		const struct dlk_gen_stats **gs = xcalloc((size_t)(n ? n : 1), sizeof(*gs));
		int k = 0;
		for (int i = 0; i < n; i++)
			if (srv->models[i].gen) {
				names[k] = srv->models[i].name;
				gs[k++] = &srv->models[i].gen_stats;
			}
		dlk_gen_metrics_write(&b, names, gs, k);
		free(names);
		free(gs);
	}
	if (srv->metrics)
		srv->metrics(srv->metrics_ctx, &b);
	free(mm);
	return answer_buf(rq, 200, "text/plain; version=0.0.4; charset=utf-8", &b, 0, NULL);
}

/* GET routes: answered at once */
static enum MHD_Result answer_get(struct request *rq)
{
	struct dlk_server *srv = rq->srv;
	struct dlk_buf b = DLK_BUF_INIT;
	enum MHD_Result res;

	switch (rq->route) {
	case R_METRICS:
		return answer_metrics(rq);
	case R_V2_SERVER:
		dlk_v2_write_server_metadata(srv->version, &b);
		return answer_json(rq, 200, &b);
	/* Health answers by status code (the protocol: 200 true, 4xx false; "not ready" is Triton's
	 * 400), with the JSON the Open Inference Protocol's REST page and KServe's client read. */
	case R_ROOT:
		dlk_buf_adds(&b, "{\"status\":\"alive\"}");
		return answer_json(rq, 200, &b);
	case R_LIVE:
		dlk_buf_adds(&b, "{\"live\":true}");
		return answer_json(rq, 200, &b);
	case R_READY: {
		int ready = atomic_load(&srv->ready);
		dlk_buf_adds(&b, ready ? "{\"ready\":true}" : "{\"ready\":false}");
		return answer_json(rq, ready ? 200 : 400, &b);
	}
	case R_V2_MODEL_READY: {
		char msg[256];
		int st = lookup_model(rq, msg, sizeof(msg)), ready;
		if (st == 404)
			return answer_error(rq, 404, DLK_FAIL_BAD_REQUEST, "%s", msg);
		ready = !st && atomic_load(&rq->model->ready) && !atomic_load(&srv->draining);
		dlk_buf_adds(&b, "{\"name\":");
		jd_write_string(&b, rq->model_name, strlen(rq->model_name));
		dlk_buf_addf(&b, ",\"ready\":%s}", ready ? "true" : "false");
		return answer_json(rq, ready ? 200 : 400, &b);
	}
	case R_V2_MODEL:
		if (find_model(rq, &res))
			return res;
		dlk_v2_write_model_metadata(&rq->model->sig, &b);
		return answer_json(rq, 200, &b);
	case R_V1_STATUS: {
		if (find_model(rq, &res))
			return res;
		int draining = atomic_load(&srv->draining), ready = atomic_load(&rq->model->ready);
		dlk_tfs_write_status(rq->model->name, draining ? "UNLOADING" : ready ? "AVAILABLE" : "LOADING", ready && !draining, &b);
		return answer_json(rq, 200, &b);
	}
	case R_V1_METADATA:
		if (find_model(rq, &res))
			return res;
		dlk_tfs_write_metadata(&rq->model->sig, &b);
		return answer_json(rq, 200, &b);
	case R_OAI_MODELS: {
		int n = atomic_load(&srv->n_loaded), k = 0;
		const char **names = xcalloc((size_t)(n ? n : 1), sizeof(char *));
		for (int i = 0; i < n; i++)
			if (srv->models[i].is_lm)
				names[k++] = srv->models[i].name;
		dlk_oai_write_models(names, k, (long long)srv->start_time, &b);
		free(names);
		return answer_json(rq, 200, &b);
	}
	default:
		return answer_error(rq, 404, DLK_FAIL_BAD_REQUEST, "no route for '%s'", rq->url);
	}
}

/* ---- inference ---- */

static void job_done(struct dlk_job *job)
{
	struct request *rq = job->arg;
	atomic_store(&rq->job_done, 1);
	MHD_resume_connection(rq->conn);
}

static enum MHD_Result finish_inference(struct request *rq)
{
	struct dlk_serve_model *m = rq->model;
	struct dlk_buf b = DLK_BUF_INIT;
	size_t json_len = 0;

	if (rq->submit_failed)
		return answer_error(rq, 503, DLK_FAIL_UNAVAILABLE, "the server is shutting down");
	if (rq->job.status)
		return answer_error(rq, 500, DLK_FAIL_INTERNAL, "model '%s': %s", m->name, rq->job.msg);
	long bad = dlk_serve_nonfinite_row(rq->logits, (size_t)rq->job.rows, (size_t)m->sig.n_classes);
	if (bad >= 0)
		return answer_error(rq, 500, DLK_FAIL_INTERNAL,
		                    "model '%s': the forward pass gave a value that is not finite for row %ld (the weights "
		                    "overflow on this input)", m->name, bad);
	if (rq->route == R_V2_INFER) {
		dlk_v2_write_infer(&m->sig, &rq->v2, rq->logits, &b, &json_len);
		return answer_buf(rq, 200, json_len ? "application/octet-stream" : "application/json", &b, json_len, NULL);
	}
	dlk_tfs_write_predict(&m->sig, &rq->tfs, rq->logits, &b);
	return answer_json(rq, 200, &b);
}

/* ---- generation: OpenAI's completions and chat, Triton's generate ---- */

static void gen_release(struct request *rq)
{
	for (int i = 0; i < rq->n_gen; i++) {
		dlk_gen_req_release(rq->gen[i]);
		dlk_buf_release(&rq->gen_text[i]);
	}
	free(rq->gen);
	free(rq->gen_text);
	free(rq->gen_state);
	free(rq->gen_finish);
	free(rq->gen_started);
	rq->gen = NULL;
	rq->n_gen = 0;
	dlk_oai_request_release(&rq->oai);
	dlk_buf_release(&rq->sout);
}

static void gen_arm(void *arg)
{
	struct request *rq = arg;
	MHD_suspend_connection(rq->conn);
}

static void gen_wake(void *arg)
{
	struct request *rq = arg;
	MHD_resume_connection(rq->conn);
}

static enum dlk_oai_kind gen_kind(enum route r)
{
	return r == R_OAI_CHAT ? DLK_OAI_CHAT : r == R_OAI_COMPLETIONS ? DLK_OAI_COMPLETIONS : DLK_OAI_TRITON;
}

static void gen_usage(struct request *rq, struct dlk_oai_usage *u)
{
	u->prompt_tokens = u->completion_tokens = 0;
	for (int i = 0; i < rq->n_gen; i++) {
		long long p, c;
		dlk_gen_req_counts(rq->gen[i], &p, &c);
		u->prompt_tokens += p;
		u->completion_tokens += c;
	}
}

/* Polls choice i; arm: suspend when it has nothing new. Returns its state. */
static int gen_poll(struct request *rq, int i, struct dlk_buf *text, int arm)
{
	if (rq->gen_state[i])
		return rq->gen_state[i];
	rq->gen_state[i] = dlk_gen_req_poll(rq->gen[i], text, &rq->gen_finish[i], rq->gen_msg, sizeof(rq->gen_msg),
	                                    arm ? gen_arm : NULL, gen_wake, rq);
	return rq->gen_state[i];
}

/* The non-streamed answer once every choice is finished; else suspends until there is more. */
static enum MHD_Result continue_generate(struct request *rq)
{
	struct dlk_serve_model *m = rq->model;
	struct dlk_buf b = DLK_BUF_INIT;

	for (int i = 0; i < rq->n_gen; i++) {
		for (;;) {
			size_t before = rq->gen_text[i].len;
			int st = gen_poll(rq, i, &rq->gen_text[i], 1);
			if (st < 0)
				return answer_error(rq, 500, DLK_FAIL_INTERNAL, "model '%s': %s", m->name, rq->gen_msg);
			if (st > 0)
				break;
			if (rq->gen_text[i].len == before)
				return MHD_YES; /* suspended: woken when it has more */
		}
	}
	struct dlk_oai_usage u;
	gen_usage(rq, &u);
	if (rq->route == R_V2_GENERATE) {
		dlk_triton_write_generate(m->name, rq->gen_text[0].data ? rq->gen_text[0].data : "", rq->gen_text[0].len,
		                          rq->gen_finish[0], &b);
		return answer_json(rq, 200, &b);
	}
	struct dlk_oai_choice *ch = xcalloc((size_t)rq->n_gen, sizeof(*ch));
	for (int i = 0; i < rq->n_gen; i++)
		ch[i] = (struct dlk_oai_choice){ rq->gen_text[i].data ? rq->gen_text[i].data : "", rq->gen_text[i].len,
			                         rq->gen_finish[i] };
	dlk_oai_write_response(gen_kind(rq->route), rq->oai_id, rq->created, m->name, ch, rq->n_gen, &u, &b);
	free(ch);
	return answer_json(rq, 200, &b);
}

/* Events for what the choices have made (polled into gen_text, their stash); 1 when the stream is
 * complete. gen_started: bit 0 its first chunk is out, bit 1 its last. */
static int stream_collect(struct request *rq)
{
	enum dlk_oai_kind kind = gen_kind(rq->route);
	const char *name = rq->model->name;
	int all_done = 1, failed = -1;

	for (int i = 0; i < rq->n_gen; i++) {
		struct dlk_buf *t = &rq->gen_text[i];
		if (rq->gen_started[i] & 2)
			continue;
		int st = gen_poll(rq, i, t, 0);
		if (st < 0) {
			failed = i;
			break;
		}
		if (kind == DLK_OAI_TRITON) {
			if (t->len || st > 0) {
				dlk_buf_adds(&rq->sout, "data: ");
				dlk_triton_write_generate(name, t->data ? t->data : "", t->len, st > 0 ? rq->gen_finish[i] : DLK_FINISH_NONE,
				                          &rq->sout);
				dlk_buf_adds(&rq->sout, "\n\n");
			}
		} else {
			if (t->len || (kind == DLK_OAI_CHAT && !(rq->gen_started[i] & 1))) {
				dlk_oai_write_chunk(kind, rq->oai_id, rq->created, name, i, !(rq->gen_started[i] & 1),
				                    t->data ? t->data : "", t->len, DLK_FINISH_NONE, NULL, &rq->sout);
				rq->gen_started[i] |= 1;
			}
			if (st > 0)
				dlk_oai_write_chunk(kind, rq->oai_id, rq->created, name, i, 0, "", 0, rq->gen_finish[i], NULL, &rq->sout);
		}
		dlk_buf_reset(t);
		if (st > 0)
			rq->gen_started[i] |= 2;
		else
			all_done = 0;
	}
	if (failed >= 0) {
		/* an error event ends the stream */
		if (kind == DLK_OAI_TRITON) {
			dlk_triton_write_error_event(rq->gen_msg, &rq->sout);
		} else {
			dlk_buf_adds(&rq->sout, "data: ");
			dlk_oai_write_error(500, rq->gen_msg, NULL, &rq->sout);
			dlk_buf_adds(&rq->sout, "\n\n");
			dlk_oai_write_done(&rq->sout);
		}
		rq->failed_reason = DLK_FAIL_INTERNAL;
		rq->status = 500; /* for the metrics and the access log: the stream failed */
		return 1;
	}
	if (!all_done)
		return 0;
	if (kind != DLK_OAI_TRITON) {
		if (rq->oai.include_usage) {
			struct dlk_oai_usage u;
			gen_usage(rq, &u);
			dlk_oai_write_chunk(kind, rq->oai_id, rq->created, name, 0, 0, NULL, 0, DLK_FINISH_NONE, &u, &rq->sout);
		}
		dlk_oai_write_done(&rq->sout);
	}
	return 1;
}

/* libmicrohttpd asks for more of a streamed answer: what is ready, or a suspension until there
 * is more (the scheduler resumes the connection). */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct request *rq = cls;
	(void)pos;
	for (;;) {
		if (rq->sout_off < rq->sout.len) {
			size_t n = rq->sout.len - rq->sout_off;
			if (n > max)
				n = max;
			memcpy(buf, rq->sout.data + rq->sout_off, n);
			rq->sout_off += n;
			return (ssize_t)n;
		}
		dlk_buf_reset(&rq->sout);
		rq->sout_off = 0;
		if (rq->stream_ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		rq->stream_ended = stream_collect(rq);
		if (rq->sout.len || rq->stream_ended)
			continue;
		/* nothing yet: wait on the first running choice (what it makes lands in its stash) */
		for (int i = 0; i < rq->n_gen; i++)
			if (!rq->gen_state[i]) {
				if (!gen_poll(rq, i, &rq->gen_text[i], 1) && !rq->gen_text[i].len)
					return 0; /* suspended */
				break;
			}
	}
}

static enum MHD_Result start_generate(struct request *rq)
{
	struct dlk_server *srv = rq->srv;
	enum dlk_oai_kind kind = gen_kind(rq->route);
	struct dlk_serve_model *m;
	char msg[1024];
	enum MHD_Result res;

	if (rq->header_len >= 0)
		return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST,
		                    "Inference-Header-Content-Length belongs to the V2 protocol's infer; this route takes JSON only");
	if (dlk_oai_parse(kind, rq->body.data ? rq->body.data : "", rq->body.len, &srv->lim, &rq->oai, msg, sizeof(msg),
	                  &rq->err_param))
		return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%s", msg);
	dlk_buf_release(&rq->body);
	if (kind != DLK_OAI_TRITON) {
		rq->err_param = "model";
		int bad = strlen(rq->oai.model) >= sizeof(rq->model_name);
		copy_segment(rq->model_name, sizeof(rq->model_name), rq->oai.model, strlen(rq->oai.model), &bad);
		rq->bad_name = bad;
		if (find_model(rq, &res))
			return res;
		rq->err_param = NULL;
		rq->is_infer = 1;
		if (!atomic_load(&rq->model->ready))
			return answer_error(rq, 503, DLK_FAIL_UNAVAILABLE, "model '%s' is not ready yet", rq->model->name);
	}
	m = rq->model;
	if (!m->is_lm)
		return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%s", m->not_lm ? m->not_lm : "not a language model");
	rq->stream = rq->oai.stream || rq->route == R_V2_GENERATE_STREAM;
	if (rq->route == R_V2_GENERATE && rq->oai.stream)
		return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "stream is true: POST to .../generate_stream for a stream");

	/* the prompts: chat messages through the template */
	struct dlk_buf chat = DLK_BUF_INIT;
	if (kind == DLK_OAI_CHAT) {
		const struct dlk_chat_template *t = m->lm.has_chat ? &m->lm.chat : srv->chat_template;
		if (!t) {
			rq->err_param = "messages";
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "model '%s' has no chat template: use /v1/completions "
			                    "with a prompt, or serve it with --chat-template FILE", m->name);
		}
		dlk_oai_chat_prompt(&rq->oai, t, &chat);
	}
	int n = kind == DLK_OAI_CHAT ? 1 : rq->oai.n_prompts;
	rq->gen = xcalloc((size_t)n, sizeof(*rq->gen));
	rq->gen_text = xcalloc((size_t)n, sizeof(*rq->gen_text));
	rq->gen_state = xcalloc((size_t)n, sizeof(int));
	rq->gen_finish = xcalloc((size_t)n, sizeof(enum dlk_finish));
	rq->gen_started = xcalloc((size_t)n, sizeof(int));
	for (int i = 0; i < n; i++) {
		struct dlk_err err = DLK_ERR_INIT;
		const char *p = kind == DLK_OAI_CHAT ? (chat.data ? chat.data : "") : rq->oai.prompts[i];
		size_t len = kind == DLK_OAI_CHAT ? chat.len : rq->oai.prompt_len[i];
		rq->gen[i] = dlk_gen_req_new(&m->lm, p, len, &rq->oai.params, &err);
		if (!rq->gen[i]) {
			dlk_buf_release(&chat);
			rq->err_param = kind == DLK_OAI_CHAT ? "messages" : kind == DLK_OAI_TRITON ? NULL : "prompt";
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%s%s", err.msg, n > 1 ? " (a prompt of the list)" : "");
		}
		rq->n_gen = i + 1;
	}
	dlk_buf_release(&chat);
	dlk_oai_new_id(kind, rq->oai_id, sizeof(rq->oai_id));
	rq->created = (long long)time(NULL);
	for (int i = 0; i < n; i++)
		if (dlk_gen_submit(m->gen, rq->gen[i]))
			return answer_error(rq, 503, DLK_FAIL_UNAVAILABLE, "the server is shutting down");
	rq->phase = WAITING;
	if (!rq->stream)
		return continue_generate(rq);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, rq, NULL);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	if (atomic_load(&srv->draining))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	rq->status = 200;
	rq->phase = ANSWERED;
	enum MHD_Result r = MHD_queue_response(rq->conn, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

/* The body is complete: decode it, hand the rows to the batcher and suspend. */
static enum MHD_Result start_inference(struct request *rq)
{
	struct dlk_serve_model *m = rq->model;
	char msg[1024];
	float *x;
	long long rows;

	if (is_gen_route(rq->route))
		return start_generate(rq);
	if (rq->route == R_V2_INFER) {
		if (dlk_v2_parse_infer(&m->sig, rq->body.data ? rq->body.data : "", rq->body.len, rq->header_len, &rq->srv->lim,
		                       &rq->v2, msg, sizeof(msg)))
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%s", msg);
		x = rq->v2.x;
		rows = rq->v2.rows;
	} else {
		if (rq->header_len >= 0)
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST,
			                    "Inference-Header-Content-Length belongs to the V2 protocol's infer; this route takes JSON only");
		if (dlk_tfs_parse_predict(&m->sig, rq->body.data ? rq->body.data : "", rq->body.len, &rq->srv->lim, &rq->tfs, msg,
		                          sizeof(msg)))
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%s", msg);
		x = rq->tfs.x;
		rows = rq->tfs.rows;
	}
	dlk_buf_release(&rq->body); /* the rows are decoded: the body is no longer needed */
	if (rows > 1 << 30)
		return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%lld rows in one request is too many", rows);
	rq->logits = xmalloc((size_t)rows * (size_t)m->sig.n_classes * sizeof(float));
	memset(&rq->job, 0, sizeof(rq->job));
	rq->job.in = x;
	rq->job.rows = (int)rows;
	rq->job.out = rq->logits;
	rq->job.arg = rq;
	rq->phase = WAITING;
	int inl = dlk_batcher_try_inline(m->batcher, &rq->job);
	if (inl) {
		rq->submit_failed = inl < 0;
		return finish_inference(rq);
	}
	rq->job.done = job_done;
	/* suspended before the job can finish: a compute worker may resume it at once */
	MHD_suspend_connection(rq->conn);
	if (dlk_batcher_submit(m->batcher, &rq->job)) {
		rq->submit_failed = 1;
		MHD_resume_connection(rq->conn);
	}
	return MHD_YES;
}

/* First call for an inference request: everything that can be refused before the body. */
static enum MHD_Result check_inference(struct request *rq, int *refused)
{
	struct dlk_server *srv = rq->srv;
	enum MHD_Result res;
	const char *cl, *hl, *enc;

	*refused = 1;
	if (rq->route == R_V1_OTHER_VERB)
		return answer_error(rq, 501, DLK_FAIL_BAD_REQUEST, "only :predict is served (not :classify or :regress)");
	/* OpenAI's routes name the model in the body */
	if (!is_oai_route(rq->route)) {
		if (find_model(rq, &res))
			return res;
		rq->is_infer = 1;
	}
	if (atomic_load(&srv->draining))
		return answer_error(rq, 503, DLK_FAIL_UNAVAILABLE, "the server is shutting down");
	if (rq->model && !atomic_load(&rq->model->ready))
		return answer_error(rq, 503, DLK_FAIL_UNAVAILABLE, "model '%s' is not ready yet", rq->model->name);
	cl = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(cl, &end, 10);
		if (!errno && end != cl && !*end && n > (unsigned long long)srv->cfg.max_request_bytes)
			return answer_error(rq, 413, DLK_FAIL_TOO_LARGE,
			                    "the request body of %llu bytes is over the limit of %lld bytes (serving.max_request_bytes)",
			                    n, srv->cfg.max_request_bytes);
	}
	enc = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
	if (enc && strcmp(enc, "identity"))
		return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "Content-Encoding '%.40s' is not supported: send the body uncompressed",
		                    enc);
	hl = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Inference-Header-Content-Length");
	rq->header_len = -1;
	if (hl) {
		char *end;
		errno = 0;
		long long n = strtoll(hl, &end, 10);
		if (errno || end == hl || *end || n < 0)
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "Inference-Header-Content-Length '%.40s' is not a length", hl);
		rq->header_len = n;
	}
	*refused = 0;
	return MHD_YES;
}

struct framing {
	int n_length, n_te, differ;
	char length[64];
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct framing *f = cls;
	(void)kind;
	if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->n_te++;
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		/* a list ("5, 5") counts as different too: libmicrohttpd reads only a number */
		if (!f->n_length++)
			snprintf(f->length, sizeof(f->length), "%s", value ? value : "");
		else if (strcmp(f->length, value ? value : ""))
			f->differ = 1;
	}
	return MHD_YES;
}

/* RFC 9112 section 6: a request framed two ways (two different Content-Lengths, or a
 * Transfer-Encoding beside a Content-Length) is refused and its connection closed, since a
 * proxy that reads the other framing would see a second request in the body (smuggling).
 * libmicrohttpd takes the first Content-Length and ignores the rest; the check is here.
 * Returns 0, or 1 with msg filled. */
int dlk_http_framing_bad(struct MHD_Connection *conn, char *msg, size_t len)
{
	struct framing f = { 0 };

	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
	if (f.differ)
		return snprintf(msg, len, "the request has Content-Length headers that disagree"), 1;
	if (f.n_te && f.n_length)
		return snprintf(msg, len, "the request has both Transfer-Encoding and Content-Length"), 1;
	if (f.n_te > 1)
		return snprintf(msg, len, "the request has more than one Transfer-Encoding header"), 1;
	return 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct dlk_server *srv = cls;
	struct request *rq = *con_cls;
	int is_get, is_post;

	(void)version;
	if (!rq) {
		rq = xcalloc(1, sizeof(*rq));
		*con_cls = rq;
		rq->srv = srv;
		rq->conn = conn;
		rq->t0 = dlk_now();
		rq->failed_reason = -1;
		rq->header_len = -1;
		atomic_init(&rq->job_done, 0);
		snprintf(rq->method, sizeof(rq->method), "%s", method);
		rq->url = xstrdup(url);
		atomic_fetch_add(&srv->in_flight, 1);
		route_of(rq, url);
		char bad[128];
		if (dlk_http_framing_bad(conn, bad, sizeof(bad))) {
			rq->route = R_NOT_FOUND;
			rq->close = 1;
			return answer_error(rq, 400, DLK_FAIL_BAD_REQUEST, "%s", bad);
		}
		is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
		is_post = !strcmp(method, MHD_HTTP_METHOD_POST);
		if (rq->route == R_NOT_FOUND)
			return answer_error(rq, 404, DLK_FAIL_BAD_REQUEST, "no route for %s '%s'", rq->method, rq->url);
		if (is_post_route(rq->route) ? !is_post : !is_get)
			return answer_error(rq, 405, DLK_FAIL_BAD_REQUEST, "method %s is not allowed on '%s'", rq->method, rq->url);
		if (!is_post_route(rq->route))
			return MHD_YES; /* answered on the next call: an answer before the (empty) body is read
			                   would make libmicrohttpd close the connection */
		int refused;
		enum MHD_Result r = check_inference(rq, &refused);
		if (refused)
			return r;
		return MHD_YES; /* the body comes next */
	}
	if (!is_post_route(rq->route)) {
		*upload_size = 0; /* a body on a GET is ignored */
		return rq->phase == READING ? answer_get(rq) : MHD_YES;
	}
	if (rq->phase == READING && *upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		/* libmicrohttpd cannot answer while a body is arriving: a client too slow to send
		 * it loses the connection; a body that grows past the limit is read to its end
		 * (bounded by the same timeout) and answered 413 */
		if (dlk_now() - rq->t0 > srv->cfg.request_timeout_s) {
			rq->failed_reason = DLK_FAIL_TIMEOUT;
			rq->status = 408; /* for the access log: nothing is sent */
			return MHD_NO;
		}
		if (rq->too_large)
			return MHD_YES;
		if (rq->body.len + n > (unsigned long long)srv->cfg.max_request_bytes) {
			rq->too_large = 1;
			dlk_buf_release(&rq->body);
			return MHD_YES;
		}
		dlk_buf_add(&rq->body, upload, n);
		return MHD_YES;
	}
	if (rq->phase == READING && rq->too_large)
		return answer_error(rq, 413, DLK_FAIL_TOO_LARGE, "the request body is over the limit of %lld bytes (serving.max_request_bytes)",
		                    srv->cfg.max_request_bytes);
	if (rq->phase == READING)
		return start_inference(rq);
	if (rq->phase == WAITING && is_gen_route(rq->route))
		return continue_generate(rq);
	if (rq->phase == WAITING && (rq->submit_failed || atomic_load(&rq->job_done)))
		return finish_inference(rq);
	return MHD_YES;
}

/* ---- completion: metrics, access log, bookkeeping ---- */

static void access_log(struct request *rq)
{
	struct dlk_server *srv = rq->srv;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char addr[INET6_ADDRSTRLEN] = "-", when[64], line[2048];
	struct timespec ts;
	struct tm tm;

	if (ci && ci->client_addr) {
		const struct sockaddr *sa = ci->client_addr;
		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, addr, sizeof(addr));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, addr, sizeof(addr));
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	char url[512], method[sizeof(rq->method)];
	int bad = 0;
	/* both come from the client and the log is read on terminals: printable ASCII only */
	copy_segment(url, sizeof(url), rq->url, strlen(rq->url), &bad);
	copy_segment(method, sizeof(method), rq->method, strlen(rq->method), &bad);
	int n = snprintf(line, sizeof(line), "%s.%03ldZ %s \"%s %s\" %d %zu %.6f%s%s\n", when, ts.tv_nsec / 1000000, addr,
	                 method, url, rq->status ? rq->status : 499, rq->bytes_out, dlk_now() - rq->t0,
	                 rq->model ? " model=" : "", rq->model ? rq->model->name : "");
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1, line[n - 1] = '\n';
	pthread_mutex_lock(&srv->log_mu);
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t w = write(srv->access_log_fd, line + off, (size_t)n - off);
		if (w <= 0 && errno != EINTR)
			break;
		if (w > 0)
			off += (size_t)w;
	}
	pthread_mutex_unlock(&srv->log_mu);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct dlk_server *srv = cls;
	struct request *rq = *con_cls;

	(void)conn;
	if (!rq)
		return;
	*con_cls = NULL;
	if (rq->status >= 100 && rq->status < 600 && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		atomic_fetch_add(&srv->http_class[rq->status / 100], 1);
	if (rq->model && rq->is_infer) {
		struct dlk_model_stats *st = &rq->model->stats;
		if (rq->status == 200 && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
			atomic_fetch_add(&st->success, 1);
			dlk_hist_observe(&st->request, dlk_now() - rq->t0);
		} else {
			int reason = rq->failed_reason >= 0 ? rq->failed_reason
			             : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? DLK_FAIL_TIMEOUT
			                                                               : DLK_FAIL_BAD_REQUEST;
			atomic_fetch_add(&st->failure[reason], 1);
		}
	}
	if (srv->access_log_fd >= 0)
		access_log(rq);
	dlk_v2_request_release(&rq->v2);
	dlk_tfs_request_release(&rq->tfs);
	gen_release(rq);
	dlk_buf_release(&rq->body);
	free(rq->logits);
	free(rq->url);
	free(rq);
	atomic_fetch_sub(&srv->in_flight, 1);
}

int dlk_http_start(struct dlk_server *srv, const char *host, int port, struct dlk_err *err)
{
	struct sockaddr_storage ss;
	unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME;
	struct MHD_OptionItem ops[10];
	int n = 0;

	if (port < 0 || port > 65535)
		return dlk_errf(err, DLK_EXIT_USAGE, "port %d is not a TCP port", port);
	memset(&ss, 0, sizeof(ss));
	if (host && *host) {
		struct addrinfo hints, *ai = NULL;
		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE;
		int rc = getaddrinfo(host, NULL, &hints, &ai);
		if (rc || !ai)
			return dlk_errf(err, DLK_EXIT_USAGE, "cannot listen on '%s': %s", host, gai_strerror(rc));
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		freeaddrinfo(ai);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
	}
	if (ss.ss_family == AF_INET6) {
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		flags |= MHD_USE_IPv6;
	} else {
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	}
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &ss };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, srv->cfg.max_connections, NULL };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, srv->cfg.idle_timeout_s, NULL };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, srv };
	if (srv->http_threads > 1)
		ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, srv->http_threads, NULL };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	srv->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handler, srv, MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
	if (!srv->daemon)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot listen on %s port %d%s", host && *host ? host : "every address", port,
		                port ? " (is another server using it?)" : "");
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
	srv->port = di && di->port ? di->port : port;
	return 0;
}

void dlk_http_stop(struct dlk_server *srv)
{
	if (srv->daemon)
		MHD_stop_daemon(srv->daemon);
	srv->daemon = NULL;
}
