/* The cluster and the stores as the commands reach them (see cluster.h). */
#include "commands/cluster.h"
#include "commands/ui.h"
#include "lib/jobs/cronjob.h"
#include "lib/jobs/logline.h"
#include "lib/kube/api.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/servestate.h"
#include "lib/project/project.h"
#include "lib/runs/runs.h"
#include "lib/store/store.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
	/* a second Ctrl-C is the user insisting: let it kill us */
	signal(SIGINT, SIG_DFL);
}

void dlk_interrupt_catch(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

int dlk_interrupted(void)
{
	return interrupted;
}

static int cancel_hook(void *ud)
{
	(void)ud;
	return interrupted;
}

static void log_line(void *ud, const char *line)
{
	(void)ud;
	/* one fprintf per line: stderr is unbuffered and locked per call, so threads do not mix; the
	 * line may quote the cluster: its control characters are shown, not obeyed */
	fprintf(stderr, "%s\n", dlk_visible(line));
}

void dlk_kube_open_opts(const struct dlk_ctx *ctx, struct kube_open_opts *o)
{
	static const struct kube_open_opts init = KUBE_OPEN_OPTS_INIT;

	*o = init;
	o->config.kubeconfig = ctx->kubeconfig;
	o->config.context = ctx->context;
	o->config.namespace = ctx->namespace_;
	/* -v says more about what dlk does; -vv shows each request (kubectl -v=6), -vvv headers */
	o->client.verbosity = ctx->verbose >= 3 ? 8 : ctx->verbose >= 2 ? 6 : 0;
	o->client.log = log_line;
	o->client.cancel = cancel_hook;
}

struct kube_client *dlk_kube_client(const struct dlk_ctx *ctx, struct dlk_err *err)
{
	struct kube_open_opts o;
	struct kube_client *c;
	static int warned;

	dlk_kube_open_opts(ctx, &o);
	c = kube_client_open(&o, err);
	if (c && kube_client_config_warning(c) && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		dlk_warn(ctx, "%s", kube_client_config_warning(c));
	return c;
}

void dlk_kube_warnings(const struct dlk_ctx *ctx, struct kube_client *c)
{
	char **w = kube_client_take_warnings(c);

	for (size_t i = 0; w && w[i]; i++) {
		dlk_warn(ctx, "the API server says: %s", w[i]);
		free(w[i]);
	}
	free(w);
}

void dlk_kube_close(const struct dlk_ctx *ctx, struct kube_client *c)
{
	if (!c)
		return;
	dlk_kube_warnings(ctx, c);
	kube_client_free(c);
}

int dlk_watch_jobs(const struct dlk_ctx *ctx, struct dlk_jobwatch *w, const char *ns, const char *name,
                   struct dlk_err *err)
{
	struct kube_open_opts open;

	dlk_interrupt_catch();
	dlk_kube_open_opts(ctx, &open);
	return dlk_jobwatch_start(w, &open, ns, name, err);
}

int dlk_job_not_found(const struct dlk_ctx *ctx, const struct kube_client *c, const char *ns, const char *name,
                      struct dlk_err *err)
{
	dlk_errf(err, DLK_EXIT_NOTFOUND, "job '%s' not found in namespace '%s'", name, ns);
	return dlk_err_hint(err, "list the jobs with 'dlk status%s'", dlk_ns_flag(ctx, c, ns));
}

int dlk_read_job(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, cJSON **job,
                 struct dlk_err *err)
{
	if (kube_get(c, "Job", ns, name, job, err) < 0) {
		if (err->code == DLK_EXIT_NOTFOUND)
			dlk_job_not_found(ctx, c, ns, name, err);
		return -1;
	}
	return 0;
}

int dlk_read_cronjob(struct kube_client *c, const char *ns, const char *name, cJSON **cronjob, cJSON **jobs,
                     cJSON **runs, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	char *sel = NULL;
	int rc = -1;

	*cronjob = *jobs = *runs = NULL;
	if (kube_get(c, "CronJob", ns, name, cronjob, err) < 0)
		return -1;
	/* its runs carry the job template's labels: dlk.dev/job=NAME */
	sel = dlk_job_selector(name);
	lo.label_selector = sel;
	if (kube_list(c, "Job", ns, &lo, jobs, err) < 0) {
		cJSON_Delete(*cronjob);
		*cronjob = NULL;
		goto out;
	}
	*runs = dlk_cron_runs(cJSON_GetObjectItemCaseSensitive(*jobs, "items"), *cronjob);
	rc = 0;
out:
	free(sel);
	return rc;
}

int dlk_watch_run(const struct dlk_ctx *ctx, struct dlk_jobwatch *w, const char *ns, const char *run,
                  const char *project, struct dlk_err *err)
{
	struct kube_open_opts open;

	dlk_interrupt_catch();
	dlk_kube_open_opts(ctx, &open);
	return dlk_jobwatch_start_run(w, &open, ns, run, project, err);
}

const char *dlk_ns_flag(const struct dlk_ctx *ctx, const struct kube_client *c, const char *ns)
{
	static __thread char buf[96];

	if (!ns || (!ctx->namespace_ && !strcmp(ns, kube_client_namespace(c))))
		return "";
	snprintf(buf, sizeof(buf), " -n %s", ns);
	return buf;
}

/* The value of a global option on a completion line: "--name v", "--name=v" or "-s v". */
static const char *line_option(int argc, char **argv, const char *name, char short_name)
{
	size_t n = strlen(name);

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-')
			continue;
		if (a[1] == '-' && !strncmp(a + 2, name, n)) {
			if (a[2 + n] == '=')
				return a + 3 + n;
			if (!a[2 + n] && i + 1 < argc)
				return argv[i + 1];
		}
		if (short_name && a[1] == short_name && !a[2] && i + 1 < argc)
			return argv[i + 1];
	}
	return NULL;
}

void dlk_complete_run_ids(int argc, char **argv, const char *cur)
{
	const char *file = line_option(argc, argv, "file", 'f');
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = project_load(file ? file : "dlk.yaml", NULL, 0, &err);
	struct dlk_run_store *s = NULL;
	cJSON *recs = NULL;
	const cJSON *it;
	char *dir = NULL;

	if (!spec)
		return;
	dir = dlk_runs_local_dir(spec->path, spec->name);
	s = dlk_runs_open_dir(dir, spec->name);
	if (s && dlk_runs_list(s, &recs, NULL, NULL, &err) == 0)
		cJSON_ArrayForEach(it, recs) {
			const char *id = dlk_run_id(it);
			if (id && !strncmp(id, cur ? cur : "", strlen(cur ? cur : "")))
				printf("%s\n", id);
		}
	cJSON_Delete(recs);
	if (s)
		dlk_runs_close(s);
	free(dir);
	project_free(spec);
}

void dlk_complete_job_names(int argc, char **argv, const char *cur)
{
	struct kube_open_opts o = KUBE_OPEN_OPTS_INIT;
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	cJSON *list = NULL;
	const cJSON *it;

	o.config.kubeconfig = line_option(argc, argv, "kubeconfig", 0);
	o.config.context = line_option(argc, argv, "context", 0);
	o.config.namespace = line_option(argc, argv, "namespace", 'n');
	/* a completion must come back at once and never print an error into the user's line */
	o.client.connect_timeout_ms = 1000;
	o.client.timeout_ms = 2000;
	o.client.max_retries = 0;
	if (!(c = kube_client_open(&o, &err)))
		goto out;
	lo.label_selector = DLK_LABEL_JOB;
	if (kube_list(c, "Job", NULL, &lo, &list, &err) < 0)
		goto out;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
		const char *n = kube_meta(it, "name");
		if (n && !strncmp(n, cur ? cur : "", strlen(cur ? cur : "")))
			printf("%s\n", dlk_visible(n));
	}
	/* the scheduled projects (their CronJobs) */
	cJSON *crons = NULL;
	if (kube_list(c, "CronJob", NULL, &lo, &crons, &err) == 0) {
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(crons, "items")) {
			const char *n = kube_meta(it, "name");
			if (n && !strncmp(n, cur ? cur : "", strlen(cur ? cur : "")))
				printf("%s\n", dlk_visible(n));
		}
	}
	cJSON_Delete(crons);
	/* and the served models (their stable Deployments), unless a job has the name */
	cJSON *served = NULL;
	lo.label_selector = DLK_LABEL_SERVE "," DLK_LABEL_TRACK "=stable";
	if (kube_list(c, "Deployment", NULL, &lo, &served, &err) == 0) {
		const cJSON *d, *j;
		cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(served, "items")) {
			const cJSON *l = cJSON_GetObjectItemCaseSensitive(
			        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "metadata"), "labels"),
			        DLK_LABEL_SERVE);
			int dup = 0;
			if (!cJSON_IsString(l) || strncmp(l->valuestring, cur ? cur : "", strlen(cur ? cur : "")))
				continue;
			cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(list, "items"))
				if (kube_meta(j, "name") && !strcmp(kube_meta(j, "name"), l->valuestring))
					dup = 1;
			if (!dup)
				printf("%s\n", dlk_visible(l->valuestring));
		}
	}
	cJSON_Delete(served);
