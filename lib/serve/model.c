/* Loading a bundle for serving and running it on a backend. */
#include "lib/serve/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/net.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

static int valid_name(const char *s, size_t len)
{
	if (len < 1 || len > DLK_SERVE_NAME_MAX || s[0] == '.')
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

int dlk_serve_model_arg(const char *arg, char **name_out, char **path_out, struct dlk_err *err)
{
	const char *eq = strchr(arg, '=');

	*name_out = *path_out = NULL;
	/* a path may hold '=' too: only a valid name before it makes it NAME=PATH */
	if (eq && valid_name(arg, (size_t)(eq - arg)) && eq[1]) {
		*name_out = xstrndup(arg, (size_t)(eq - arg));
		*path_out = xstrdup(eq + 1);
		return 0;
	}
	if (!*arg)
		return dlk_errf(err, DLK_EXIT_USAGE, "an empty model argument (expected PATH or NAME=PATH)");
	*path_out = xstrdup(arg);
	return 0;
}

int dlk_serve_model_load(struct dlk_serve_model *m, const char *name, const char *path, const struct dlk_backend *be,
                         struct dlk_err *err)
{
	const cJSON *v;

	memset(m, 0, sizeof(*m));
	m->bundle = (struct dlk_bundle)DLK_BUNDLE_INIT;
	m->test_accuracy = -1;
	if (dlk_bundle_read(path, &m->bundle, err))
		return -1;
	if (!name) {
		v = cJSON_GetObjectItemCaseSensitive(m->bundle.meta, "name");
		name = cJSON_IsString(v) ? v->valuestring : "model";
	}
	if (!valid_name(name, strlen(name))) {
		/* the name points into the bundle's metadata: the message is written before the
		 * bundle is released, and a cut never splits a character */
		dlk_errf(err, DLK_EXIT_USAGE, "'%s': the model name '%.*s' cannot be used in URLs", path,
		         (int)dlk_utf8_cut(name, strlen(name), 80), name);
		dlk_err_hint(err, "name it on the command line: NAME=%s (letters, digits, '.', '_', '-')", path);
		dlk_bundle_release(&m->bundle);
		return -1;
	}
	m->name = xstrdup(name);
	m->path = xstrdup(path);
	m->be = be;
	v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m->bundle.meta, "metrics"), "test_accuracy");
	if (cJSON_IsNumber(v))
		m->test_accuracy = v->valuedouble;

	struct dlk_serve_sig *s = &m->sig;
	s->name = m->name;
	memcpy(s->dims, m->bundle.model.input, sizeof(s->dims));
	s->rank = m->bundle.model.input_rank == 1 ? 1 : 3;
	s->in_size = (size_t)s->dims[0] * (size_t)s->dims[1] * (size_t)s->dims[2];
	s->n_classes = m->bundle.n_classes;
	s->classes = m->bundle.classes;
	s->scale = m->bundle.scale;
	s->mean = m->bundle.mean;
	s->std = m->bundle.std;
	if (m->bundle.n_channel_scaling == s->dims[0]) {
		s->channels = m->bundle.n_channel_scaling;
		memcpy(s->channel_mean, m->bundle.channel_mean, sizeof(s->channel_mean));
		memcpy(s->channel_std, m->bundle.channel_std, sizeof(s->channel_std));
	}
	dlk_serve_sig_init_lut(s);
	if (m->bundle.tokenizer && s->rank == 1)
		s->tokenizer = m->bundle.tokenizer;
	atomic_init(&m->ready, 0);
	struct dlk_err lm_err = DLK_ERR_INIT;
	if (!dlk_lm_init(&m->lm, &m->bundle, m->name, &lm_err))
		m->is_lm = 1;
	else
		m->not_lm = xstrdup(lm_err.msg);
	return 0;
}

int dlk_serve_model_fit(struct dlk_serve_model *m, int max_batch, long long max_memory, int *lowered,
                        struct dlk_err *err)
{
	struct dlk_net net = DLK_NET_INIT;
	int rows = max_batch, limit;
	double one;

