#include "lib/train/state.h"

#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/project/layers.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#define STATE_FORMAT "dlk-train-state"
#define STATE_VERSION 1

void dlk_net_arch_digest(const struct dlk_net *net, char hex[65])
{
	struct dlk_sha256 h = DLK_SHA256_INIT;
	char line[256];
	int n;

	dlk_sha256_begin(&h);
	n = snprintf(line, sizeof(line), "input %dx%dx%d classes %d params %zu\n", net->input[0], net->input[1],
	             net->input[2], net->n_classes, net->n_params);
	dlk_sha256_update(&h, line, (size_t)n);
	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *l = &net->layers[i];
		n = snprintf(line, sizeof(line), "%s act %d %dx%dx%d -> %dx%dx%d w %zu@%zu b %zu@%zu\n",
		             dlk_layer_name(l->spec.kind), l->act, l->in[0], l->in[1], l->in[2], l->out[0], l->out[1],
		             l->out[2], l->n_w, l->w_off, l->n_b, l->b_off);
		dlk_sha256_update(&h, line, (size_t)n);
	}
	dlk_sha256_end(&h, hex);
}

/* n floats of the backend's memory as host memory for a blob: the array itself on the CPU
 * backend (the write is done before the step goes on), else a copy in *copy (the caller frees) */
static const float *host_floats(const struct dlk_backend *be, const float *dev, size_t bytes, float **copy)
{
	if (be == dlk_backend_cpu())
		return dev;
	*copy = xmalloc(bytes ? bytes : 1);
	be->to_host(*copy, dev, bytes);
	return *copy;
}

static void add_u64(cJSON *o, const char *key, unsigned long long v)
{
	char s[32];
	snprintf(s, sizeof(s), "%llu", v);
	cJSON_AddStringToObject(o, key, s);
}

/* the checkpoint's fill of blobs m_at and v_at: the moments' */
struct moments_fill {
	const struct dlk_state_moments *mv;
	size_t m_at, v_at;
};

static int fill_moment(void *ctx, size_t i, void *buf, size_t len, struct dlk_err *err)
{
	const struct moments_fill *f = ctx;

	if (i != f->m_at && i != f->v_at)
		return dlk_errf(err, DLK_EXIT_FAIL, "checkpoint: blob %zu has no data", i);
	return f->mv->fill(f->mv->ctx, i == f->v_at, buf, len, err);
}