out:
	cJSON_Delete(list);
	kube_client_free(c);
}

static const char *const rank_colors[] = { "\033[36m", "\033[32m", "\033[35m", "\033[34m", "\033[33m", "\033[96m" };
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

void dlk_print_log_line(void *vctx, int rank, const char *line, size_t len)
{
	const struct dlk_ctx *ctx = vctx;
	char text[4096];

	/* a worker that logs JSON (logging.format) reads as one that logs text; -o json keeps it */
	if (ctx->output != DLK_OUTPUT_JSON && dlk_logline_text(line, len, text, sizeof(text))) {
		line = text;
		len = strlen(text);
	}

	/* several streams print at once: one line at a time, whole; a pod's line shows its control
	 * characters instead of moving the cursor or retitling the terminal */
	struct dlk_buf v = DLK_BUF_INIT;
	dlk_buf_add_visible(&v, line, len, 1);
	pthread_mutex_lock(&out_mu);
	if (ctx->color_out)
		printf("%s[rank %d]\033[0m %s\n", rank_colors[rank % 6], rank, v.data);
	else
		printf("[rank %d] %s\n", rank, v.data);
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
	dlk_buf_release(&v);
}

void dlk_print_note(void *ctx, const char *msg)
{
	dlk_warn(ctx, "%s", msg);
}

