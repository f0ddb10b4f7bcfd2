/* The run a training is: which one (new, or an interrupted one continued), where its
 * checkpoints are, and its record in the run history from start to end. */
#include "lib/trainer/run.h"
#include "lib/report/report.h"
#include "lib/jobs/podclient.h"
#include "lib/trainer/trainer.h"
#include "lib/jobs/podenv.h"
#include "lib/train/checkpoint.h"
#include "lib/train/state.h"
#include "lib/data/fetch.h"
#include "lib/kube/api.h"
#include "lib/runs/usage.h"
#include "lib/util/hash.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

static double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static void short_id(const char *id, char out[16])
{
	snprintf(out, 16, "%.8s", id);
}

/* A run that stopped before its end and may go on: stopped by a signal, a worker lost, or a
 * process that died without saying (SIGKILL, a crash): its record still says running. Asked
 * under the project's run lock, so no process of that run is left: a pid would not tell (a
 * zombie keeps its pid until it is reaped, and another process may get it again). */
static int resumable(const cJSON *rec)
{
	const cJSON *f = get(dlk_run_info(rec), "failure");
	const cJSON *cls = get(f, "class");

	switch (dlk_run_outcome(rec)) {
	case DLK_RUN_INTERRUPTED:
	case DLK_RUN_RUNNING:
		return 1;
	case DLK_RUN_FAILED:
		return cJSON_IsString(cls) && (!strcmp(cls->valuestring, "restartable") || !strcmp(cls->valuestring, "signal"));
	default:
		return 0;
	}
}

/* A sweep's trial (lib/sweep): the driver hands the run its sweep id and parameters in
 * $DLK_RUN_SWEEP, which the record keeps as run.sweep; the driver completes it when the trial
 * ends. Text that is not a JSON object is left out (the driver is the only writer). */
static void set_sweep(cJSON *rec)
{
	const char *env = getenv(DLK_ENV_RUN_SWEEP);
	cJSON *s;

	if (!env || !*env || strlen(env) > 65536)
		return;
	s = cJSON_Parse(env);
	if (cJSON_IsObject(s))
		dlk_run_set_item(rec, "sweep", s);
	else
		cJSON_Delete(s);
}

/* The project's run lock (its history in dir) into *l; -1 with err naming the run that holds it. */
static int lock_project(struct dlk_run_lock *l, const char *dir, const char *name, struct dlk_err *err)
{
	struct dlk_run_holder h;
	char who[512];
	int got = dlk_run_lock_take(l, dir, &h, err);

	if (got < 0) {
		dlk_err_prefix(err, "cannot tell whether '%s' is being trained", name);
		return -1;
	}
	if (got == 0)
		return 0;
	dlk_run_holder_describe(&h, who, sizeof(who));
	dlk_errf(err, DLK_EXIT_FAIL, "'%s' is being trained by %s: two runs never share one project", name, who);
	if (h.pid)
		dlk_err_hint(err, "wait for that run to end, or stop it (kill -INT %ld%s%s) and run again to continue it", h.pid,
		             h.host[0] ? " on " : "", h.host);
	else
		dlk_err_hint(err, "wait for that run to end, or stop it and run again to continue it");
	return -1;
}

/* the worker count a run ran at last (0: not recorded) */
static int last_world(const cJSON *rec)
{
	const cJSON *w = get(dlk_run_info(rec), "worlds");
	const cJSON *l = cJSON_GetArrayItem(w, cJSON_GetArraySize(w) - 1);
	return cJSON_IsNumber(l) ? l->valueint : 0;
}

static void fill_common(cJSON *rec, const char *spec_digest)
{
	const char *image = getenv(DLK_ENV_IMAGE);

	dlk_run_set_str(rec, "spec_sha256", spec_digest);
	dlk_run_set_str(rec, "dlk_version", DLK_VERSION);
	/* the image the Job's pods run (its template passes it); a run here runs in none, and says
	 * so by naming none, as its bundle does: not the project's image, which it did not use */
	dlk_run_set_str(rec, "image", image && *image ? image : NULL);
}