int dlk_state_save(const char *dir, int keep, const struct dlk_train_state *st, const struct dlk_state_meta *meta,
                   const struct ckpt_write_opts *wo, const struct dlk_state_moments *mv, struct dlk_err *err)
{
	const struct dlk_net *net = st->net;
	const struct dlk_optimizer *opt = st->opt;
	const struct dlk_backend *be = net->be;
	struct ckpt_write_opts o = wo ? *wo : (struct ckpt_write_opts)CKPT_WRITE_OPTS_INIT;
	struct ckpt_blob blobs[5];
	size_t nb = 0, bytes = sizeof(float) * net->n_params;
	float *p = NULL, *m = NULL, *v = NULL;
	struct moments_fill mf = { mv, (size_t)-1, (size_t)-1 };
	cJSON *j = cJSON_CreateObject();
	char *json, *hist = NULL;
	int rc = -1;

	if (dlk_mkdir_p(dir, err)) {
		cJSON_Delete(j);
		free(p);
		return -1;
	}
	cJSON_AddStringToObject(j, "format", STATE_FORMAT);
	cJSON_AddNumberToObject(j, "version", STATE_VERSION);
	cJSON_AddStringToObject(j, "arch", meta->arch);
	add_u64(j, "seed", meta->seed);
	cJSON_AddNumberToObject(j, "world", meta->world);
	cJSON_AddNumberToObject(j, "batchSize", meta->batch_size);
	cJSON_AddNumberToObject(j, "epoch", st->epoch);
	add_u64(j, "stepInEpoch", (unsigned long long)st->step_in_epoch);
	add_u64(j, "globalStep", (unsigned long long)st->global_step);
	add_u64(j, "optimizerT", (unsigned long long)opt->t);
	add_u64(j, "dropoutCounter", net->dropout_counter);
	add_u64(j, "dropoutSeed", net->dropout_seed);
	add_u64(j, "params", net->n_params);
	if (st->sched_spe > 0 && st->sched_total > 0) {
		add_u64(j, "scheduleStepsPerEpoch", (unsigned long long)st->sched_spe);
		add_u64(j, "scheduleTotalSteps", (unsigned long long)st->sched_total);
	}
	json = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);

	/* the parameters and the optimizer's moments are written from where they are on the CPU
	 * backend: a copy of each would double what the checkpoint's moment holds */
	blobs[nb++] = (struct ckpt_blob){ "state.json", json, strlen(json) };
	blobs[nb++] = (struct ckpt_blob){ "params.f32", host_floats(be, net->params, bytes, &p), bytes };
	if (opt->m) {
		mf.m_at = nb;
		blobs[nb++] = (struct ckpt_blob){ "optim_m.f32", mv ? NULL : host_floats(be, opt->m, bytes, &m), bytes };
	}
	if (opt->v) {
		mf.v_at = nb;
		blobs[nb++] = (struct ckpt_blob){ "optim_v.f32", mv ? NULL : host_floats(be, opt->v, bytes, &v), bytes };
	}
	if (mv) {
		o.fill = fill_moment;
		o.fill_ctx = &mf;
	}
	if (st->history) {
		cJSON *hj = dlk_history_json(st->history, 1);
		hist = cJSON_PrintUnformatted(hj);
		cJSON_Delete(hj);
		blobs[nb++] = (struct ckpt_blob){ "history.json", hist, strlen(hist) };
	}
	o.keep = keep > 0 ? keep : 1;
	rc = ckpt_write_atomic(dir, (unsigned long long)st->global_step, blobs, nb, &o, err);
	free(hist);
	free(json);
	free(p);
	free(m);
	free(v);
	return rc;
}

/* A non-negative 64-bit number stored as a decimal string. */
static int get_u64(const cJSON *j, const char *key, unsigned long long max, unsigned long long *out,
                   const char *path, struct dlk_err *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
	char *end;

	if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) > 20 || it->valuestring[0] == '-')
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"%s\" is missing or not a decimal string", path, key);
	errno = 0;
	*out = strtoull(it->valuestring, &end, 10);
	if (errno || *end || *out > max)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"%s\" is out of range: %s", path, key,
		                it->valuestring);
	return 0;
}

static int get_int(const cJSON *j, const char *key, int max, int *out, const char *path, struct dlk_err *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);

	if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > max || it->valuedouble != (int)it->valuedouble)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"%s\" is missing or not a whole number in [0, %d]",
		                path, key, max);
	*out = (int)it->valuedouble;
	return 0;
}

/* floats [off, off + cnt) of blob `name`, which must hold n, into dst */
static int copy_blob(const struct ckpt *c, const char *name, float *dst, const struct dlk_backend *be, size_t n,
                     size_t off, size_t cnt, struct dlk_err *err)
{
	size_t len;
	const float *b = ckpt_get(c, name, &len);

	if (!b)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s' has no %s", c->path, name);
	if (len != sizeof(float) * n)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s': %s has %zu bytes, not the %zu of %zu floats", c->path,
		                name, len, sizeof(float) * n, n);
	be->to_device(dst, b + off, sizeof(float) * cnt);
	return 0;
}

/* history.json is optional: a checkpoint written before dlk kept histories has none, and its
 * run goes on with the history empty up to the resume */
