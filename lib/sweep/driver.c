/* The local driver of a sweep: trials are `dlk train --local` processes of the project with
 * --set overrides, each one a project of its own name (SWEEP-N) so that trials running at
 * once each hold their own run lock and history, with run.sweep in their records. The driver
 * follows each trial's metrics file (a JSON line per step and epoch), lets ASHA decide at each
 * rung, and stops a trial with SIGTERM (it checkpoints and ends; its record then says
 * "stopped"). Everything it needs to resume is in the trials' records. */
#include "lib/sweep/sweep.h"
#include "lib/jobs/podenv.h"
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
	char *dir = dlk_runs_local_dir(d->o->spec_file, t->project);
	struct dlk_run_store *s = dlk_runs_open_dir(dir, t->project);
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *all = NULL, *rec, *found = NULL;

	free(dir);
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

/* Reads what the trial appended to its metrics file since the last look; ASHA decides at each
 * rung the curve passes. */
static void follow(struct driver *d, struct trial *t)
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
			curve_add(t->curve, at, v);
			while (d->spec.asha && !t->stopping && t->next_rung < d->asha.n_rungs &&
			       at >= d->asha.rungs[t->next_rung].at) {
				int k = t->next_rung++;
				if (dlk_asha_report(&d->asha, k, v)) {
					t->stopping = 1;
					t->stopped_at = d->asha.rungs[k].at;
					note(d, 0, "trial %d stops at %s %ld: %s %.4g is not in the top 1/%d there", t->n,
					     d->spec.asha_steps ? "step" : "epoch", t->stopped_at, d->spec.metric, v, d->asha.factor);
					if (t->pid > 0)
						kill(t->pid, SIGTERM);
				}
			}
		}
		cJSON_Delete(o);
	}
	fclose(f);
}

static int launch(struct driver *d, struct trial *t, struct dlk_err *err)
{
	const char **argv = xcalloc((size_t)(16 + 2 * d->spec.n_params), sizeof(char *));
	char **owned = xcalloc((size_t)(d->spec.n_params + 2), sizeof(char *));
	char *log = xasprintf("%s/trial-%d.log", d->dir, t->n), *bundle = xasprintf("%s/trial-%d.dlk", d->dir, t->n);
	cJSON *sw = cJSON_CreateObject();
	char *env;
	int a = 0, fd;
	pid_t pid;

	cJSON_AddStringToObject(sw, "id", d->spec.name);
	cJSON_AddNumberToObject(sw, "trial", t->n);
	cJSON_AddItemToObject(sw, "params", dlk_sweep_params_json(&d->spec, t->x));
	cJSON_AddStringToObject(sw, "metric", d->spec.metric);
	cJSON_AddStringToObject(sw, "goal", d->spec.maximize ? "maximize" : "minimize");
	env = cJSON_PrintUnformatted(sw);
	cJSON_Delete(sw);

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
	pid = fork();
	if (pid == 0) {
		/* a trial does not outlive its driver: killed, the driver's trials stop with a
		 * checkpoint, and the driver run again continues them */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
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
		char line[1024] = "";
		for (int i = 0; i < d->spec.n_params; i++) {
			char *v = dlk_sweep_value_text(&d->spec, i, t->x[i]);
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s=%s", i ? " " : "", d->spec.params[i].key, v);
			free(v);
		}
		note(d, 0, "trial %d %s: %s (log: %s)", t->n, t->resume ? "continues" : "starts", line, log);
	}
	free(log);
	return 0;
}

/* The trial ended: its record completed with its curve, value and, when ASHA stopped it, the
 * outcome "stopped" (a stop is no failure, and not a run to resume). */
static void finish(struct driver *d, struct trial *t, int status)
{
	struct dlk_run_store *s = NULL;
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *rec, *sw;
	double v;

	/* reaped: its pid may be another process's now, which a late stop must not signal */
	t->pid = 0;
	follow(d, t);
	d->gpu_seconds += (now_s() - t->started) * (d->project->resources.gpus > 0 ? d->project->resources.gpus : 0);
	t->state = T_DONE;
	rec = trial_record(d, t, &s);
	if (!rec) {
		note(d, 1, "trial %d ended (%s %d) before it recorded a run: see %s/trial-%d.log", t->n,
		     WIFEXITED(status) ? "exit code" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
		     d->dir, t->n);
		dlk_runs_close(s);
		return;
	}
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
 * when the driver died): its run lock says when it is gone, and it continues only then. */
