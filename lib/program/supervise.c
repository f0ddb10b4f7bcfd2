/* The supervisor of a user's program (lib/program/supervise.h): lib/trainer/gang.c does the
 * forking, watching, restarting and recording; this file says what each process runs, reads
 * what rank 0 reports, and decides which exit codes restart. */
#include "lib/program/supervise.h"
#include "lib/program/gangwait.h"
#include "lib/program/gpus.h"
#include "lib/program/env.h"
#include "lib/program/progfile.h"
#include "lib/program/protocol.h"
#include "lib/jobs/failure.h"
#include "lib/jobs/podenv.h"
#include "lib/trainer/progress.h"
#include "lib/train/progress.h"
#include "lib/util/clock.h"
#include "lib/report/report.h"
#include "lib/store/manifest.h"
#include "lib/trainer/gang.h"
#include "lib/trainer/metrics.h"
#include "lib/trainer/run.h"
#include "lib/runs/lock.h"
#include "lib/runs/runs.h"
#include "lib/util/buf.h"
#include "lib/comm/rendezvous.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct sup {
	const struct dlk_trainer_opts *opts;
	const struct dlk_project *spec;
	const struct dlk_program_view *view;
	const struct dlk_trainer_sink *sink;
	int nodes, ppn, started;     /* nodes of ppn processes; dlk starts `started` per node */
	int in_pod, node_rank;       /* a pod: this node's rank (here: local / started) */
	char master[256];
	int port;
	char **peers;                /* a pod's: the nodes' host names, NULL: all at master */
	char *project_dir, *ckpt_base, *out_base, *code_dir;
	char code_sha256[65];
	/* what rank 0 reported */
	int warned[DLK_GANG_MAX_WORKERS];
	double loss, eval_loss;
	int has_loss, has_eval_loss, epoch, epochs;
	long long step;
	struct program_report last_eval; /* the newest report with metrics or a confusion matrix */
	char *model;
	/* rank 0's pod: its progress on the Job, where `dlk status` reads it (NULL: none) */
	struct dlk_job_progress *jp;
	long long steps;
	/* each local process's DLK_PROGRESS_FILE, in a directory of the supervisor's own */
	char *progress_dir;
	struct progfile progress[DLK_GANG_MAX_WORKERS];
	int n_progress;
	/* Prometheus metrics fed from rank 0's reports (NULL: none); generations that ended */
	struct dlk_train_metrics *metrics;
	int gens;
	/* the GPUs of the processes here (lib/program/gpus.h; NULL: none), and rank 0's last
	 * samples/s; a run here writes its progress with them for `dlk top` */
	struct program_gpus *gpus;
	double samples_per_s;
	int progress_warned;
};

int dlk_program_restarts(const struct dlk_program *p, int status)
{
	int code;
	if (WIFSIGNALED(status))
		return 1;
	code = WEXITSTATUS(status);
	for (int i = 0; i < p->n_fail_codes; i++)
		if (p->fail_codes[i] == code)
			return 0;
	/* a listed restart code, and any other failure: the Job's backoff counts them too */
	return code != 0;
}

/* what a code tree never ships: dlk's own outputs beside dlk.yaml (a local run's checkpoints
 * and outputs), the repository's history, Python's byte-code caches */
static int code_skipped(const char *path)
{
	static const char *const dirs[] = { ".dlk", ".git", "__pycache__", NULL };
	for (const char *seg = path; seg;) {
		const char *slash = strchr(seg, '/');
		size_t l = slash ? (size_t)(slash - seg) : strlen(seg);
		for (int i = 0; slash && dirs[i]; i++)
			if (strlen(dirs[i]) == l && !strncmp(seg, dirs[i], l))
				return 1;
		seg = slash ? slash + 1 : NULL;
	}
	return 0;
}

int dlk_program_code_manifest(const char *dir, struct dlk_manifest *m, struct dlk_err *err)
{
	const char *paths[] = { dir };
	size_t k = 0, len;
	char *text;

	if (dlk_manifest_build(paths, 1, NULL, NULL, m, err)) {
		dlk_err_prefix(err, "program.code");
		return -1;
	}
	m->total = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (code_skipped(m->e[i].path)) {
			free(m->e[i].path);
			free(m->e[i].local);
			continue;
		}
		m->total += m->e[i].size;
		m->e[k++] = m->e[i];
	}
	m->n = k;
	text = dlk_manifest_format(m, &len);
	dlk_sha256_hex(text, len, m->id);
	free(text);
	return 0;
}

int dlk_program_code_digest(const char *dir, char hex[65], struct dlk_err *err)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	if (dlk_program_code_manifest(dir, &m, err))
		return -1;
	memcpy(hex, m.id, 65);
	dlk_manifest_release(&m);
	return 0;
}

/* ---- in the process: become the program ---- */

