/* The driver of a sweep. Each trial is a run of the project with --set overrides, a project of
 * its own name (SWEEP-N) so that trials running at once each have their own run lock, history
 * and checkpoints, with run.sweep in their records. Here (--local) a trial is a `dlk train
 * --local` process whose metrics file (a JSON line per step and epoch) the driver follows, and
 * which it stops with SIGTERM; in a cluster it is the Job `dlk train` renders, whose published
 * epochs (dlk.dev/metrics) the driver reads, and which it stops by deleting the Job. Either way
 * ASHA decides at each rung, a stopped trial checkpoints and ends, and its record then says
 * "stopped". Everything the driver needs to resume is in the trials' records (and, in a
 * cluster, the trials' Jobs themselves). */
#include "lib/sweep/sweep.h"
#include "lib/jobs/jobdelete.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/submit.h"
#include "lib/jobs/podenv.h"
#include "lib/kube/api.h"
#include "lib/render/render.h"
#include "lib/project/project.h"
#include "lib/runs/lock.h"
#include "lib/runs/runs.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum trial_state { T_PENDING, T_RUNNING, T_DONE };

struct trial {
	int n;
	double *x;
	enum trial_state state;
	int resume;            /* continue its run rather than start one (--fresh) */
	pid_t pid;
	char *project;         /* SWEEP-N */
	char *metrics;         /* its metrics file */
	long off;              /* read so far */
	cJSON *curve;          /* [[at, value]...] */
	int next_rung;
	int stopping;
	long stopped_at;
	double started;
	int gone;              /* cluster: its Job was deleted (ASHA), waiting for its pods to go */
};

struct driver {
	const struct dlk_sweep_opts *o;
	const struct dlk_sweep_sink *sink;
	struct dlk_sweep_spec spec;
	struct dlk_project *project;
	struct dlk_asha asha;
	struct trial *t;
	int n_t;
	char *dir;             /* .dlk/sweeps/ID beside the project file */
	double gpu_seconds;
	int cluster;           /* trials are Jobs through o->kube */
};

static void note(const struct driver *d, int warn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(const struct driver *d, int warn, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	if (!d->sink || !d->sink->note || (d->o->quiet && !warn))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->sink->note(d->sink->ud, warn, msg);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The trial's record (newest of its project's history with this sweep and trial), a new tree. */
static cJSON *trial_record(const struct driver *d, const struct trial *t, struct dlk_run_store **store)
{
	struct dlk_run_store *s;
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *all = NULL, *rec, *found = NULL;

	if (d->cluster) {
		s = dlk_runs_open_configmap(d->o->kube, d->o->namespace_, t->project);
	} else {
		char *dir = dlk_runs_local_dir(d->o->spec_file, t->project);
		s = dlk_runs_open_dir(dir, t->project);
		free(dir);
	}
	if (!dlk_runs_list(s, &all, NULL, NULL, &err)) {
		cJSON_ArrayForEach(rec, all) {
			const cJSON *sw = cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "sweep");
			const cJSON *id = cJSON_GetObjectItemCaseSensitive(sw, "id");
			const cJSON *tr = cJSON_GetObjectItemCaseSensitive(sw, "trial");
			if (cJSON_IsString(id) && !strcmp(id->valuestring, d->spec.name) && cJSON_IsNumber(tr) &&
			    tr->valueint == t->n) {
				found = cJSON_Duplicate(rec, 1);
				break;
			}
		}
	}
	cJSON_Delete(all);
	if (store)
		*store = s;
	else
		dlk_runs_close(s);
	return found;
}

static double curve_last(const cJSON *curve)
{
	const cJSON *last = cJSON_GetArrayItem(curve, cJSON_GetArraySize(curve) - 1);
	return last ? cJSON_GetArrayItem(last, 1)->valuedouble : NAN;
}

/* where the curve's last point is; -1 when it has none */
static double curve_last_at(const cJSON *curve)
{
	const cJSON *last = cJSON_GetArrayItem(curve, cJSON_GetArraySize(curve) - 1);
	return last ? cJSON_GetArrayItem(last, 0)->valuedouble : -1;
}

/* run.usage.gpu_seconds of a record; -1 when it has none */
static double record_gpu_seconds(const cJSON *rec)
{
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "usage"),
	                                                  "gpu_seconds");
	return cJSON_IsNumber(g) ? g->valuedouble : -1;
}

/* the curve's value at `at` (its last point at or before it); NAN when none */
static double curve_at(const cJSON *curve, long at)
{
	const cJSON *p;
	double v = NAN;
	cJSON_ArrayForEach(p, curve) {
		if (cJSON_GetArrayItem(p, 0)->valuedouble <= at)
			v = cJSON_GetArrayItem(p, 1)->valuedouble;
	}
	return v;
}

/* A point on the curve, replacing one at the same place (a resumed trial repeats the epoch it
 * continues from). */