/* Appends {"split", "url", "sha256"} of src, fetched and hashed as training would. */
static int hash_source(const struct dlk_source *src, const char *split, const struct dlk_data *spec,
                       const struct dlk_data_opts *o, cJSON *out, struct dlk_err *err)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	cJSON *d;

	if (!src->url)
		return 0;
	if (dlk_fetch(src, spec, o, &f, err))
		return -1;
	d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "split", split);
	cJSON_AddStringToObject(d, "url", src->url);
	cJSON_AddStringToObject(d, "sha256", f.sha256);
	cJSON_AddItemToArray(out, d);
	dlk_fetched_release(&f);
	return 0;
}

int dlk_train_skip_unchanged(const struct dlk_trainer_sink *sink, const char *spec_file, const struct dlk_project *spec,
                             struct dlk_err *err)
{
	struct dlk_err werr = DLK_ERR_INIT;
	struct dlk_data_opts o = { 0 };
	const struct dlk_split *splits[2] = { &spec->data.train, &spec->data.test };
	const char *names[2] = { "train", "test" };
	char *dir = dlk_runs_local_dir(spec_file, spec->name), *base = NULL, fp[65], last_fp[65], id[37];
	struct dlk_run_store *store = dlk_runs_open_dir(dir, spec->name);
	cJSON *data = cJSON_CreateArray(), *last = NULL, *rec = NULL, *wrap = NULL;
	struct dlk_run_lock lock = DLK_RUN_LOCK_INIT;
	int rc = 0;

	/* a skip recorded while a run goes on would be the newest record: the run, should it then
	 * crash, would not be the one the next invocation continues */
	if (lock_project(&lock, dir, spec->name, err)) {
		rc = -1;
		goto out;
	}
	base = dlk_dir_of(spec_file);
	o.base_dir = base;
	for (int i = 0; i < 2; i++) {
		const struct dlk_split *sp = splits[i];
		int bad = hash_source(&sp->images, names[i], &spec->data, &o, data, err) ||
		          hash_source(&sp->labels, names[i], &spec->data, &o, data, err) ||
		          hash_source(&sp->source, names[i], &spec->data, &o, data, err) ||
		          hash_source(&sp->targets, names[i], &spec->data, &o, data, err);
		/* tar shards: every file of the list, as rank 0's record names them */
		for (int k = 0; !bad && k < sp->n_shards; k++)
			bad = hash_source(&sp->shards[k], names[i], &spec->data, &o, data, err);
		if (bad) {
			dlk_err_prefix(err, "--if-data-changed: cannot hash the data");
			rc = -1;
			goto out;
		}
	}
	if (dlk_runs_newest(store, DLK_RUN_SUCCEEDED, &last, err)) {
		rc = -1;
		goto out;
	}
	/* the fingerprint reads run.data: wrap the fresh digests as a record's */
	wrap = cJSON_CreateObject();
	cJSON_AddItemToObject(cJSON_AddObjectToObject(wrap, "run"), "data", cJSON_Duplicate(data, 1));
	dlk_run_data_fingerprint(wrap, fp);
	if (!last) {
		dlk_trainer_info(sink, "no run of '%s' has succeeded yet: training", spec->name);
		goto out;
	}
	dlk_run_data_fingerprint(last, last_fp);
	if (strcmp(fp, last_fp)) {
		dlk_trainer_info(sink, "the data differs from what run %.8s trained on: training", dlk_run_id(last));
		goto out;
	}
	/* unchanged: a run that says so, in the history */
	if (dlk_run_new_id(id, err)) {
		rc = -1;
		goto out;
	}
	rec = dlk_run_record_new(spec->name, id);
	dlk_run_set_str(rec, "where", "local");
	dlk_run_set_str(rec, "trigger", "data-changed");
	dlk_run_set_item(rec, "data", data);
	data = NULL;
	fill_common(rec, dlk_run_str(last, "spec_sha256") ? dlk_run_str(last, "spec_sha256") : "");
	{
		char reason[160], now[32];
		snprintf(reason, sizeof(reason), "the data is unchanged since run %.36s", dlk_run_id(last));
		dlk_run_set_str(rec, "reason", reason);
		dlk_run_set_outcome(rec, DLK_RUN_SKIPPED);
		dlk_run_time_now(now);
		dlk_run_set_str(rec, "finished_at", now);
	}
	if (dlk_runs_put(store, rec, &werr))
		dlk_trainer_warn(sink, "the skipped run is not in the history: %s", werr.msg);
	dlk_trainer_info(sink, "the data is what run %.8s trained on (%.12s): nothing to train; run %.8s records the skip",
	         dlk_run_id(last), fp, id);
	rc = DLK_EXIT_UNCHANGED;
out:
	cJSON_Delete(wrap);
	cJSON_Delete(rec);
	cJSON_Delete(last);
	cJSON_Delete(data);
	dlk_runs_close(store);
	dlk_run_lock_release(&lock);
	free(base);
	free(dir);
	return rc;
}