static void wait_unlocked(const struct driver *d, const struct trial *t)
{
	char *dir = dlk_runs_local_dir(d->o->spec_file, t->project);
	struct dlk_run_lock l = DLK_RUN_LOCK_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;

	for (int i = 0; i < 600; i++) {
		int rc = dlk_run_lock_take(&l, dir, &h, &err);
		if (rc != 1) {
			dlk_run_lock_release(&l);
			break;
		}
		usleep(100000);
	}
	free(dir);
}

/* The trials the history already has: finished ones are done (their points feed TPE and their
 * curves ASHA's rungs); one that was cut off continues. */
static void load_history(struct driver *d)
{
	for (int i = 0; i < d->n_t; i++) {
		struct trial *t = &d->t[i];
		cJSON *rec = trial_record(d, t, NULL);
		const cJSON *sw, *params, *curve, *stopped;
		int o;
		if (!rec)
			continue;
		sw = cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "sweep");
		params = cJSON_GetObjectItemCaseSensitive(sw, "params");
		curve = cJSON_GetObjectItemCaseSensitive(sw, "curve");
		stopped = cJSON_GetObjectItemCaseSensitive(sw, "stopped_at");
		if (dlk_sweep_params_point(&d->spec, params, t->x)) {
			note(d, 1, "trial %d: its recorded parameters are not in this sweep's space (the sweep: section "
			     "changed?); it runs again", t->n);
			cJSON_Delete(rec);
			continue;
		}
		o = dlk_run_outcome(rec);
		/* the GPU time the trial has had so far counts against the budget, whichever run of
		 * the driver started it */
		{
			const char *a = dlk_run_started_at(rec), *b = dlk_run_str(rec, "finished_at");
			double ta, tb;
			if (a && b && !dlk_rfc3339_parse(a, &ta) && !dlk_rfc3339_parse(b, &tb) && tb > ta)
				d->gpu_seconds += (tb - ta) * (d->project->resources.gpus > 0 ? d->project->resources.gpus : 0);
		}
		if (o == DLK_RUN_RUNNING || o == DLK_RUN_INTERRUPTED) {
			t->resume = 1;
			wait_unlocked(d, t);
		} else {
			t->state = T_DONE;
			if (cJSON_IsArray(curve)) {
				cJSON_Delete(t->curve);
				t->curve = cJSON_Duplicate(curve, 1);
			}
			if (o == DLK_RUN_STOPPED) {
				t->stopping = 1;
				t->stopped_at = cJSON_IsNumber(stopped) ? (long)stopped->valuedouble : 0;
			}
		}
		cJSON_Delete(rec);
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

int dlk_sweep_run_local(const struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink, struct dlk_err *err)
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
	for (int i = 0; i < d.n_t; i++)
		prior += d.t[i].state == T_DONE;
	if (prior)
		note(&d, 0, "sweep %s: %d of %d trials are done already; going on", d.spec.name, prior, d.n_t);
	else
		note(&d, 0, "sweep %s: %d trials, %d at once, %s search, %s %s%s", d.spec.name, d.n_t, d.spec.parallel,
		     d.spec.method == DLK_SWEEP_TPE ? "TPE" : d.spec.method == DLK_SWEEP_GRID ? "grid" : "random",
		     d.spec.maximize ? "maximizing" : "minimizing", d.spec.metric, d.spec.asha ? ", ASHA early stopping" : "");
	/* the trials share the machine's cores */
	if (!getenv(DLK_ENV_THREADS)) {
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
		usleep(50000);
		for (int i = 0; i < d.n_t; i++)
			if (d.t[i].state == T_RUNNING)
				follow(&d, &d.t[i]);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < d.n_t; i++) {
				struct trial *t = &d.t[i];
				if (t->state != T_RUNNING || t->pid != pid)
					continue;
				running--;
				finish(&d, t, status);
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
		dlk_err_hint(err, "run the same command again to resume it");
		goto restore;
	}
	note(&d, 0, "sweep %s: %d trials finished, %d stopped early, %d failed%s", d.spec.name, n_done, n_stopped, n_failed,
	     prior ? " in this run of the driver" : "");
	rc = 0;
	goto restore;
stop_all:
	for (int i = 0; i < d.n_t; i++)
		if (d.t[i].state == T_RUNNING) {
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