void dlk_print_deleted(void *vctx, const char *kind, const char *name)
{
	const struct dlk_ctx *ctx = vctx;

	if (ctx->verbose)
		dlk_info(ctx, "deleted %s/%s", kind, name);
}

static void store_log(void *vctx, const char *line)
{
	(void)vctx;
	fprintf(stderr, "%s\n", dlk_visible(line));
}

void dlk_data_store_release(struct dlk_data_store *ds)
{
	dlk_store_close(ds->store);
	if (ds->kube)
		kube_client_free(ds->kube);
	free(ds->base_dir);
	memset(ds, 0, sizeof(*ds));
}

int dlk_data_store_open(const struct dlk_ctx *ctx, const char *url, const struct dlk_project *spec,
                        struct dlk_data_store *ds, struct dlk_err *err)
{
	struct dlk_store_opts o = { 0 };
	const char *image = spec ? spec->image : "dlk:" DLK_VERSION;

	memset(ds, 0, sizeof(*ds));
	if (!url && spec && spec->data.store) {
		url = spec->data.store;
		/* a relative directory in the project file is relative to the project file */
		ds->base_dir = dlk_dir_of(spec->path ? spec->path : ctx->file);
	}
	if (!url) {
		dlk_errf(err, DLK_EXIT_USAGE, "no data store: name one");
		return dlk_err_hint(err, "give --to/--from STORE (a directory, s3://BUCKET/PREFIX, pvc://CLAIM/PATH), or "
		                         "set data.store in %s", ctx->file);
	}
	o.base_dir = ds->base_dir;
	if (ctx->verbose >= 2) {
		o.log = store_log;
		o.log_ctx = NULL;
	}
	if (!strncmp(url, "pvc://", 6)) {
		ds->kube = dlk_kube_client(ctx, err);
		if (!ds->kube)
			return -1;
		o.kube = ds->kube;
		o.namespace_ = kube_namespace_pick(ctx->namespace_, spec ? spec->namespace_ : NULL,
		                                   kube_client_namespace(ds->kube));
		o.image = image;
		if (getenv("DLK_STORE_POD_TIMEOUT"))
			o.pod_timeout_s = atoi(getenv("DLK_STORE_POD_TIMEOUT"));
	}
	ds->store = dlk_store_open(url, &o, err);
	return ds->store ? 0 : -1;
}

int dlk_data_maybe_project(const struct dlk_ctx *ctx, const char *url, struct dlk_project **spec, struct dlk_err *err)
{
	struct stat st;

	*spec = NULL;
	if (url && strncmp(url, "pvc://", 6))
		return 0;
	if (stat(ctx->file, &st) < 0 && errno == ENOENT)
		return 0;
	*spec = dlk_ctx_load_spec(ctx, err);
	return *spec ? 0 : -1;
}