static void curve_add(cJSON *curve, double at, double v)
{
	const cJSON *p;
	int i = 0;
	cJSON_ArrayForEach(p, curve) {
		if (cJSON_GetArrayItem(p, 0)->valuedouble == at) {
			cJSON *pt = cJSON_CreateArray();
			cJSON_AddItemToArray(pt, cJSON_CreateNumber(at));
			cJSON_AddItemToArray(pt, cJSON_CreateNumber(v));
			cJSON_ReplaceItemInArray(curve, i, pt);
			return;
		}
		i++;
	}
	cJSON *pt = cJSON_CreateArray();
	cJSON_AddItemToArray(pt, cJSON_CreateNumber(at));
	cJSON_AddItemToArray(pt, cJSON_CreateNumber(v));
	cJSON_AddItemToArray(curve, pt);
}

/* A metrics line's point: an epoch's test metric (at: epochs), or a step's training loss (at:
 * steps, metric loss). 0 with *at and *v, -1 when the line has none. */
static int line_point(const struct driver *d, const cJSON *o, double *at, double *v)
{
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
	const char *want = d->spec.asha_steps ? "step" : "epoch";
	const cJSON *x, *y;

	if (!cJSON_IsString(ev) || strcmp(ev->valuestring, want))
		return -1;
	x = cJSON_GetObjectItemCaseSensitive(o, d->spec.asha_steps ? "step" : "epoch");
	if (d->spec.asha_steps)
		y = cJSON_GetObjectItemCaseSensitive(o, "loss");
	else if (!strcmp(d->spec.metric, "accuracy"))
		y = cJSON_GetObjectItemCaseSensitive(o, "test_accuracy");
	else if (!(y = cJSON_GetObjectItemCaseSensitive(o, "test_loss")))
		y = cJSON_GetObjectItemCaseSensitive(o, "loss");
	if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y) || !isfinite(y->valuedouble))
		return -1;
	/* an epoch's line counts it from 1: a rung at epoch 1 is the end of the first epoch */
	*at = x->valuedouble;
	*v = y->valuedouble;
	return 0;
}

/* Stops a trial ASHA stopped: SIGTERM to its process, or its Job deleted (its pods get SIGTERM;
 * the claim with its checkpoints and the run history stay). */
static void stop_trial(struct driver *d, struct trial *t)
{
	struct dlk_err err = DLK_ERR_INIT;

	if (!d->cluster) {
		if (t->pid > 0)
			kill(t->pid, SIGTERM);
		return;
	}
	if (kube_delete(d->o->kube, "Job", d->o->namespace_, t->project, &err) < 0 && err.code != DLK_EXIT_NOTFOUND)
		note(d, 1, "trial %d: cannot delete its Job '%s': %s", t->n, t->project, err.msg);
	t->gone = 1;
}

/* A point of the trial's curve; ASHA decides at each rung the curve passes. */
static void reach(struct driver *d, struct trial *t, double at, double v)
{
	curve_add(t->curve, at, v);
	while (d->spec.asha && !t->stopping && t->next_rung < d->asha.n_rungs && at >= d->asha.rungs[t->next_rung].at) {
		int k = t->next_rung++;
		if (dlk_asha_report(&d->asha, k, v)) {
			t->stopping = 1;
			t->stopped_at = d->asha.rungs[k].at;
			note(d, 0, "trial %d stops at %s %ld: %s %.4g is not in the top 1/%d there", t->n,
			     d->spec.asha_steps ? "step" : "epoch", t->stopped_at, d->spec.metric, v, d->asha.factor);
			stop_trial(d, t);
		}
	}
}

/* An epoch of a run document's history (history.epochs[i]) as a point of the curve at: epochs:
 * its number and its test metric (accuracy, else the test loss, else the training loss). -1
 * when it has none. */
static int epoch_point(const struct driver *d, const cJSON *e, double *at, double *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, "epoch"), *y;

	if (!strcmp(d->spec.metric, "accuracy"))
		y = cJSON_GetObjectItemCaseSensitive(e, "test_accuracy");
	else if (!(y = cJSON_GetObjectItemCaseSensitive(e, "test_loss")))
		y = cJSON_GetObjectItemCaseSensitive(e, "train_loss");
	if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y) || !isfinite(y->valuedouble))
		return -1;
	*at = x->valuedouble;
	*v = y->valuedouble;
	return 0;
}

/* The new epochs of a run document (the Job's dlk.dev/metrics, or a record), in order. */
static void follow_history(struct driver *d, struct trial *t, const cJSON *doc)
{
	const cJSON *e, *epochs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "history"), "epochs");
	double at, v;

	if (d->spec.asha_steps)
		return;
	cJSON_ArrayForEach(e, epochs) {
		if (!epoch_point(d, e, &at, &v) && at > curve_last_at(t->curve))
			reach(d, t, at, v);
	}
}

/* Reads what the trial appended to its metrics file since the last look; ASHA decides at each
 * rung the curve passes (decide), or the points are only added to the curve (a trial that ended
 * while no driver looked, read whole). */