	*lowered = 0;
	/* the shapes only: a 3 KB bundle can describe layers whose activations need gigabytes per
	 * row, and max_batch rows of them on every compute worker would exhaust the machine */
	if (dlk_bundle_net(&m->bundle, m->be, &net, err))
		return dlk_err_prefix(err, "'%s'", m->path);
	one = dlk_net_batch_bytes(&net, 1);
	limit = dlk_net_batch_limit(&net);
	if (one > (double)max_memory || limit < 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "model '%s' from '%s' needs %.0f MiB for the activations of one row, over "
		         "serving.max_memory (%lld MiB)", m->name, m->path, ceil(one / (1 << 20)), max_memory >> 20);
		dlk_err_hint(err, "serve it with a larger serving.max_memory (--set serving.max_memory=...), if the "
		             "machine has the memory and the bundle is one you trust");
		dlk_net_release(&net);
		return -1;
	}
	while (rows > 1 && (dlk_net_batch_bytes(&net, rows) > (double)max_memory || rows > limit))
		rows = rows / 2 > 1 ? rows / 2 : 1;
	/* halving found a fitting size; the largest one below the one that did not fit */
	if (rows < max_batch) {
		int hi = rows * 2 < max_batch ? rows * 2 : max_batch;
		while (rows + 1 < hi) {
			int mid = rows + (hi - rows) / 2;
			if (dlk_net_batch_bytes(&net, mid) <= (double)max_memory && mid <= limit)
				rows = mid;
			else
				hi = mid;
		}
		*lowered = 1;
	}
	dlk_net_release(&net);
	m->max_batch = rows;
	return 0;
}

/* ---- the engine: one network per compute worker ---- */

struct replica {
	struct dlk_net net;
	const struct dlk_backend *be;
	float *dev_in;               /* device input staging; NULL when device memory is host memory */
	int n_classes;
	size_t in_size;
};

static void *replica_new(void *ctx, int max_rows, struct dlk_err *err)
{
	struct dlk_serve_model *m = ctx;
	struct replica *r = xcalloc(1, sizeof(*r));

	r->be = m->be;
	r->n_classes = m->sig.n_classes;
	r->in_size = m->sig.in_size;
	if (dlk_bundle_net(&m->bundle, m->be, &r->net, err) || dlk_net_reserve(&r->net, max_rows, err))
		goto fail;
	if (m->be != dlk_backend_cpu()) {
		r->dev_in = m->be->alloc((size_t)max_rows * r->in_size * sizeof(float));
		if (!r->dev_in) {
			dlk_errf(err, DLK_EXIT_FAIL, "model '%s': out of %s memory for a batch of %d", m->name, m->be->name, max_rows);
			goto fail;
		}
	}
	return r;
fail:
	dlk_err_prefix(err, "model '%s'", m->name);
	dlk_net_release(&r->net);
	free(r);
	return NULL;
}

static int replica_run(void *rep, const float *in, int rows, float *out, struct dlk_err *err)
{
	struct replica *r = rep;
	const float *x = in;
	char msg[256];

	if (r->dev_in) {
		r->be->to_device(r->dev_in, in, (size_t)rows * r->in_size * sizeof(float));
		x = r->dev_in;
	}
	const float *logits = dlk_net_forward(&r->net, x, rows, 0);
	r->be->to_host(out, logits, (size_t)rows * (size_t)r->n_classes * sizeof(float));
	if (r->be->check(msg, sizeof(msg)))
		return dlk_errf(err, DLK_EXIT_FAIL, "%s backend: %s", r->be->name, msg);
	return 0;
}

static void replica_free(void *rep)
{
	struct replica *r = rep;
	if (!r)
		return;
	if (r->dev_in)
		r->be->free(r->dev_in);
	dlk_net_release(&r->net);
	free(r);
}

struct dlk_engine dlk_serve_model_engine(struct dlk_serve_model *m)
{
	struct dlk_engine e = { m->sig.in_size, (size_t)m->sig.n_classes, m, replica_new, replica_run, replica_free,
		                /* host memory and BLAS calls work from any thread; a device may not */
		                m->be == dlk_backend_cpu() };
	return e;
}

int dlk_serve_model_warmup(struct dlk_serve_model *m, struct dlk_err *err)
{
	float *x = xmalloc(m->sig.in_size * sizeof(float)), *y = xmalloc((size_t)m->sig.n_classes * sizeof(float));
	int rc;

	for (size_t i = 0; i < m->sig.in_size; i++)
		x[i] = m->sig.lut[0];
	rc = dlk_batcher_run(m->batcher, x, 1, y, err);
	for (int i = 0; !rc && i < m->sig.n_classes; i++)
		if (!isfinite(y[i]))
			rc = dlk_errf(err, DLK_EXIT_CONFIG, "logit %d of a zero input is %g", i, (double)y[i]);
	if (rc)
		dlk_err_prefix(err, "model '%s' failed its warm-up inference", m->name);
	free(x);
	free(y);
	return rc;
}

void dlk_serve_model_release(struct dlk_serve_model *m)
{
	if (m->is_lm)
		dlk_lm_release(&m->lm);
	m->is_lm = 0;
	free(m->not_lm);
	m->not_lm = NULL;
	dlk_bundle_release(&m->bundle);
	free(m->name);
	free(m->path);
	m->name = m->path = NULL;
}