static int restore_history(const struct ckpt *c, struct dlk_history *h, struct dlk_err *err)
{
	size_t len;
	const char *s = ckpt_get(c, "history.json", &len);
	char *who;
	cJSON *j;
	int rc;

	if (!s) {
		dlk_history_release(h);
		return 0;
	}
	who = xasprintf("'%s/history.json'", c->path);
	j = cJSON_ParseWithLength(s, len);
	if (!j)
		rc = dlk_errf(err, DLK_EXIT_CONFIG, "%s: not JSON", who);
	else
		rc = dlk_history_from_json(j, who, h, err);
	cJSON_Delete(j);
	free(who);
	return rc;
}

int dlk_state_restore(const struct ckpt *c, struct dlk_train_state *st, const struct dlk_state_meta *meta,
                      struct dlk_err *err)
{
	struct dlk_net *net = st->net;
	struct dlk_optimizer *opt = st->opt;
	size_t len;
	const char *s = ckpt_get(c, "state.json", &len);
	cJSON *j = NULL;
	const cJSON *it;
	unsigned long long seed, sie, gs, t, dc, ds, np, sspe = 0, stot = 0;
	int version, world, batch, epoch, rc = -1;

	if (!s)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s' has no state.json: not a training checkpoint", c->path);
	j = cJSON_ParseWithLength(s, len);
	if (!cJSON_IsObject(j)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': not a JSON object", c->path);
		goto out;
	}
	it = cJSON_GetObjectItemCaseSensitive(j, "format");
	if (!cJSON_IsString(it) || strcmp(it->valuestring, STATE_FORMAT)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"format\" is not \"%s\"", c->path, STATE_FORMAT);
		goto out;
	}
	if (get_int(j, "version", 1000, &version, c->path, err))
		goto out;
	if (version != STATE_VERSION) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': version %d, this dlk reads version %d", c->path, version,
		         STATE_VERSION);
		goto out;
	}
	it = cJSON_GetObjectItemCaseSensitive(j, "arch");
	if (!cJSON_IsString(it) || !dlk_sha256_is_hex(it->valuestring)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"arch\" is not a sha256", c->path);
		goto out;
	}
	if (strcmp(it->valuestring, meta->arch)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s' is of another model (its layers differ from model.layers)",
		         c->path);
		dlk_err_hint(err, "point training.checkpoint_dir elsewhere, or remove the old checkpoints");
		goto out;
	}
	if (get_u64(j, "seed", UINT64_MAX, &seed, c->path, err) || get_int(j, "world", 1 << 20, &world, c->path, err) ||
	    get_int(j, "batchSize", 1 << 30, &batch, c->path, err) || get_int(j, "epoch", 1 << 30, &epoch, c->path, err) ||
	    get_u64(j, "stepInEpoch", (1ULL << 53), &sie, c->path, err) ||
	    get_u64(j, "globalStep", (1ULL << 53), &gs, c->path, err) ||
	    get_u64(j, "optimizerT", (1ULL << 53), &t, c->path, err) ||
	    get_u64(j, "dropoutCounter", UINT64_MAX, &dc, c->path, err) ||
	    get_u64(j, "dropoutSeed", UINT64_MAX, &ds, c->path, err) || get_u64(j, "params", UINT64_MAX, &np, c->path, err))
		goto out;
	/* the same run at another world size goes on with the same global batch (the caller chose
	 * meta->batch_size with dlk_state_elastic_batch) */
	if (seed != meta->seed || (long long)world * batch != (long long)meta->world * meta->batch_size) {
		dlk_errf(err, DLK_EXIT_CONFIG,
		         "checkpoint '%s' belongs to another run: seed %llu, global batch %lld (%d worker%s x %d) (this "
		         "run: seed %llu, global batch %lld (%d worker%s x %d))",
		         c->path, seed, (long long)world * batch, world, world == 1 ? "" : "s", batch, meta->seed,
		         (long long)meta->world * meta->batch_size, meta->world, meta->world == 1 ? "" : "s",
		         meta->batch_size);
		dlk_err_hint(err, "resume with the same settings, or point training.checkpoint_dir elsewhere");
		goto out;
	}
	/* the learning-rate schedule the run started with (absent before dlk kept it) */
	if (cJSON_GetObjectItemCaseSensitive(j, "scheduleStepsPerEpoch") ||
	    cJSON_GetObjectItemCaseSensitive(j, "scheduleTotalSteps")) {
		if (get_u64(j, "scheduleStepsPerEpoch", (1ULL << 53), &sspe, c->path, err) ||
		    get_u64(j, "scheduleTotalSteps", (1ULL << 53), &stot, c->path, err))
			goto out;
		if (!sspe || !stot) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': the schedule's steps must be positive", c->path);
			goto out;
		}
	}
	if (np != net->n_params) {
		dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s' has %llu parameters, the model %zu", c->path, np,
		         net->n_params);
		goto out;
	}
	if (ds != net->dropout_seed) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"dropoutSeed\" %llu does not follow from \"seed\" %llu",
		         c->path, ds, seed);
		goto out;
	}
	if (gs != c->step) {
		dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s': globalStep %llu differs from the step of its directory",
		         c->path, gs);
		goto out;
	}
	if (copy_blob(c, "params.f32", net->params, net->be, net->n_params, 0, net->n_params, err))
		goto out;
	/* a sharded optimizer (ZeRO-1) takes its range of the whole moments */
	if (opt->m && copy_blob(c, "optim_m.f32", opt->m, net->be, opt->n, opt->state_off, opt->state_n, err))
		goto out;
	if (opt->v && copy_blob(c, "optim_v.f32", opt->v, net->be, opt->n, opt->state_off, opt->state_n, err))
		goto out;
	if ((!opt->m && ckpt_get(c, "optim_m.f32", NULL)) || (!opt->v && ckpt_get(c, "optim_v.f32", NULL))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s' was written with another optimizer", c->path);
		goto out;
	}
	if (st->history && restore_history(c, st->history, err))
		goto out;
	opt->t = (long)t;
	net->dropout_counter = dc;
	st->epoch = epoch;
	st->step_in_epoch = (long)sie;
	st->global_step = (long)gs;
	if (sspe) {
		st->sched_spe = (long)sspe;
		st->sched_total = (long)stot;
	}
	rc = 0;