static const char *const gang_vars[] = { DLK_ENV_RANK, DLK_ENV_WORLD_SIZE, DLK_ENV_MASTER_ADDR, DLK_ENV_MASTER_PORT,
	                                 DLK_ENV_LOCAL_RANK, DLK_ENV_LOCAL_WORLD_SIZE, DLK_ENV_LISTEN_FD,
	                                 DLK_ENV_THREADS, DLK_ENV_GENERATION, NULL };

static int on_worker(void *ud, int local)
{
	struct sup *s = ud;
	const struct dlk_program *p = &s->spec->program;
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	const char *port = getenv(DLK_ENV_MASTER_PORT), *gen = getenv(DLK_ENV_GENERATION);
	const char *run_id = getenv(DLK_ENV_RUN_ID);
	char *ckpt, *out;
	struct program_place at = { 0 };

	run_id = run_id && *run_id ? run_id : "local";
	ckpt = xasprintf("%s/%s", s->ckpt_base, run_id);
	out = xasprintf("%s/%s", s->out_base, run_id);
	if (dlk_mkdir_p(ckpt, &err) || dlk_mkdir_p(out, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return DLK_EXIT_FAIL;
	}
	at.node_rank = s->in_pod ? s->node_rank : local / s->started;
	at.n_nodes = s->nodes;
	at.procs_per_node = s->ppn;
	at.gpus = s->spec->resources.gpus;
	at.local_rank = local % s->started;
	at.master_addr = s->in_pod ? s->master : "127.0.0.1";
	at.peers = (const char *const *)s->peers;
	/* here, the port the gang found free for this generation: gangs side by side do not meet */
	at.port = s->in_pod ? s->port : port ? atoi(port) : p->port;
	at.restart = gen ? atoi(gen) : 0;
	at.run_id = run_id;
	at.checkpoint_dir = ckpt;
	at.output_dir = out;
	/* the reports come on the output, or appended to this process's own file, which the
	 * supervisor tails (and removes when the generation ends) */
	at.progress_file = local < s->n_progress ? s->progress[local].path : NULL;
	if (at.progress_file) {
		int fd = open(at.progress_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	}
	at.data_dir = NULL;
	if (s->view->data_dir)
		at.data_dir = xstrdup(s->view->data_dir);
	else if (s->spec->data.train.images.url && !strncmp(s->spec->data.train.images.url, "file://", 7))
		at.data_dir = dlk_dir_of(s->spec->data.train.images.url + 7);
	else if (s->spec->data.train.images.url && s->spec->data.train.images.url[0] == '/')
		at.data_dir = dlk_dir_of(s->spec->data.train.images.url);
	if (program_launch_build(p, &at, &l, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return DLK_EXIT_USAGE;
	}
	for (int i = 0; gang_vars[i]; i++)
		unsetenv(gang_vars[i]);
	/* a Python program's output reaches the supervisor as it is written, not when a pipe's
	 * buffer fills: its progress would otherwise arrive at its end */
	if (!getenv("PYTHONUNBUFFERED"))
		setenv("PYTHONUNBUFFERED", "1", 1);
	for (int i = 0; i < l.n_env; i++)
		putenv(xstrdup(l.env[i]));
	if (s->code_dir && chdir(s->code_dir)) {
		fprintf(stderr, "error: cannot enter '%s': %s\n", dlk_visible(s->code_dir), strerror(errno));
		return DLK_EXIT_CONFIG;
	}
	/* both streams through the supervisor's pipe: progress lines may come on either */
	dup2(STDERR_FILENO, STDOUT_FILENO);
	execvp(l.argv[0], l.argv);
	fprintf(stderr, "error: cannot run '%s': %s\n", dlk_visible(l.argv[0]), strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- in the supervisor: what the processes say ---- */

/* rank 0's report as the Job's progress annotation (lib/train/progress.h's keys), with only
 * what the program said: `dlk status` shows "epoch 2/3 step 120/600 loss 0.41" of a program as
 * of a dlk run. An epoch's end and the run's are published at once, steps every few seconds. */
static cJSON *progress_object(struct sup *s, const struct program_report *r, double samples_per_s)
{
	cJSON *o = cJSON_CreateObject();
	const double *acc = r ? program_report_metric(r, "accuracy") : NULL;
	const struct dlk_rank_gpu *g;
	char updated[32];
	int ng;

	if (s->epoch > 0)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_EPOCH, s->epoch);
	if (s->epoch > 0 && s->epochs > 0)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_EPOCHS, s->epochs);
	cJSON_AddNumberToObject(o, DLK_PROGRESS_STEP, (double)s->step);
	if (s->steps > 0)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_TOTAL_STEPS, (double)s->steps);
	if (s->has_loss)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_LOSS, s->loss);
	if (acc && *acc >= 0 && *acc <= 1)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_ACCURACY, *acc);
	if (samples_per_s >= 0)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_SAMPLES_PER_SEC, samples_per_s);
	dlk_rfc3339_now(updated);
	cJSON_AddStringToObject(o, DLK_PROGRESS_UPDATED, updated);
	cJSON_AddNumberToObject(o, DLK_PROGRESS_WORKERS, s->nodes * s->ppn);
	/* the GPUs of this supervisor's processes, as dlk's rank 0 publishes its gang's */
	g = program_gpus_last(s->gpus, &ng);
	if (ng)
		cJSON_AddItemToObject(o, DLK_PROGRESS_GPUS, dlk_progress_gpus(g, ng));
	return o;
}