static void read_metrics(struct driver *d, struct trial *t, int decide)
{
	char buf[8192];
	FILE *f = fopen(t->metrics, "r");

	if (!f)
		return;
	if (fseek(f, t->off, SEEK_SET)) {
		fclose(f);
		return;
	}
	while (fgets(buf, sizeof(buf), f)) {
		size_t len = strlen(buf);
		cJSON *o;
		double at, v;
		if (!len || buf[len - 1] != '\n')
			break; /* a line still being written: read it whole next time */
		t->off += (long)len;
		o = cJSON_Parse(buf);
		if (o && !line_point(d, o, &at, &v)) {
			if (decide)
				reach(d, t, at, v);
			else
				curve_add(t->curve, at, v);
		}
		cJSON_Delete(o);
	}
	fclose(f);
}

static void follow(struct driver *d, struct trial *t) { read_metrics(d, t, 1); }

/* run.sweep of the trial, as $DLK_RUN_SWEEP hands it to the run. Caller frees. */
static char *sweep_env(const struct driver *d, const struct trial *t)
{
	cJSON *sw = cJSON_CreateObject();
	char *env;

	cJSON_AddStringToObject(sw, "id", d->spec.name);
	cJSON_AddNumberToObject(sw, "trial", t->n);
	cJSON_AddItemToObject(sw, "params", dlk_sweep_params_json(&d->spec, t->x));
	cJSON_AddStringToObject(sw, "metric", d->spec.metric);
	cJSON_AddStringToObject(sw, "goal", d->spec.maximize ? "maximize" : "minimize");
	env = cJSON_PrintUnformatted(sw);
	cJSON_Delete(sw);
	return env;
}

static void note_start(const struct driver *d, const struct trial *t, const char *where)
{
	char line[1024] = "";
	for (int i = 0; i < d->spec.n_params; i++) {
		char *v = dlk_sweep_value_text(&d->spec, i, t->x[i]);
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s=%s", i ? " " : "", d->spec.params[i].key, v);
		free(v);
	}
	note(d, 0, "trial %d %s: %s (%s)", t->n, t->resume ? "continues" : "starts", line, where);
}

/* The Job's pod template gets $DLK_RUN_SWEEP in each container and the Job the annotation
 * dlk.dev/sweep (the same JSON), from which a driver run again finds the trial's values while
 * its run has not recorded them yet. */
static void mark_job(cJSON *job, const char *env)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(job, "metadata");
	cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	cJSON *tspec = cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "spec"), "template"), "spec");
	cJSON *c;

	if (!ann)
		ann = cJSON_AddObjectToObject(meta, "annotations");
	cJSON_DeleteItemFromObjectCaseSensitive(ann, DLK_SWEEP_ANNOTATION);
	cJSON_AddStringToObject(ann, DLK_SWEEP_ANNOTATION, env);
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(tspec, "containers")) {
		cJSON *envs = cJSON_GetObjectItemCaseSensitive(c, "env"), *e = cJSON_CreateObject();
		if (!cJSON_IsArray(envs))
			envs = cJSON_AddArrayToObject(c, "env");
		cJSON_AddStringToObject(e, "name", DLK_ENV_RUN_SWEEP);
		cJSON_AddStringToObject(e, "value", env);
		cJSON_AddItemToArray(envs, e);
	}
}

/* A trial as a Job: the project with the trial's values rendered as `dlk train` renders it, and
 * applied (what outlives a Job, its run history, created once). A Job of the same name left
 * from before (it ended without a record of this trial, or was cut off) goes first. */
static int launch_job(struct driver *d, struct trial *t, struct dlk_err *err)
{
	const char **sets = xcalloc((size_t)d->spec.n_params + 1, sizeof(char *));
	char *env = sweep_env(d, t);
	struct dlk_project *p = NULL;
	cJSON *objects = NULL, *o, *old = NULL;
	int rc = -1;

	sets[0] = xasprintf("name=%s", t->project);
	for (int i = 0; i < d->spec.n_params; i++) {
		char *v = dlk_sweep_value_text(&d->spec, i, t->x[i]);
		sets[i + 1] = xasprintf("%s=%s", d->spec.params[i].key, v);
		free(v);
	}
	p = project_load(d->o->spec_file, sets, d->spec.n_params + 1, err);
	if (!p)
		goto out;
	objects = render_train_project_git(p, d->o->spec_file, d->o->templates, d->o->namespace_, d->o->git_commit,
	                                   d->o->git_dirty, err);
	if (!objects)
		goto out;
	if (kube_get(d->o->kube, "Job", d->o->namespace_, t->project, &old, err) == 0) {
		if (kube_delete(d->o->kube, "Job", d->o->namespace_, t->project, err) < 0 && err->code != DLK_EXIT_NOTFOUND)
			goto out;
		if (dlk_wait_job_gone(d->o->kube, d->o->namespace_, t->project, 120, err) < 0)
			goto out;
	} else if (err->code != DLK_EXIT_NOTFOUND) {
		goto out;
	}
	dlk_err_clear(err);
	/* a trial runs now: a schedule is refused before anything is submitted */
	cJSON_ArrayForEach(o, objects) {
		const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
		if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "CronJob")) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' has a schedule: a sweep's trials run now, not on a schedule",
			         d->o->spec_file);
			dlk_err_hint(err, "leave 'schedule' out of the project the sweep runs");
			goto out;
		}
		if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "Job"))
			mark_job(o, env);
	}
	if (dlk_submit_objects(d->o->kube, objects, NULL, err) < 0) {
		dlk_err_prefix(err, "trial %d", t->n);
		goto out;
	}
	t->state = T_RUNNING;
	t->gone = 0;
	t->started = now_s();
	{
		char where[160];
		snprintf(where, sizeof(where), "Job '%s' in '%s'", t->project, d->o->namespace_);
		note_start(d, t, where);
	}
	rc = 0;