out:
	cJSON_Delete(j);
	return rc;
}

int dlk_state_peek(const struct ckpt *c, int *world, int *batch_size, struct dlk_err *err)
{
	size_t len;
	const char *s = ckpt_get(c, "state.json", &len);
	cJSON *j;
	int rc;

	if (!s)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint '%s' has no state.json: not a training checkpoint", c->path);
	j = cJSON_ParseWithLength(s, len);
	if (!cJSON_IsObject(j))
		rc = dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': not a JSON object", c->path);
	else if (get_int(j, "world", 1 << 20, world, c->path, err) ||
	         get_int(j, "batchSize", 1 << 30, batch_size, c->path, err))
		rc = -1;
	else if (*world < 1 || *batch_size < 1)
		rc = dlk_errf(err, DLK_EXIT_CONFIG, "'%s/state.json': \"world\" and \"batchSize\" must be positive", c->path);
	else
		rc = 0;
	cJSON_Delete(j);
	return rc;
}

int dlk_state_elastic_batch(int ckpt_world, int ckpt_batch, int world, int *batch_size, struct dlk_err *err)
{
	long long global = (long long)ckpt_world * ckpt_batch;

	if (world < 1 || global % world) {
		dlk_errf(err, DLK_EXIT_CONFIG,
		         "cannot go on at %d worker%s: the run's global batch of %lld (%d worker%s x %d) does not split "
		         "into %d equal batches",
		         world, world == 1 ? "" : "s", global, ckpt_world, ckpt_world == 1 ? "" : "s", ckpt_batch, world);
		return dlk_err_hint(err, "use a worker count that divides %lld (it was %d), or start a new run with --fresh",
		                    global, ckpt_world);
	}
	if (global / world > (1 << 30))
		return dlk_errf(err, DLK_EXIT_CONFIG, "a batch of %lld per worker is too large", global / world);
	*batch_size = (int)(global / world);
	return 0;
}