int dlk_train_run_skip_if_unchanged(struct dlk_train_run *r, const cJSON *data)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *last = NULL, *wrap;
	char fp[65], reason[160], now[32];
	int skip = 0;

	if (!r->store || !r->rec)
		return 0;
	if (dlk_runs_newest(r->store, DLK_RUN_SUCCEEDED, &last, &err)) {
		dlk_trainer_warn(r->sink, "trigger data-changed: the run history cannot be read (training): %s",
		                 err.msg);
		return 0;
	}
	wrap = cJSON_CreateObject();
	cJSON_AddItemToObject(cJSON_AddObjectToObject(wrap, "run"), "data", cJSON_Duplicate(data, 1));
	dlk_run_data_fingerprint(wrap, fp);
	if (!last) {
		dlk_trainer_info(r->sink, "trigger data-changed: no run has succeeded yet: training");
	} else if (!dlk_run_same_data(wrap, last)) {
		dlk_trainer_info(r->sink, "trigger data-changed: the data differs from what run %.8s trained on: training",
		         dlk_run_id(last));
	} else {
		snprintf(reason, sizeof(reason), "the data is unchanged since run %.36s", dlk_run_id(last));
		dlk_run_set_item(r->rec, "data", cJSON_Duplicate(data, 1));
		dlk_run_set_str(r->rec, "reason", reason);
		dlk_run_set_outcome(r->rec, DLK_RUN_SKIPPED);
		dlk_run_time_now(now);
		dlk_run_set_str(r->rec, "finished_at", now);
		dlk_train_run_save(r);
		dlk_trainer_info(r->sink, "trigger data-changed: the data is what run %.8s trained on (%.12s): nothing to train",
		         dlk_run_id(last), fp);
		skip = 1;
	}
	cJSON_Delete(wrap);
	cJSON_Delete(last);
	return skip;
}

/* A run interrupted at another worker count goes on with the same global batch: refused here,
 * before anything starts, when its newest checkpoint's global batch does not split into
 * `world` equal batches (the worker that resumes checks the same again). */
static int check_resize(const char *spec_file, const struct dlk_project *spec, const cJSON *rec, int world,
                        struct dlk_err *err)
{
	char *base = dlk_trainer_ckpt_base(spec, spec_file, 0), *dir;
	struct ckpt c = CKPT_INIT;
	int got, cw, cb, b, rc = 0;

	if (!base)
		return 0;
	dir = xasprintf("%s/%s", base, dlk_run_id(rec));
	got = ckpt_load_latest(dir, 0, &c, err);
	if (got < 0) {
		/* the worker says it again, with the warnings */
		dlk_err_clear(err);
	} else if (got == 1 && (dlk_state_peek(&c, &cw, &cb, err) || dlk_state_elastic_batch(cw, cb, world, &b, err))) {
		dlk_err_prefix(err, "run %.8s (checkpoint at step %llu)", dlk_run_id(rec), c.step);
		rc = -1;
	}
	ckpt_release(&c);
	free(dir);
	free(base);
	return rc;
}