out:
	for (int i = 0; i <= d->spec.n_params; i++)
		free((char *)sets[i]);
	free(sets);
	free(env);
	cJSON_Delete(old);
	cJSON_Delete(objects);
	project_free(p);
	return rc;
}

/* The trial's Job, looked at: its new epochs feed the curve (and ASHA). 1 when it has ended
 * (*ok: it succeeded), or is gone; 0 while it runs. */
static int poll_job(struct driver *d, struct trial *t, int *ok)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_job_summary sum;
	cJSON *job = NULL, *doc;
	const char *m;
	int ended = 0;

	*ok = 0;
	if (kube_get(d->o->kube, "Job", d->o->namespace_, t->project, &job, &err) < 0) {
		if (err.code != DLK_EXIT_NOTFOUND) {
			note(d, 1, "trial %d: cannot read its Job: %s", t->n, err.msg);
			return 0;
		}
		if (!t->gone)
			note(d, 1, "trial %d: its Job '%s' was deleted", t->n, t->project);
		return 1;
	}
	m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
	        "dlk.dev/metrics"));
	if (m && (doc = cJSON_Parse(m))) {
		follow_history(d, t, doc);
		cJSON_Delete(doc);
	}
	if (!t->gone) {
		dlk_job_summarize_job(job, &sum);
		if (sum.state == JOB_SUCCEEDED || sum.state == JOB_FAILED) {
			ended = 1;
			*ok = sum.state == JOB_SUCCEEDED;
		}
		dlk_job_summary_release(&sum);
	}
	cJSON_Delete(job);
	return ended;
}

/* A deleted trial's pods take their time to stop (they checkpoint; rank 0 writes its record):
 * its record is completed only once none is left, or it would be written over. */
static int pods_left(const struct driver *d, const struct trial *t)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char sel[300];
	cJSON *list = NULL;
	int n;

	snprintf(sel, sizeof(sel), "batch.kubernetes.io/job-name=%s", t->project);
	lo.label_selector = sel;
	if (kube_list(d->o->kube, "Pod", d->o->namespace_, &lo, &list, &err) < 0)
		return 1;
	n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items"));
	cJSON_Delete(list);
	return n > 0;
}

static int launch(struct driver *d, struct trial *t, struct dlk_err *err)
{
	const char **argv = xcalloc((size_t)(16 + 2 * d->spec.n_params), sizeof(char *));
	char **owned = xcalloc((size_t)(d->spec.n_params + 2), sizeof(char *));
	char *log = xasprintf("%s/trial-%d.log", d->dir, t->n), *bundle = xasprintf("%s/trial-%d.dlk", d->dir, t->n);
	char *env = sweep_env(d, t);
	int a = 0, fd;
	pid_t parent, pid;

	if (d->cluster) {
		free(argv);
		free(owned);
		free(log);
		free(bundle);
		free(env);
		return launch_job(d, t, err);
	}

	argv[a++] = d->o->self;
	argv[a++] = "train";
	argv[a++] = "--local";
	argv[a++] = "-q";
	argv[a++] = "-f";
	argv[a++] = d->o->spec_file;
	if (!t->resume)
		argv[a++] = "--fresh";
	argv[a++] = "--metrics";
	argv[a++] = t->metrics;
	argv[a++] = "--bundle";
	argv[a++] = bundle;
	argv[a++] = "--set";
	argv[a++] = owned[0] = xasprintf("name=%s", t->project);
	for (int i = 0; i < d->spec.n_params; i++) {
		char *v = dlk_sweep_value_text(&d->spec, i, t->x[i]);
		argv[a++] = "--set";
		argv[a++] = owned[i + 1] = xasprintf("%s=%s", d->spec.params[i].key, v);
		free(v);
	}
	argv[a] = NULL;
	if (!t->resume) {
		/* a new run's curve starts empty */
		unlink(t->metrics);
		t->off = 0;
	}
	fflush(NULL);
	parent = getpid();
	pid = fork();
	if (pid == 0) {
		/* a trial does not outlive its driver: killed, the driver's trials stop with a
		 * checkpoint, and the driver run again continues them. A driver gone before the
		 * prctl took effect sends no signal; its orphan goes to init or to a subreaper (a
		 * container's init, a service manager), so it is the driver's pid that is checked */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		setenv(DLK_ENV_RUN_SWEEP, env, 1);
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(d->o->self, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i <= d->spec.n_params; i++)
		free(owned[i]);
	free(owned);
	free(argv);
	free(env);
	free(bundle);
	if (pid < 0) {
		free(log);
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot start trial %d: %s", t->n, strerror(errno));
	}
	t->pid = pid;
	t->state = T_RUNNING;
	t->started = now_s();
	{
		char *where = xasprintf("log: %s", log);
		note_start(d, t, where);
		free(where);
	}
	free(log);
	return 0;
}

/* The trial's record completed with its curve, value and, when ASHA stopped it, the outcome
 * "stopped" (a stop is no failure, and not a run to resume); written back to its store. */
static void complete_record(struct driver *d, struct trial *t, cJSON *rec, struct dlk_run_store *s)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *sw;
	double v;

	sw = cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "sweep");
	if (!sw) {
		sw = cJSON_CreateObject();
		dlk_run_set_item(rec, "sweep", sw);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(sw, "curve");
	cJSON_AddItemToObject(sw, "curve", cJSON_Duplicate(t->curve, 1));
	cJSON_DeleteItemFromObjectCaseSensitive(sw, "value");
	/* a stopped trial is judged by where ASHA stopped it (the epoch under way when the signal
	 * came may end first, and stays on its curve) */
	v = t->stopping ? curve_at(t->curve, t->stopped_at) : curve_last(t->curve);
	if (isfinite(v))
		cJSON_AddNumberToObject(sw, "value", v);
	/* ASHA's word came after the trial had already finished: it ran to its end */
	if (t->stopping && dlk_run_outcome(rec) == DLK_RUN_SUCCEEDED)
		t->stopping = 0;
	if (t->stopping) {
		char reason[256];
		cJSON_DeleteItemFromObjectCaseSensitive(sw, "stopped_at");
		cJSON_AddNumberToObject(sw, "stopped_at", (double)t->stopped_at);
		snprintf(reason, sizeof(reason), "stopped early by the sweep (ASHA) at %s %ld", d->spec.asha_steps ? "step" : "epoch",
		         t->stopped_at);
		dlk_run_set_outcome(rec, DLK_RUN_STOPPED);
		dlk_run_set_str(rec, "reason", reason);
		dlk_run_set_item(rec, "failure", NULL);
	}
	if (dlk_runs_put(s, rec, &err))
		note(d, 1, "trial %d: cannot complete its record: %s", t->n, err.msg);
	else if (!t->stopping)
		note(d, 0, "trial %d %s: %s %.4g", t->n, dlk_run_outcome_name(dlk_run_outcome(rec)), d->spec.metric, v);
}