static void publish_progress(struct sup *s, const struct program_report *r)
{
	cJSON *o = progress_object(s, r, r->samples_per_s);
	char *json = cJSON_PrintUnformatted(o);

	dlk_job_progress_raw(s->jp, json, r->event != PROGRAM_EV_STEP);
	free(json);
	cJSON_Delete(o);
}

/* A run here: the progress in the project's run directory (DLK_PROGRESS_FILE, with the run's id
 * from its lock), where `dlk top` reads it, each time the GPUs were sampled. A file that cannot be
 * written is warned about once; the program runs on. */
static void local_progress(struct sup *s)
{
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = dlk_runs_local_dir(s->opts->spec_file, s->spec->name), *path, *json, msg[256];
	cJSON *o;

	memset(&h, 0, sizeof(h));
	path = xasprintf("%s/lock", dir);
	if (!dlk_buf_read_file(&b, path, 4096, msg, sizeof(msg)) && b.len)
		dlk_run_holder_parse(b.data, b.len, &h);
	dlk_buf_release(&b);
	free(path);
	if (h.run[0]) {
		o = progress_object(s, NULL, s->samples_per_s);
		cJSON_AddStringToObject(o, DLK_PROGRESS_RUN, h.run);
		json = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		path = xasprintf("%s/%s", dir, DLK_PROGRESS_FILE);
		if (dlk_write_file_atomic(path, json, strlen(json), 0644, &err) && !s->progress_warned++)
			dlk_trainer_warn(s->sink, "the progress is not written for `dlk top` (the program runs on): %s", err.msg);
		free(path);
		free(json);
	}
	free(dir);
}

/* rank 0's report into the Prometheus series a dlk run serves (lib/trainer/metrics.h): its
 * step, epoch, loss and samples/s, and an evaluation's test_loss and other metrics (with a
 * confusion matrix and no accuracy of its own, the matrix's accuracy, as the record has it) */
static void feed_metrics(struct sup *s, const struct program_report *r)
{
	const char *names[PROGRAM_PROTOCOL_MAX_METRICS + 1];
	double values[PROGRAM_PROTOCOL_MAX_METRICS + 1];
	int n = 0;

	if (!s->metrics)
		return;
	dlk_train_metrics_progress(s->metrics, r->step, r->epoch, r->has_loss ? &r->loss : NULL, r->samples_per_s);
	if (!r->n_metrics && !r->n_classes)
		return;
	for (int i = 0; i < r->n_metrics; i++)
		if (strcmp(r->metrics[i].name, "test_loss")) {
			names[n] = r->metrics[i].name;
			values[n++] = r->metrics[i].value;
		}
	if (r->n_classes && !program_report_metric(r, "accuracy")) {
		long long total = 0, right = 0;
		for (int i = 0; i < r->n_classes; i++)
			for (int j = 0; j < r->n_classes; j++) {
				total += r->confusion[(size_t)i * r->n_classes + j];
				right += i == j ? r->confusion[(size_t)i * r->n_classes + j] : 0;
			}
		if (total) {
			names[n] = "accuracy";
			values[n++] = (double)right / (double)total;
		}
	}
	dlk_train_metrics_test(s->metrics, program_report_metric(r, "test_loss"), names, values, n);
}

static void on_line(void *ud, int local, int rank, char *line, size_t n)
{
	struct sup *s = ud;
	struct program_report r = PROGRAM_REPORT_INIT;
	char why[256], text[512];
	int rc = program_protocol_parse(line, n, &r, why, sizeof(why));
	/* a pod of one process: its log is its rank's, which `dlk logs` and the archive's reader
	 * name already; several processes in a pod keep their own ranks */
	int shown = s->in_pod && s->started == 1 ? -1 : rank;

	if (rc == 0) {
		s->view->line(s->view->ud, local, shown, line, n);
		return;
	}
	if (rc < 0) {
		if (local < DLK_GANG_MAX_WORKERS && !s->warned[local]++) {
			int k = snprintf(text, sizeof(text), "warning: a progress line was ignored: %s", why);
			s->view->line(s->view->ud, local, shown, text, (size_t)k);
		}
		return;
	}
	if (rank != 0) {
		/* rank 0 speaks for the gang, as in dlk's own runs */
		program_report_release(&r);
		return;
	}
	if (r.has_loss && r.event == PROGRAM_EV_STEP) {
		s->loss = r.loss;
		s->has_loss = 1;
	} else if (r.has_loss) {
		/* an epoch's or the run's: the training loss the record keeps */
		s->loss = r.loss;
		s->has_loss = 1;
	}
	if (r.epoch >= 0)
		s->epoch = r.epoch;
	if (r.epochs > 0)
		s->epochs = r.epochs;
	if (r.step >= 0)
		s->step = r.step;
	if (r.steps > 0)
		s->steps = r.steps;
	if (r.samples_per_s >= 0)
		s->samples_per_s = r.samples_per_s;
	if (r.model) {
		free(s->model);
		s->model = xstrdup(r.model);
	}
	feed_metrics(s, &r);
	if (r.n_metrics || r.n_classes) {
		program_report_release(&s->last_eval);
		s->last_eval = r;
		r = (struct program_report)PROGRAM_REPORT_INIT;
	}
	/* the progress line, drawn in place on a terminal */
	int k = snprintf(text, sizeof(text), "step %lld", s->step);
	if (s->epoch > 0)
		k += snprintf(text + k, sizeof(text) - (size_t)k, ", epoch %d%s%.0d", s->epoch, s->epochs > 0 ? "/" : "",
		              s->epochs > 0 ? s->epochs : 0);
	if (s->has_loss)
		k += snprintf(text + k, sizeof(text) - (size_t)k, ", loss %.4g", s->loss);
	if (r.samples_per_s >= 0)
		k += snprintf(text + k, sizeof(text) - (size_t)k, ", %.0f samples/s", r.samples_per_s);
	if (s->view->progress)
		s->view->progress(s->view->ud, local, rank, text, (size_t)k);
	if (s->jp)
		publish_progress(s, &r);
	program_report_release(&r);
}