int dlk_train_run_open_local(struct dlk_train_run *r, const struct dlk_trainer_sink *sink,
                             const struct dlk_trainer_opts *opts, const struct dlk_project *spec,
                             const char *spec_digest, int world, struct dlk_err *err)
{
	char *dir = dlk_runs_local_dir(opts->spec_file, spec->name), host[256] = "", sid[16], now[32];
	cJSON *all = NULL, *rec = NULL;
	const cJSON *newest;
	int rc = -1;

	r->sink = sink;
	r->program = spec->program.present ? &spec->program : NULL;
	/* before the history is read: what it says of the newest run holds until this run ends */
	if (lock_project(&r->lock, dir, spec->name, err))
		goto out;
	r->store = dlk_runs_open_dir(dir, spec->name);
	if (dlk_runs_list(r->store, &all, NULL, NULL, err)) {
		dlk_err_prefix(err, "cannot read the run history of '%s'", spec->name);
		goto out;
	}
	newest = cJSON_GetArrayItem(all, 0);
	if (newest && resumable(newest)) {
		const char *digest = dlk_run_str(newest, "spec_sha256");
		short_id(dlk_run_id(newest), sid);
		if (opts->fresh)
			dlk_trainer_info(sink, "starting a new run (--fresh); run %s, interrupted, stays in the history", sid);
		else if (!digest || strcmp(digest, spec_digest))
			dlk_trainer_info(sink, "run %s was interrupted, but the project has changed since: starting a new run", sid);
		else if (last_world(newest) > 0 && last_world(newest) != world &&
		         check_resize(opts->spec_file, spec, newest, world, err))
			/* refused before the record changes: the run stays resumable at a size that fits */
			goto out;
		else
			rec = cJSON_Duplicate(newest, 1);
	}
	gethostname(host, sizeof(host) - 1);
	if (rec) {
		r->resumed = 1;
		dlk_run_count_restart(rec);
		dlk_run_set_outcome(rec, DLK_RUN_RUNNING);
		dlk_run_set_item(rec, "failure", NULL);
		dlk_run_set_item(rec, "reason", NULL);
		dlk_run_set_item(rec, "finished_at", NULL);
	} else {
		char id[37];
		if (dlk_run_new_id(id, err))
			goto out;
		rec = dlk_run_record_new(spec->name, id);
		dlk_run_set_str(rec, "where", "local");
		/* --if-data-changed: it trains because the data changed */
		dlk_run_set_str(rec, "trigger", opts->if_data_changed ? "data-changed" : "manual");
		dlk_run_set_num(rec, "restarts", 0);
		set_sweep(rec);
	}
	dlk_run_set_str(rec, "host", host);
	dlk_run_set_num(rec, "pid", (double)getpid());
	dlk_run_add_world(rec, world);
	r->session_start = mono_now();
	r->gpus = spec->resources.gpus > 0 ? spec->resources.gpus : 0;
	r->cpus = 0; /* nothing reserved here: the CPU time used is what counts */
	fill_common(rec, spec_digest);
	if (opts->code_sha256)
		dlk_run_set_str(rec, "code_sha256", opts->code_sha256);
	snprintf(r->id, sizeof(r->id), "%s", dlk_run_id(rec));
	r->rec = rec;
	if (dlk_runs_put(r->store, rec, err)) {
		dlk_err_prefix(err, "cannot record run %.8s", r->id);
		goto out;
	}
	/* since now: a resumed run holds the project from this start, not its first */
	dlk_run_time_now(now);
	if (dlk_run_lock_say(&r->lock, r->id, now, err))
		goto out;
	rc = 0;
out:
	cJSON_Delete(all);
	free(dir);
	return rc;
}

void dlk_train_run_open_worker(struct dlk_train_run *r, const struct dlk_trainer_sink *sink)
{
	const char *id = getenv(DLK_ENV_RUN_ID);

	r->sink = sink;
	snprintf(r->id, sizeof(r->id), "%s", id && *id ? id : "");
	/* an id used as a directory name: nothing that climbs out of it */
	if (strchr(r->id, '/') || !strcmp(r->id, ".") || !strcmp(r->id, ".."))
		r->id[0] = '\0';
}

/* A client of the in-cluster configuration for the run history. Made anew for every write: the
 * writes are minutes apart, and a connection kept that long may have been dropped on the way
 * without a word (a request on it then hangs until its timeout). */
static struct kube_client *cluster_client(struct dlk_err *err)
{
	return dlk_pod_client(5000, 15000, 3, err);
}