/* The trial ended: its record completed (complete_record). */
static void finish(struct driver *d, struct trial *t, const char *how)
{
	struct dlk_run_store *s = NULL;
	cJSON *rec;

	/* reaped: its pid may be another process's now, which a late stop must not signal */
	t->pid = 0;
	if (!d->cluster)
		follow(d, t);
	t->state = T_DONE;
	rec = trial_record(d, t, &s);
	{
		/* what the run recorded it held (devices x workers x wall, lib/runs/usage.h), else the
		 * time the driver saw it run, at the project's GPUs per worker */
		double g = rec ? record_gpu_seconds(rec) : -1;
		d->gpu_seconds += g >= 0 ? g : (now_s() - t->started) * (d->project->resources.gpus > 0 ? d->project->resources.gpus : 0);
	}
	if (!rec) {
		note(d, 1, "trial %d ended (%s) before it recorded a run: see %s", t->n, how, d->cluster ? "dlk logs" : d->dir);
		dlk_runs_close(s);
		return;
	}
	/* the epochs the Job published last may have come after the last look */
	if (d->cluster)
		follow_history(d, t, rec);
	complete_record(d, t, rec, s);
	cJSON_Delete(rec);
	dlk_runs_close(s);
}

/* Every trial's parameters and their values make a project: the loader says what is wrong,
 * with the file's line, before any trial starts. */
static int check_params(struct driver *d, struct dlk_err *err)
{
	for (int i = 0; i < d->spec.n_params; i++) {
		const struct dlk_sweep_param *p = &d->spec.params[i];
		int n = p->kind == DLK_SWEEP_VALUES ? p->n_values : 2;
		for (int k = 0; k < n; k++) {
			char *v = p->kind == DLK_SWEEP_VALUES ? xstrdup(p->values[k])
			                                      : dlk_sweep_value_text(&d->spec, i, k ? p->hi : p->lo);
			char *set = xasprintf("%s=%s", p->key, v);
			const char *sets[1] = { set };
			struct dlk_project *pr = project_load(d->o->spec_file, sets, 1, err);
			free(v);
			free(set);
			if (!pr)
				return dlk_err_prefix(err, "%s:%d:%d: sweep.parameters.%s", d->spec.file, p->line, p->col, p->key);
			project_free(pr);
		}
	}
	return 0;
}

/* A trial cut off with its driver may still be writing its last checkpoint (it got SIGTERM
 * when the driver died), and one that got the signal during its final checkpoint still ends
 * as having succeeded: its run lock says when it is gone, and only then does its record say
 * what it left (done, or to continue). A trial that never started has no directory. */
static void wait_unlocked(const struct driver *d, const struct trial *t)
{
	char *dir = dlk_runs_local_dir(d->o->spec_file, t->project);
	struct dlk_run_lock l = DLK_RUN_LOCK_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;
	struct stat st;

	for (int i = 0; i < 600 && !stat(dir, &st); i++) {
		int rc = dlk_run_lock_take(&l, dir, &h, &err);
		if (rc != 1) {
			dlk_run_lock_release(&l);
			break;
		}
		usleep(100000);
	}
	free(dir);
}