static void on_progress(void *ud, int local, int rank, char *line, size_t n)
{
	struct sup *s = ud;
	if (s->view->progress)
		s->view->progress(s->view->ud, local, rank, line, n);
}

static void on_ended(void *ud)
{
	struct sup *s = ud;
	s->gens++;
	if (s->view->ended)
		s->view->ended(s->view->ud);
}

static int on_restarts(void *ud, int status)
{
	struct sup *s = ud;
	return dlk_program_restarts(&s->spec->program, status);
}

/* The run document of what the program reported, checked as a bundle's would be. */
/* data.dataset as the run's data: one entry, the dataset's id as its digest (the id is the
 * sha256 of its manifest, which names every file's sha256: DLK_DATA_DIR was verified against it),
 * what --if-data-changed, `dlk impact` and `dlk status --compare` read; NULL without one */
static cJSON *dataset_data(const struct sup *s)
{
	cJSON *a, *d;
	char *url;

	if (!s->view->data_id)
		return NULL;
	a = cJSON_CreateArray();
	d = cJSON_CreateObject();
	url = s->spec->data.dataset.tag ? xasprintf("%s (%s)", s->spec->data.store ? s->spec->data.store : "",
	                                            s->spec->data.dataset.tag)
	                                : xstrdup(s->spec->data.store ? s->spec->data.store : "");
	cJSON_AddStringToObject(d, "split", "dataset");
	cJSON_AddStringToObject(d, "url", url);
	cJSON_AddStringToObject(d, "sha256", s->view->data_id);
	cJSON_AddItemToArray(a, d);
	free(url);
	return a;
}