void dlk_train_run_open_cluster(struct dlk_train_run *r, const struct dlk_trainer_sink *sink,
                                const struct dlk_project *spec, const char *spec_digest, int world)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *job = getenv(DLK_ENV_JOB_NAME), *trig = getenv(DLK_ENV_TRIGGER);
	cJSON *rec = NULL;

	dlk_train_run_open_worker(r, sink);
	r->program = spec->program.present ? &spec->program : NULL;
	if (!r->id[0] || !getenv(DLK_ENV_SERVICE_HOST))
		return;
	r->kc = cluster_client(&err);
	if (!r->kc) {
		dlk_trainer_warn(sink, "the run will not be recorded in the cluster's run history: %s", err.msg);
		return;
	}
	r->store = dlk_runs_open_configmap(r->kc, NULL, spec->name);
	if (dlk_runs_get(r->store, r->id, &rec, &err) == 0) {
		/* a restarted pod, a re-formed gang: the same run */
		r->resumed = 1;
		dlk_run_count_restart(rec);
		dlk_run_set_outcome(rec, DLK_RUN_RUNNING);
		dlk_run_set_item(rec, "failure", NULL);
		dlk_run_set_item(rec, "finished_at", NULL);
	} else if (err.code == DLK_EXIT_NOTFOUND) {
		cJSON *j = cJSON_CreateObject();
		rec = dlk_run_record_new(spec->name, r->id);
		dlk_run_set_str(rec, "where", "cluster");
		dlk_run_set_str(rec, "trigger", trig && *trig ? trig : "manual");
		dlk_run_set_num(rec, "restarts", 0);
		cJSON_AddStringToObject(j, "name", job && *job ? job : spec->name);
		cJSON_AddStringToObject(j, "namespace", kube_client_namespace(r->kc));
		cJSON_AddStringToObject(j, "uid", r->id);
		dlk_run_set_item(rec, "job", j);
		set_sweep(rec);
	} else {
		dlk_trainer_warn(sink, "the run will not be recorded in the cluster's run history: %s", err.msg);
		dlk_runs_close(r->store);
		r->store = NULL;
		return;
	}
	dlk_run_add_world(rec, world);
	fill_common(rec, spec_digest);
	r->session_start = mono_now();
	r->gpus = spec->resources.gpus > 0 ? spec->resources.gpus : 0;
	r->cpus = dlk_cpu_quantity(spec->resources.cpu);
	r->rec = rec;
	dlk_train_run_save(r);
}

char *dlk_train_run_ckpt_dir(const struct dlk_train_run *r, const char *base)
{
	return r->id[0] ? xasprintf("%s/%s", base, r->id) : xstrdup(base);
}

void dlk_train_run_save(struct dlk_train_run *r)
{
	struct dlk_err err = DLK_ERR_INIT;

	if (!r->store || !r->rec)
		return;
	if (r->kc) {
		/* a fresh connection for each write (see cluster_client) */
		struct kube_client *kc = cluster_client(&err);
		if (kc) {
			dlk_runs_close(r->store);
			kube_client_free(r->kc);
			r->kc = kc;
			r->store = dlk_runs_open_configmap(kc, NULL, dlk_run_project(r->rec));
		}
	}
	if (dlk_runs_put(r->store, r->rec, &err) && !r->warned++)
		dlk_trainer_warn(r->sink, "run %.8s: the run history is not up to date (training goes on): %s%s%s", r->id, err.msg,
		                 err.hint[0] ? "; " : "", err.hint);
}

void dlk_train_run_set_cpu(struct dlk_train_run *r, const double *cpu_s, int n)
{
	free(r->cpu_s);
	r->cpu_s = NULL;
	r->n_cpu = 0;
	if (n <= 0)
		return;
	r->cpu_s = xcalloc((size_t)n, sizeof(double));
	memcpy(r->cpu_s, cpu_s, (size_t)n * sizeof(double));
	r->n_cpu = n;
}

/* The session's share of run.usage: its wall time at the last world, and the CPU time the
 * gang measured, or else this process's and its reaped children's. */