/* A driver run again finds a trial's Job still there (running, or ended while no driver looked):
 * it follows it as if it had started it, with the values the Job's annotation (or its record)
 * names. 1 when adopted. */
static int adopt_job(struct driver *d, struct trial *t, const cJSON *rec)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *job = NULL, *sw = NULL;
	const char *a;
	int o = rec ? dlk_run_outcome(rec) : -1, ok = 0;

	/* a trial whose record the driver completed (its curve) is done: its Job, if still there,
	 * is history; one that ended while no driver looked is followed to be completed */
	if (rec && (o == DLK_RUN_STOPPED ||
	            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "sweep"), "curve")))
		return 0;
	if (kube_get(d->o->kube, "Job", d->o->namespace_, t->project, &job, &err) < 0)
		return 0;
	a = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
	        DLK_SWEEP_ANNOTATION));
	sw = a ? cJSON_Parse(a) : NULL;
	if (sw && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(sw, "id")) &&
	    !strcmp(cJSON_GetObjectItemCaseSensitive(sw, "id")->valuestring, d->spec.name) &&
	    !dlk_sweep_params_point(&d->spec, cJSON_GetObjectItemCaseSensitive(sw, "params"), t->x)) {
		t->state = T_RUNNING;
		t->resume = 1;
		t->started = now_s();
		ok = 1;
	}
	cJSON_Delete(sw);
	cJSON_Delete(job);
	return ok;
}

/* The trials the history already has: finished ones are done (their points feed TPE and their
 * curves ASHA's rungs); one that was cut off continues. */
static void load_history(struct driver *d)
{
	for (int i = 0; i < d->n_t; i++) {
		struct trial *t = &d->t[i];
		struct dlk_run_store *s = NULL;
		cJSON *rec;
		const cJSON *sw, *params, *curve, *stopped;
		int o;
		if (!d->cluster)
			wait_unlocked(d, t);
		rec = trial_record(d, t, &s);
		if (d->cluster && adopt_job(d, t, rec)) {
			cJSON_Delete(rec);
			dlk_runs_close(s);
			continue;
		}
		if (!rec) {
			dlk_runs_close(s);
			continue;
		}
		sw = cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "sweep");
		params = cJSON_GetObjectItemCaseSensitive(sw, "params");
		curve = cJSON_GetObjectItemCaseSensitive(sw, "curve");
		stopped = cJSON_GetObjectItemCaseSensitive(sw, "stopped_at");
		if (dlk_sweep_params_point(&d->spec, params, t->x)) {
			note(d, 1, "trial %d: its recorded parameters are not in this sweep's space (the sweep: section "
			     "changed?); it runs again", t->n);
			cJSON_Delete(rec);
			dlk_runs_close(s);
			continue;
		}
		o = dlk_run_outcome(rec);
		/* the GPU time the trial has had so far counts against the budget, whichever run of
		 * the driver started it */
		{
			const char *a = dlk_run_started_at(rec), *b = dlk_run_str(rec, "finished_at");
			double ta, tb, g = record_gpu_seconds(rec);
			if (g >= 0)
				d->gpu_seconds += g;
			else if (a && b && !dlk_rfc3339_parse(a, &ta) && !dlk_rfc3339_parse(b, &tb) && tb > ta)
				d->gpu_seconds += (tb - ta) * (d->project->resources.gpus > 0 ? d->project->resources.gpus : 0);
		}
		if (o == DLK_RUN_RUNNING || o == DLK_RUN_INTERRUPTED) {
			/* in a cluster, its Job is gone (else it was adopted): a new Job runs it again */
			t->resume = 1;
		} else {
			t->state = T_DONE;
			if (cJSON_IsArray(curve)) {
				cJSON_Delete(t->curve);
				t->curve = cJSON_Duplicate(curve, 1);
			} else {
				/* ended while no driver looked (it got the driver's SIGTERM while writing its
				 * last checkpoint, and so succeeded; or its Job ended and is gone): its curve is
				 * the metrics it wrote (a local trial) or its record's epochs, and its record is
				 * completed now, so that status, report and TPE see its value */
				if (!d->cluster)
					read_metrics(d, t, 0);
				for (const cJSON *e = cJSON_GetArraySize(t->curve) ? NULL : cJSON_GetArrayItem(
				             cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rec, "history"),
				                                              "epochs"), 0);
				     e && !d->spec.asha_steps; e = e->next) {
					double at, v;
					if (!epoch_point(d, e, &at, &v))
						curve_add(t->curve, at, v);
				}
				complete_record(d, t, rec, s);
			}
			if (o == DLK_RUN_STOPPED) {
				t->stopping = 1;
				t->stopped_at = cJSON_IsNumber(stopped) ? (long)stopped->valuedouble : 0;
			}
		}
		cJSON_Delete(rec);
		dlk_runs_close(s);
	}
	/* ASHA's rungs as the finished trials left them, in trial order */
	for (int i = 0; i < d->n_t; i++) {
		struct trial *t = &d->t[i];
		if (t->state != T_DONE)
			continue;
		for (int k = 0; k < d->asha.n_rungs; k++) {
			double v = curve_at(t->curve, d->asha.rungs[k].at);
			const cJSON *last = cJSON_GetArrayItem(t->curve, cJSON_GetArraySize(t->curve) - 1);
			if (!last || cJSON_GetArrayItem(last, 0)->valuedouble < d->asha.rungs[k].at || isnan(v))
				break;
			dlk_asha_report(&d->asha, k, v);
		}
	}
}