static cJSON *on_run_doc(void *ud)
{
	struct sup *s = ud;
	const struct program_report *e = &s->last_eval;
	cJSON *meta = cJSON_CreateObject(), *m, *p, *doc;
	struct dlk_err err = DLK_ERR_INIT;
	const double *acc = program_report_metric(e, "accuracy");
	const double *tl = program_report_metric(e, "test_loss");

	cJSON_AddStringToObject(meta, "format", "dlk-model");
	cJSON_AddStringToObject(meta, "name", s->spec->name);
	m = cJSON_AddObjectToObject(meta, "metrics");
	if (s->has_loss)
		cJSON_AddNumberToObject(m, "train_loss", s->loss);
	const double *ts = program_report_metric(e, "test_samples");
	/* the test section (what `dlk report` draws and the promotion gate reads) needs the
	 * evaluation's loss and its samples: a confusion matrix counts them */
	if (tl && e->n_classes) {
		int k = e->n_classes;
		long long total = 0, right = 0;
		double *prec = xcalloc((size_t)k, sizeof(double)), *rec = xcalloc((size_t)k, sizeof(double));
		cJSON *cm = cJSON_CreateArray(), *cl = cJSON_AddArrayToObject(meta, "classes");
		for (int i = 0; i < k; i++) {
			long long row = 0, col = 0;
			cJSON *rj = cJSON_CreateArray();
			char name[16];
			for (int j = 0; j < k; j++) {
				row += e->confusion[(size_t)i * k + j];
				col += e->confusion[(size_t)j * k + i];
				cJSON_AddItemToArray(rj, cJSON_CreateNumber((double)e->confusion[(size_t)i * k + j]));
			}
			cJSON_AddItemToArray(cm, rj);
			total += row;
			right += e->confusion[(size_t)i * k + i];
			rec[i] = row ? (double)e->confusion[(size_t)i * k + i] / (double)row : 0;
			prec[i] = col ? (double)e->confusion[(size_t)i * k + i] / (double)col : 0;
			snprintf(name, sizeof(name), "%d", i);
			cJSON_AddItemToArray(cl, cJSON_CreateString(s->spec->data.n_classes == k ? s->spec->data.classes[i] : name));
		}
		/* the matrix is the one source of the accuracy, precision and recall */
		cJSON_AddNumberToObject(m, "test_samples", (double)total);
		cJSON_AddNumberToObject(m, "test_accuracy", total ? (double)right / (double)total : 0);
		cJSON_AddNumberToObject(m, "test_loss", *tl);
		cJSON_AddItemToObject(m, "precision", cJSON_CreateDoubleArray(prec, k));
		cJSON_AddItemToObject(m, "recall", cJSON_CreateDoubleArray(rec, k));
		cJSON_AddItemToObject(m, "confusion_matrix", cm);
		free(prec);
		free(rec);
	} else if (tl && acc && ts && *acc >= 0 && *acc <= 1) {
		cJSON_AddNumberToObject(m, "test_samples", *ts);
		cJSON_AddNumberToObject(m, "test_accuracy", *acc);
		cJSON_AddNumberToObject(m, "test_loss", *tl);
	} else if (acc || e->n_classes) {
		dlk_trainer_warn(s->sink, "the program reported an evaluation without metrics.test_loss (and "
		                 "metrics.test_samples or a confusion matrix): its record and report have no test results");
	}
	if (e->n_metrics) {
		cJSON *pm = cJSON_AddObjectToObject(m, "program");
		for (int i = 0; i < e->n_metrics; i++)
			cJSON_AddNumberToObject(pm, e->metrics[i].name, e->metrics[i].value);
	}
	p = cJSON_AddObjectToObject(meta, "provenance");
	{
		cJSON *data = dataset_data(s);
		cJSON_AddItemToObject(p, "data", data ? data : cJSON_CreateArray());
		if (data) {
			/* the dataset, as a dlk run's bundle names it: what `dlk lineage` and `dlk data get` need */
			cJSON *ds = cJSON_AddObjectToObject(p, "dataset");
			char *id = xasprintf("sha256:%s", s->view->data_id);
			cJSON_AddStringToObject(ds, "id", id);
			free(id);
			if (s->spec->data.dataset.tag)
				cJSON_AddStringToObject(ds, "tag", s->spec->data.dataset.tag);
			if (s->spec->data.store)
				cJSON_AddStringToObject(ds, "store", s->spec->data.store);
		}
	}
	if (s->code_sha256[0])
		cJSON_AddStringToObject(p, "code_sha256", s->code_sha256);
	if (s->model)
		cJSON_AddStringToObject(p, "model", s->model);
	cJSON_AddStringToObject(p, "framework", dlk_framework_name(s->spec->program.framework));
	doc = report_run_from_meta(meta, "program", s->model, &err);
	if (!doc)
		dlk_trainer_warn(s->sink, "the run's record has no metrics: %s", err.msg);
	cJSON_Delete(meta);
	return doc;
}

/* a line of a process's progress file: a report as if it came on the output; anything else in
 * the file is not the protocol's, and is passed over */
struct file_line {
	struct sup *s;
	int local;
};

static void on_file_line(void *ud, char *line, size_t n)
{
	struct file_line *f = ud;
	struct sup *s = f->s;

	if (n < strlen(PROGRAM_PROTOCOL_PREFIX) || memcmp(line, PROGRAM_PROTOCOL_PREFIX, strlen(PROGRAM_PROTOCOL_PREFIX)))
		return;
	on_line(s, f->local, (s->in_pod ? s->node_rank * s->started : 0) + f->local, line, n);
}

static void on_tick(void *ud, int ended)
{
	struct sup *s = ud;

	/* scrapes are answered here, on the gang's loop */
	dlk_train_metrics_poll(s->metrics);
	/* a new generation runs: the gang was started again */
	if (!ended)
		dlk_train_metrics_restarts(s->metrics, s->gens);
	for (int i = 0; i < s->n_progress; i++) {
		struct file_line f = { s, i };
		progfile_poll(&s->progress[i], on_file_line, &f, ended);
	}
	/* the processes' GPUs, on the progress's cadence (a few NVML calls) */
	if (program_gpus_sample(s->gpus, ended)) {
		int ng;
		const struct dlk_rank_gpu *g = program_gpus_last(s->gpus, &ng);
		for (int i = 0; i < ng; i++)
			dlk_train_metrics_rank_gpu(s->metrics, &g[i]);
		if (!s->in_pod)
			local_progress(s);
	}
}

static void gpu_info(void *ud, int rank, int gpu, const char *bus)
{
	struct sup *s = ud;
	dlk_trainer_info(s->sink, "rank %d: samples GPU %d (PCI %s)", rank, gpu, dlk_visible(bus));
}

/* The GPUs of the gang's ranks here (resources.gpus given): n ranks from first_rank, per_node a
 * node. Why none is told with -v. */