static void add_usage(struct dlk_train_run *r)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(dlk_run_info(r->rec), "worlds");
	const cJSON *last = cJSON_GetArrayItem(w, cJSON_GetArraySize(w) - 1);
	int workers = cJSON_IsNumber(last) ? last->valueint : 1;
	double wall = r->session_start > 0 ? mono_now() - r->session_start : 0;

	if (r->n_cpu > 0) {
		dlk_run_add_usage(r->rec, wall, workers, r->gpus, r->cpus, r->cpu_s, r->n_cpu);
	} else {
		struct rusage self, kids;
		double cpu = 0;
		if (!getrusage(RUSAGE_SELF, &self) && !getrusage(RUSAGE_CHILDREN, &kids))
			cpu = (double)self.ru_utime.tv_sec + self.ru_utime.tv_usec / 1e6 + (double)self.ru_stime.tv_sec +
			      self.ru_stime.tv_usec / 1e6 + (double)kids.ru_utime.tv_sec + kids.ru_utime.tv_usec / 1e6 +
			      (double)kids.ru_stime.tv_sec + kids.ru_stime.tv_usec / 1e6;
		dlk_run_add_usage(r->rec, wall, workers, r->gpus, r->cpus, &cpu, 1);
	}
	/* counted once: a second finish (none is expected) adds nothing */
	r->session_start = mono_now();
	dlk_train_run_set_cpu(r, NULL, 0);
}

void dlk_train_run_finish(struct dlk_train_run *r, enum dlk_run_outcome o, int rank, int exit_code,
                          const char *message)
{
	char now[32];

	if (!r->rec)
		return;
	add_usage(r);
	dlk_run_set_outcome(r->rec, o);
	dlk_run_time_now(now);
	dlk_run_set_str(r->rec, "finished_at", now);
	if (o == DLK_RUN_FAILED || o == DLK_RUN_INTERRUPTED)
		/* a program's death by a signal is a signal's, as dlk's own */
		dlk_run_set_failure_class(r->rec, rank, exit_code,
		                          r->program && !(exit_code > 128 && exit_code < 128 + 65)
		                                  ? dlk_program_exit_class(r->program, exit_code)
		                                  : NULL,
		                          message);
	else
		dlk_run_set_item(r->rec, "failure", NULL);
	dlk_train_run_save(r);
}

void dlk_train_run_set_result(struct dlk_train_run *r, const cJSON *doc, const char *bundle)
{
	const cJSON *prov = get(doc, "provenance"), *v;
	char hex[65];

	if (!r->rec)
		return;
	dlk_run_set_document(r->rec, doc);
	if ((v = get(prov, "data")) && cJSON_IsArray(v))
		dlk_run_set_item(r->rec, "data", cJSON_Duplicate(v, 1));
	if ((v = get(prov, "spec_sha256")) && cJSON_IsString(v))
		dlk_run_set_str(r->rec, "spec_sha256", v->valuestring);
	if ((v = get(prov, "image")) && cJSON_IsString(v))
		dlk_run_set_str(r->rec, "image", v->valuestring);
	if ((v = get(prov, "git_commit")) && cJSON_IsString(v)) {
		dlk_run_set_str(r->rec, "git_commit", v->valuestring);
		v = get(prov, "git_dirty");
		dlk_run_set_item(r->rec, "git_dirty", cJSON_CreateBool(cJSON_IsTrue(v)));
	}
	if (bundle) {
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "path", bundle);
		if (!dlk_sha256_file(bundle, hex))
			cJSON_AddStringToObject(b, "sha256", hex);
		dlk_run_set_item(r->rec, "bundle", b);
	}
}

void dlk_train_run_succeeded(struct dlk_train_run *r, const char *bundle)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *doc;

	if (!r->rec)
		return;
	doc = report_run_from_bundle(bundle, &err);
	if (doc)
		dlk_train_run_set_result(r, doc, bundle);
	else
		dlk_trainer_warn(r->sink, "run %.8s: its record has no metrics: %s", r->id, err.msg);
	cJSON_Delete(doc);
	dlk_train_run_finish(r, DLK_RUN_SUCCEEDED, -1, 0, NULL);
}

void dlk_train_run_release(struct dlk_train_run *r)
{
	/* after the record's last write: a run that takes the lock reads it as this one left it */
	dlk_run_lock_release(&r->lock);
	dlk_runs_close(r->store);
	kube_client_free(r->kc);
	cJSON_Delete(r->rec);
	free(r->cpu_s);
	*r = (struct dlk_train_run)DLK_TRAIN_RUN_INIT;
}