/* the finished trials with a value, for TPE */
static size_t observations(const struct driver *d, struct dlk_sweep_obs *obs)
{
	size_t n = 0;
	for (int i = 0; i < d->n_t; i++) {
		const struct trial *t = &d->t[i];
		double v = curve_last(t->curve);
		if (t->state == T_DONE && isfinite(v)) {
			obs[n].x = t->x;
			obs[n].value = v;
			n++;
		}
	}
	return n;
}

static volatile sig_atomic_t driver_sig;
static void on_sig(int s) { driver_sig = s; }

static int run_driver(const struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink, int cluster,
                      struct dlk_err *err)
{
	struct driver d = { 0 };
	struct dlk_sweep_obs *obs = NULL;
	struct sigaction sa = { 0 }, old_int, old_term;
	char *pdir = NULL, *threads = NULL;
	int asked_all = 0;
	int rc = -1, running = 0, next = 0, n_done = 0, n_stopped = 0, n_failed = 0, prior = 0;
	long max_r;

	d.o = o;
	d.sink = sink;
	d.cluster = cluster;
	d.project = project_load(o->spec_file, NULL, 0, err);
	if (!d.project)
		return -1;
	rc = dlk_sweep_spec_load(o->spec_file, d.project->name, &d.spec, err);
	if (rc) {
		if (rc > 0)
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' has no sweep: section", o->spec_file),
			        dlk_err_hint(err, "'dlk init --example sweep DIR' writes a project with one");
		rc = -1;
		goto out;
	}
	rc = -1;
	if (o->max_trials > 0 && o->max_trials < d.spec.trials)
		d.spec.trials = o->max_trials;
	if (check_params(&d, err))
		goto out;
	pdir = dlk_dir_of(o->spec_file);
	d.dir = xasprintf("%s/.dlk/sweeps/%s", pdir, d.spec.name);
	if (dlk_mkdir_p(d.dir, err))
		goto out;
	if (cluster) {
		/* where `dlk status SWEEP` and `dlk report SWEEP` find the trials' records */
		char *f = xasprintf("%s/namespace", d.dir);
		char *text = xasprintf("%s\n", o->namespace_);
		int w = dlk_write_file_atomic(f, text, strlen(text), 0644, err);
		free(f);
		free(text);
		if (w)
			goto out;
	}
	max_r = d.spec.asha_steps ? (1L << 40) : d.project->training.epochs;
	if (d.spec.asha)
		dlk_asha_init(&d.asha, d.spec.asha_min, max_r, d.spec.asha_factor, d.spec.maximize);
	d.n_t = d.spec.trials;
	d.t = xcalloc((size_t)d.n_t, sizeof(*d.t));
	obs = xcalloc((size_t)d.n_t, sizeof(*obs));
	for (int i = 0; i < d.n_t; i++) {
		d.t[i].n = i;
		d.t[i].x = xcalloc((size_t)d.spec.n_params, sizeof(double));
		d.t[i].project = xasprintf("%s-%d", d.spec.name, i);
		d.t[i].metrics = xasprintf("%s/trial-%d.jsonl", d.dir, i);
		d.t[i].curve = cJSON_CreateArray();
		d.t[i].x[0] = NAN; /* not chosen yet */
	}
	load_history(&d);
	for (int i = 0; i < d.n_t; i++) {
		prior += d.t[i].state == T_DONE;
		running += d.t[i].state == T_RUNNING; /* Jobs a driver before this one started */
	}
	if (prior || running)
		note(&d, 0, "sweep %s: %d of %d trials are done already%s; going on", d.spec.name, prior, d.n_t,
		     running ? ", the Jobs of others still there" : "");
	else
		note(&d, 0, "sweep %s: %d trials, %d at once, %s search, %s %s%s", d.spec.name, d.n_t, d.spec.parallel,
		     d.spec.method == DLK_SWEEP_TPE ? "TPE" : d.spec.method == DLK_SWEEP_GRID ? "grid" : "random",
		     d.spec.maximize ? "maximizing" : "minimizing", d.spec.metric, d.spec.asha ? ", ASHA early stopping" : "");
	for (int i = 0; i < d.n_t; i++)
		if (d.t[i].state == T_RUNNING)
			note_start(&d, &d.t[i], "its Job is still there: following it");
	/* the trials share the machine's cores */
	if (!cluster && !getenv(DLK_ENV_THREADS)) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		long each = cpus > d.spec.parallel ? cpus / d.spec.parallel : 1;
		threads = xasprintf("%ld", each);
		setenv(DLK_ENV_THREADS, threads, 1);
	}
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	driver_sig = 0;
	for (;;) {
		int status;
		pid_t pid;
		int budget_spent = d.spec.gpu_hours > 0 && d.gpu_seconds >= d.spec.gpu_hours * 3600;

		while (!driver_sig && !budget_spent && running < d.spec.parallel && next < d.n_t) {
			struct trial *t = &d.t[next++];
			if (t->state != T_PENDING)
				continue;
			if (isnan(t->x[0]) || !t->resume)
				dlk_sweep_suggest(&d.spec, obs, observations(&d, obs), t->n, t->x);
			if (launch(&d, t, err))
				goto stop_all;
			running++;
		}
		if (budget_spent && next < d.n_t) {
			note(&d, 1, "the budget of %g GPU-hours is spent: no new trials", d.spec.gpu_hours);
			next = d.n_t;
		}
		if (!running)
			break;
		if (cluster) {
			/* the Jobs' annotations change after each epoch: a look twice a second is enough */
			for (int w = 0; w < 10 && !driver_sig; w++)
				usleep(50000);
			if (driver_sig) {
				/* the Jobs go on without their driver; run again, it follows them */
				running = 0;
				break;
			}
			for (int i = 0; i < d.n_t; i++) {
				struct trial *t = &d.t[i];
				int ok;
				if (t->state != T_RUNNING || !poll_job(&d, t, &ok) || (t->gone && pods_left(&d, t)))
					continue;
				running--;
				finish(&d, t, ok ? "its Job succeeded" : t->gone ? "its Job was deleted" : "its Job failed");
				if (t->stopping)
					n_stopped++;
				else if (!ok)
					n_failed++;
				else
					n_done++;
			}
			continue;
		}
		usleep(50000);
		for (int i = 0; i < d.n_t; i++)
			if (d.t[i].state == T_RUNNING)
				follow(&d, &d.t[i]);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < d.n_t; i++) {
				struct trial *t = &d.t[i];
				if (t->state != T_RUNNING || t->pid != pid)
					continue;
				char how[64];
				running--;
				snprintf(how, sizeof(how), "%s %d", WIFEXITED(status) ? "exit code" : "signal",
				         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
				finish(&d, t, how);
				if (t->stopping)
					n_stopped++;
				else if (!WIFEXITED(status) || WEXITSTATUS(status))
					n_failed++;
				else
					n_done++;
			}
		}
		if (driver_sig) {
			/* stopped by the user: the trials checkpoint and end; the same command resumes.
			 * Each is asked once: a second signal would cut its checkpoint short */
			if (!asked_all)
				for (int i = 0; i < d.n_t; i++)
					if (d.t[i].state == T_RUNNING && !d.t[i].stopping)
						kill(d.t[i].pid, SIGTERM);
			asked_all = 1;
			if (!running)
				break;
		}
	}
	if (driver_sig) {
		dlk_errf(err, DLK_EXIT_INTERRUPTED, "sweep %s stopped by a signal", d.spec.name);
		if (cluster)
			dlk_err_hint(err, "the trials' Jobs keep running: run the same command again to follow them and go on");
		else
			dlk_err_hint(err, "run the same command again to resume it");
		goto restore;
	}
	note(&d, 0, "sweep %s: %d trials finished, %d stopped early, %d failed%s", d.spec.name, n_done, n_stopped, n_failed,
	     prior ? " in this run of the driver" : "");
	rc = 0;
	goto restore;