static void gpus_open(struct sup *s, int first_rank, int n, int verbose)
{
	char why[512] = "";

	if (s->spec->resources.gpus <= 0)
		return;
	s->gpus = program_gpus_open(&s->spec->program, first_rank, n, s->ppn, verbose ? gpu_info : NULL, s, why,
	                            sizeof(why));
	if (!s->gpus && verbose)
		dlk_trainer_info(s->sink, "no GPU figures of the program's processes: %s", why);
}

/* A directory of the supervisor's own (under TMPDIR, else /tmp) with a progress file for each of
 * its n processes. A directory that cannot be made only leaves DLK_PROGRESS_FILE unset. */
static void progress_open(struct sup *s, int n, const struct dlk_trainer_sink *sink)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = dlk_mkdtemp("dlk-progress", &err);

	if (!dir) {
		dlk_trainer_warn(sink, "DLK_PROGRESS_FILE is not set: %s", err.msg);
		return;
	}
	s->progress_dir = dir;
	s->n_progress = n < DLK_GANG_MAX_WORKERS ? n : DLK_GANG_MAX_WORKERS;
	for (int i = 0; i < s->n_progress; i++) {
		char *p = xasprintf("%s/progress-%d", dir, i);
		progfile_open(&s->progress[i], p);
		free(p);
	}
}

static void progress_close(struct sup *s)
{
	for (int i = 0; i < s->n_progress; i++) {
		unlink(s->progress[i].path);
		progfile_release(&s->progress[i]);
	}
	if (s->progress_dir)
		rmdir(s->progress_dir);
	free(s->progress_dir);
	s->progress_dir = NULL;
	s->n_progress = 0;
}

/* The gang's Prometheus metrics on port (0: none), served by the supervisor for its processes
 * (first_rank of world): what rank 0 reports, when rank 0 is one of them. A port that cannot be
 * bound is an error here (it was asked for), a warning in a pod (the program runs without). */
static int metrics_start(struct sup *s, int port, int first_rank, int world, int restarts, struct dlk_err *err)
{
	if (port <= 0)
		return 0;
	/* no thread of its own: the processes are forked from this one, and set up before they
	 * exec (a second thread could hold a lock at the fork that a child would wait on forever) */
	s->metrics = dlk_train_metrics_start_polled(port, first_rank, world, getenv(DLK_ENV_JOB_NAME), restarts, err);
	if (!s->metrics && s->in_pod) {
		dlk_trainer_warn(s->sink, "no metrics (the program runs without them): %s", err->msg);
		dlk_err_clear(err);
		return 0;
	}
	if (!s->metrics)
		return -1;
	if (!s->in_pod)
		dlk_trainer_info(s->sink, "metrics on http://127.0.0.1:%d/metrics", dlk_train_metrics_port(s->metrics));
	return 0;
}

static void metrics_stop(struct sup *s)
{
	dlk_train_metrics_done(s->metrics);
	dlk_train_metrics_stop(s->metrics);
	s->metrics = NULL;
}

int dlk_program_local(const struct dlk_trainer_opts *opts, const struct dlk_project *spec,
                      const struct dlk_program_view *view, const struct dlk_trainer_sink *sink, struct dlk_err *err)
{
	const struct dlk_program *p = &spec->program;
	struct sup s = { .opts = opts, .spec = spec, .view = view, .sink = sink, .epoch = -1, .step = 0, .samples_per_s = -1 };
	struct dlk_gang_hooks hooks = { on_worker, on_line, on_progress, on_ended, &s, on_restarts, on_run_doc, on_tick };
	struct dlk_gang_output out = { 0 };
	struct dlk_trainer_opts o = *opts;
	char *out_dir;
	int rc;

	s.last_eval = (struct program_report)PROGRAM_REPORT_INIT;
	s.nodes = opts->workers > 0 ? opts->workers : 1;
	/* here, 0 (one per GPU) is one process: the CPU */
	s.ppn = p->procs_per_worker > 0 ? p->procs_per_worker : (spec->resources.gpus > 0 ? spec->resources.gpus : 1);
	s.started = program_procs_started(p, s.ppn);
	if ((long)s.nodes * s.started > DLK_GANG_MAX_WORKERS)
		return dlk_errf(err, DLK_EXIT_USAGE, "%d workers of %d processes are more than %d processes on one machine",
		                s.nodes, s.started, DLK_GANG_MAX_WORKERS);
	/* absolute: the program runs in its code's directory, and finds them from there */
	{
		char *d = dlk_dir_of(opts->spec_file), *abs = realpath(d, NULL);
		s.project_dir = abs ? abs : xstrdup(d);
		free(d);
	}
	s.code_dir = p->code ? xasprintf("%s/%s", s.project_dir, p->code) : xstrdup(s.project_dir);
	if (p->code && dlk_program_code_digest(s.code_dir, s.code_sha256, err)) {
		rc = err->code ? err->code : DLK_EXIT_CONFIG;
		goto out;
	}
	{
		char *rel = dlk_trainer_output_dir(spec, opts->spec_file, 0);
		out_dir = rel[0] == '/' ? xstrdup(rel) : xasprintf("%s/%s", s.project_dir, rel);
		free(rel);
	}
	{
		char *rel = dlk_trainer_ckpt_base(spec, opts->spec_file, 0);
		s.ckpt_base = !rel ? xasprintf("%s/.dlk/checkpoints/%s", out_dir, spec->name)
		              : rel[0] == '/' ? xstrdup(rel) : xasprintf("%s/%s", s.project_dir, rel);
		free(rel);
	}
	s.out_base = xasprintf("%s/.dlk/outputs/%s", out_dir, spec->name);
	free(out_dir);
	o.workers = s.nodes * s.started;
	o.code_sha256 = s.code_sha256[0] ? s.code_sha256 : NULL;
	if (metrics_start(&s, view->metrics_port, 0, o.workers, 0, err)) {
		rc = err->code ? err->code : DLK_EXIT_FAIL;
		goto out;
	}
	progress_open(&s, o.workers, sink);
	/* every rank here: node k's are k * ppn .. (under torchrun, the ranks its one process starts) */
	gpus_open(&s, 0, s.nodes * s.ppn, view->verbose);
	rc = dlk_trainer_gang(&o, spec, out, &hooks, sink, err);
	program_gpus_close(s.gpus);
	progress_close(&s);
	metrics_stop(&s);
out:
	program_report_release(&s.last_eval);
	free(s.model);
	free(s.project_dir);
	free(s.code_dir);
	free(s.ckpt_base);
	free(s.out_base);
	return rc;
}

/* JOB-i.SERVICE for each node, when rank 0's address is JOB-0.SERVICE (the Indexed Job's pod
 * names); DLK_PEERS (comma-separated) when the pod is given it. NULL when neither says. */
static char **pod_peers(const char *master, int n)
{
	const char *given = getenv("DLK_PEERS"), *dot = strchr(master, '.');
	char **v = xcalloc((size_t)n + 1, sizeof(*v));
	int k = 0;

	if (given && *given) {
		char *copy = xstrdup(given), *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t && k < n; t = strtok_r(NULL, ",", &save))
			v[k++] = xstrdup(t);
		free(copy);
	} else if (dot && dot - master >= 2 && !strncmp(dot - 2, "-0", 2)) {
		for (; k < n; k++)
			v[k] = xasprintf("%.*s-%d%s", (int)(dot - 2 - master), master, k, dot);
	}
	if (k == n)
		return v;
	for (int i = 0; i < k; i++)
		free(v[i]);
	free(v);
	return NULL;
}

/* a signal while the pod waits for its peers' names */
static volatile sig_atomic_t wait_sig;

static void on_wait_signal(int sig)
{
	wait_sig = sig;
}

int dlk_program_pod(const struct dlk_project *spec, const char *spec_file, const struct dlk_program_view *view,
                    const struct dlk_trainer_sink *sink, struct dlk_err *err)
{
	const struct dlk_program *p = &spec->program;
	struct sup s = { .spec = spec, .view = view, .sink = sink, .epoch = -1, .in_pod = 1, .samples_per_s = -1 };
	struct dlk_gang_hooks hooks = { on_worker, on_line, on_progress, on_ended, &s, on_restarts, NULL, on_tick };
	struct dlk_gang_output out = { 0 };
	struct dlk_train_run run = DLK_TRAIN_RUN_INIT;
	struct dist_env env;
	char digest[65];
	int rc, gone = 0;

	s.last_eval = (struct program_report)PROGRAM_REPORT_INIT;
	if (dist_env_read(&env, err))
		return err->code ? err->code : DLK_EXIT_CONFIG;
	s.nodes = env.world;
	s.node_rank = env.rank;
	snprintf(s.master, sizeof(s.master), "%s", env.master_addr[0] ? env.master_addr : "127.0.0.1");
	s.port = p->port;
	s.peers = env.world > 1 ? pod_peers(s.master, env.world) : NULL;
	s.ppn = p->procs_per_worker > 0 ? p->procs_per_worker : (spec->resources.gpus > 0 ? spec->resources.gpus : 1);
	s.started = program_procs_started(p, s.ppn);
	s.code_dir = p->workdir ? xstrdup(p->workdir) : NULL;
	{
		char *o = dlk_trainer_output_dir(spec, spec_file, 1);
		s.ckpt_base = dlk_trainer_ckpt_base(spec, spec_file, 1);
		if (!s.ckpt_base)
			s.ckpt_base = xasprintf("%s/checkpoints", o);
		s.out_base = xasprintf("%s/outputs", o);
		free(o);
	}
	/* rank 0's pod keeps the record, as dlk's own rank 0 does: from the start, so that a pod
	 * stopped while it waits for its peers (another rank's fatal code failed the Job) still
	 * ends it with the cause */
	project_digest(spec, digest);
	if (env.rank == 0)
		dlk_train_run_open_cluster(&run, sink, spec, digest, env.world);
	/* the code the submitter shipped (the pod's ConfigMap, named by this digest) */
	if (run.rec && getenv(DLK_ENV_CODE_SHA256) && dlk_sha256_is_hex(getenv(DLK_ENV_CODE_SHA256))) {
		dlk_run_set_str(run.rec, "code_sha256", getenv(DLK_ENV_CODE_SHA256));
		dlk_train_run_save(&run);
	}
	/* the data from the start: a run that fails still says what it read */
	if (run.rec && view->data_id) {
		dlk_run_set_item(run.rec, "data", dataset_data(&s));
		dlk_train_run_save(&run);
	}
	/* a retry of this rank whose peers have completed would wait for names no longer
	 * published, then fail the same way at every retry: it says so at once */
	if (env.world > 1 && dlk_train_gang_gone(sink, env.rank, err)) {
		rc = err->code;
		gone = 1;
		goto end;
	}
	/* the program's rendezvous looks rank 0 up once and fails for good when its name is not
	 * published yet: every peer's name (else rank 0's) resolves first; a SIGTERM (the pod
	 * stopped) or SIGINT ends the wait */
	if (env.world > 1) {
		const char *m = s.master;
		struct sigaction sa = { 0 }, old_term, old_int;
		int w;
		sa.sa_handler = on_wait_signal;
		sigemptyset(&sa.sa_mask);
		wait_sig = 0;
		sigaction(SIGTERM, &sa, &old_term);
		sigaction(SIGINT, &sa, &old_int);
		w = dlk_gang_wait_names_until(s.peers ? (const char *const *)s.peers : &m, s.peers ? s.nodes : 1,
		                              DLK_GANG_WAIT_MS, &wait_sig, err);
		sigaction(SIGTERM, &old_term, NULL);
		sigaction(SIGINT, &old_int, NULL);
		if (w) {
			rc = err->code;
			goto end;
		}
	}
	{
		/* the pod's port (resources.metrics_port, which the Job passes); the restarts so far */
		const char *mp = getenv(DLK_ENV_METRICS_PORT), *gen = getenv(DLK_ENV_GENERATION);
		int port = mp ? atoi(mp) : 0;
		s.gens = gen ? atoi(gen) : 0;
		if (port > 0 && port <= 65535)
			metrics_start(&s, port, env.rank * s.started, env.world * s.started, s.gens, err);
	}
	progress_open(&s, s.started, sink);
	gpus_open(&s, env.rank * s.ppn, s.ppn, view->verbose);
	if (env.rank == 0)
		s.jp = dlk_job_progress_new(sink);
	rc = dlk_trainer_pod_gang(spec, s.started, out, &hooks, err);
	program_gpus_close(s.gpus);
	s.gpus = NULL;
	if (!rc && s.jp) {
		/* the run document on the Job (dlk.dev/metrics), as a dlk run publishes it: what
		 * `dlk report JOB` and the promotion gate read of a job */
		cJSON *doc = on_run_doc(&s);
		char *m = doc ? report_run_compact(doc, DLK_METRICS_MAX_BYTES) : NULL;
		if (m)
			dlk_job_progress_metrics(s.jp, m);
		free(m);
		cJSON_Delete(doc);
	}
	dlk_job_progress_free(s.jp);
	s.jp = NULL;
	progress_close(&s);
	metrics_stop(&s);
end:
	if (env.rank == 0 && run.rec) {
		if (gone) {
			dlk_train_run_finish(&run, DLK_RUN_FAILED, env.rank, rc, err->msg);
		} else if (!rc) {
			cJSON *doc = on_run_doc(&s);
			if (doc)
				dlk_train_run_set_result(&run, doc, NULL);
			cJSON_Delete(doc);
			dlk_train_run_finish(&run, DLK_RUN_SUCCEEDED, -1, 0, NULL);
		} else if (rc != DLK_EXIT_RESTARTABLE && !dlk_program_restarts(p, rc << 8)) {
			dlk_train_run_finish(&run, DLK_RUN_FAILED, env.rank, rc, err->msg);
		} else if (rc == DLK_EXIT_RESTARTABLE) {
			/* stopped: when another rank's fatal code failed the Job (its podFailurePolicy
			 * deletes this pod), that rank published why on the Job before it exited, and
			 * the run ends "failed" with its cause instead of staying "running" */
			struct dlk_failure f;
			if (!dlk_train_job_failure(sink, &f) && f.rank != env.rank && f.exit_code &&
			    !dlk_program_restarts(p, (f.exit_code & 0xff) << 8))
				dlk_train_run_finish(&run, DLK_RUN_FAILED, f.rank, f.exit_code, f.message);
		}
	}
	dlk_train_run_release(&run);
	for (int i = 0; s.peers && i < s.nodes; i++)
		free(s.peers[i]);
	free(s.peers);
	program_report_release(&s.last_eval);
	free(s.model);
	free(s.code_dir);
	free(s.ckpt_base);
	free(s.out_base);
	return rc;
}