stop_all:
	for (int i = 0; i < d.n_t; i++)
		if (d.t[i].state == T_RUNNING && d.t[i].pid > 0) {
			kill(d.t[i].pid, SIGTERM);
			waitpid(d.t[i].pid, NULL, 0);
		}
restore:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
out:
	for (int i = 0; d.t && i < d.n_t; i++) {
		free(d.t[i].x);
		free(d.t[i].project);
		free(d.t[i].metrics);
		cJSON_Delete(d.t[i].curve);
	}
	free(d.t);
	free(obs);
	free(d.dir);
	free(pdir);
	free(threads);
	dlk_asha_release(&d.asha);
	dlk_sweep_spec_release(&d.spec);
	project_free(d.project);
	return rc;
}

int dlk_sweep_run_local(const struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink, struct dlk_err *err)
{
	return run_driver(o, sink, 0, err);
}

int dlk_sweep_run_cluster(const struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink, struct dlk_err *err)
{
	if (!o->kube || !o->namespace_)
		return dlk_errf(err, DLK_EXIT_USAGE, "a sweep in a cluster needs a client and a namespace");
	return run_driver(o, sink, 1, err);
}

char *dlk_sweep_cluster_namespace(const char *spec_file, const char *id)
{
	char *pdir = dlk_dir_of(spec_file), *f = xasprintf("%s/.dlk/sweeps/%s/namespace", pdir, id);
	char buf[256];
	FILE *fp = fopen(f, "r");
	char *ns = NULL;

	free(pdir);
	free(f);
	if (!fp)
		return NULL;
	if (fgets(buf, sizeof(buf), fp)) {
		buf[strcspn(buf, "\n")] = 0;
		if (buf[0])
			ns = xstrdup(buf);
	}
	fclose(fp);
	return ns;
}
