/* Running a pipeline here: each stage in dependency order is either reused (an earlier run with
 * the same key left its output in the store) or run as a process (the user's program, or this
 * very dlk binary for train and predict), its inputs fetched from the store into a work
 * directory, its output pushed back as a dataset with its provenance. What a stage's key covers
 * is what decides that its output may stand for a new run, so it covers everything the process
 * reads: the inputs' ids, the argv, the code files' bytes, the image, the parameters, and for
 * dlk's own steps the project file and the dlk binary. */
#include "lib/jobs/podenv.h"
#include "lib/pipeline/pipeline.h"
#include "lib/runs/runs.h"
#include "lib/store/dataset.h"
#include "lib/store/manifest.h"
#include "lib/store/provenance.h"
#include "lib/store/store.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DLK_VERSION
#define DLK_VERSION "unknown"
#endif

#define KEY_RECORD_MAX (64u << 10)

const char *dlk_stage_state_name(enum dlk_stage_state s)
{
	static const char *const names[] = { "pending", "succeeded", "reused", "failed", "blocked" };
	return names[s];
}

struct stage_run {
	enum dlk_stage_state state;
	char key[65];
	char out_id[65];     /* the output dataset's id, when succeeded or reused */
	char run_id[40];     /* the run that made the output */
	char reason[512];    /* failed / blocked: why */
	int exit_code;
	int would_run;       /* dry run: the stage would run */
	/* while it runs */
	pid_t pid;           /* > 0 while its process runs */
	char started[32];
	double t0, seconds;  /* when it started (dlk_now), how long it ran */
	char *key_txt;       /* owned */
	char (*ids)[65];     /* its inputs' ids, owned */
};

static void note(const struct dlk_pipeline_sink *sink, int warn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note(const struct dlk_pipeline_sink *sink, int warn, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	if (!sink || !sink->note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sink->note(sink->ud, warn, msg);
}

char *dlk_pipeline_state_dir(const struct dlk_pipeline *p)
{
	return xasprintf("%s/.dlk/pipelines/%s", p->state_root ? p->state_root : p->dir, p->name);
}

char *dlk_pipeline_log_path(const struct dlk_pipeline *p, const char *stage)
{
	return xasprintf("%s/.dlk/pipelines/%s/logs/%s.log", p->state_root ? p->state_root : p->dir, p->name, stage);
}

static char *abs_in(const char *dir, const char *path)
{
	char buf[PATH_MAX];

	if (path[0] == '/')
		return xstrdup(path);
	if (dir[0] == '/')
		return xasprintf("%s/%s", dir, path);
	if (!getcwd(buf, sizeof(buf)))
		return xasprintf("%s/%s", dir, path);
	return xasprintf("%s/%s/%s", buf, dir, path);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void add_file_digest(struct dlk_buf *b, const char *what, const char *dir, const char *path)
{
	char *full = abs_in(dir, path);
	char hex[65];

	if (dlk_sha256_file(full, hex))
		snprintf(hex, sizeof(hex), "missing");
	dlk_buf_addf(b, "%s %s %s\n", what, path, hex);
	free(full);
}

static int is_regular(const char *dir, const char *path)
{
	char *full = abs_in(dir, path);
	struct stat st;
	int ok = !stat(full, &st) && S_ISREG(st.st_mode);

	free(full);
	return ok;
}

/* The text whose sha256 is the stage's key; ids[] are the inputs' ids, in the stage's order. */
static char *key_text(const struct dlk_pipeline *p, const struct dlk_stage *s, char ids[][65], const char *self_hex)
{
	struct dlk_buf b = DLK_BUF_INIT;
	int *ord = xcalloc((size_t)s->n_inputs + 1, sizeof(int));

	dlk_buf_addf(&b, "dlk-pipeline-stage 1\nkind %s\n", dlk_stage_kind_name(s->kind));
	/* inputs by name: listing them in another order is the same stage */
	for (int i = 0; i < s->n_inputs; i++) {
		int j = i;
		while (j > 0 && strcmp(s->inputs[ord[j - 1]].name, s->inputs[i].name) > 0) {
			ord[j] = ord[j - 1];
			j--;
		}
		ord[j] = i;
	}
	for (int i = 0; i < s->n_inputs; i++)
		dlk_buf_addf(&b, "input %s sha256:%s\n", s->inputs[ord[i]].name, ids[ord[i]]);
	free(ord);
	for (int i = 0; i < s->n_params; i++)
		dlk_buf_addf(&b, "param %s=%s\n", s->params[i].key, s->params[i].value);
	if (s->image)
		dlk_buf_addf(&b, "image %s\n", s->image);
	dlk_buf_addf(&b, "output %s\n", s->output);
	switch (s->kind) {
	case DLK_STAGE_PROGRAM:
		for (int i = 0; s->argv[i]; i++)
			dlk_buf_addf(&b, "argv %s\n", s->argv[i]);
		if (s->n_code)
			for (int i = 0; i < s->n_code; i++)
				add_file_digest(&b, "code", p->dir, s->code[i]);
		else
			for (int i = 0; s->argv[i]; i++)
				if (is_regular(p->dir, s->argv[i]))
					add_file_digest(&b, "code", p->dir, s->argv[i]);
		break;
	case DLK_STAGE_TRAIN:
		add_file_digest(&b, "project", p->dir, s->project);
		dlk_buf_addf(&b, "dlk %s %s\n", DLK_VERSION, self_hex);
		break;
	case DLK_STAGE_PREDICT: /* dlk itself is the program */
		dlk_buf_addf(&b, "dlk %s %s\n", DLK_VERSION, self_hex);
		break;
	}
	return dlk_buf_detach(&b, NULL);
}

/* An earlier successful run of this key: its output id and run id. */
static int key_lookup(const char *state_dir, const char *key, char out_id[65], char run_id[40])
{
	char *path = xasprintf("%s/keys/%s.json", state_dir, key);
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	cJSON *j = NULL;
	const cJSON *o, *r;
	int found = 0;

	if (!dlk_buf_read_file(&b, path, KEY_RECORD_MAX, msg, sizeof(msg)) && (j = cJSON_ParseWithLength(b.data, b.len))) {
		o = cJSON_GetObjectItemCaseSensitive(j, "output_id");
		r = cJSON_GetObjectItemCaseSensitive(j, "run_id");
		if (cJSON_IsString(o) && strlen(o->valuestring) == 71 && !strncmp(o->valuestring, "sha256:", 7) &&
		    dlk_sha256_is_hex(o->valuestring + 7) && cJSON_IsString(r) && strlen(r->valuestring) < 40) {
			snprintf(out_id, 65, "%s", o->valuestring + 7);
			snprintf(run_id, 40, "%s", r->valuestring);
			found = 1;
		}
	}
	cJSON_Delete(j);
	dlk_buf_release(&b);
	free(path);
	return found;
}

static int key_save(const char *state_dir, const struct dlk_stage *s, const struct stage_run *r, const char *key_txt,
                    struct dlk_err *err)
{
	char *dir = xasprintf("%s/keys", state_dir), *path = xasprintf("%s/%s.json", dir, r->key), *text;
	cJSON *j = cJSON_CreateObject();
	char now[32], id[72];
	int rc;

	dlk_run_time_now(now);
	snprintf(id, sizeof(id), "sha256:%s", r->out_id);
	cJSON_AddStringToObject(j, "stage", s->name);
	cJSON_AddStringToObject(j, "output", s->output);
	cJSON_AddStringToObject(j, "output_id", id);
	cJSON_AddStringToObject(j, "run_id", r->run_id);
	cJSON_AddStringToObject(j, "finished_at", now);
	cJSON_AddStringToObject(j, "key_text", key_txt);
	text = dlk_json_print(j);
	rc = dlk_mkdir_p(dir, err) || dlk_write_file_atomic(path, text, strlen(text), 0644, err) ? -1 : 0;
	free(text);
	cJSON_Delete(j);
	free(path);
	free(dir);
	return rc;
}

static void env_name(char *buf, size_t len, const char *prefix, const char *name)
{
	size_t n = (size_t)snprintf(buf, len, "%s", prefix);
	for (const char *c = name; *c && n + 1 < len; c++)
		buf[n++] = isalnum((unsigned char)*c) ? (char)toupper((unsigned char)*c) : '_';
	buf[n] = 0;
}

/* Starts argv (execvp) in cwd with its output in log, holding the run's stages lock (stages_fd,
 * see wait_stages_left); returns its pid, or -1 when it could not fork. */
static pid_t start_process(const char *const *argv, const char *cwd, const char *log, char *const *env_add,
                           int stages_fd)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		/* a stage does not outlive the run that started it; a run gone before the prctl took
		 * effect sends no signal: the stage does not start */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		/* the stage and whatever it starts share the run's lock on the stages: a run started
		 * again after this one was killed waits until they are all gone */
		if (stages_fd >= 0)
			fcntl(stages_fd, F_SETFD, 0);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			dup2(fd, 0);
		for (int i = 0; env_add && env_add[i]; i++)
			putenv(env_add[i]);
		if (cwd && chdir(cwd))
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* A wait status as an exit code: 128 + the signal when killed. */
static int exit_of(int status)
{
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* The last non-empty line of a log, for the failure message. */
static void last_line(const char *log, char *out, size_t len)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[128];
	char *end, *start;

	out[0] = 0;
	if (dlk_buf_read_file(&b, log, 16u << 20, msg, sizeof(msg)) || !b.len) {
		dlk_buf_release(&b);
		return;
	}
	end = b.data + b.len;
	while (end > b.data && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	*end = 0;
	start = strrchr(b.data, '\n');
	start = start ? start + 1 : b.data;
	snprintf(out, len, "%s", dlk_visible(start));
	dlk_buf_release(&b);
}

static cJSON *inputs_json(const struct dlk_pipeline *p, const struct dlk_stage *s, char ids[][65])
{
	cJSON *a = cJSON_CreateArray();

	for (int i = 0; i < s->n_inputs; i++) {
		cJSON *o = cJSON_CreateObject();
		char id[72];
		snprintf(id, sizeof(id), "sha256:%s", ids[i]);
		cJSON_AddStringToObject(o, "name", s->inputs[i].name);
		cJSON_AddStringToObject(o, "id", id);
		if (s->inputs[i].stage >= 0) {
			cJSON_AddStringToObject(o, "stage", s->inputs[i].ref);
			cJSON_AddStringToObject(o, "tag", p->stages[s->inputs[i].stage].output);
		} else if (strncmp(s->inputs[i].ref, "sha256:", 7)) {
			cJSON_AddStringToObject(o, "tag", s->inputs[i].ref);
		}
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

/* provenance.json of a program's or a training's output: what `dlk lineage` follows ("input"
 * is the first dataset input, the chain it walks; "inputs" has them all). */
static int write_provenance(const struct dlk_pipeline *p, const struct dlk_stage *s, char ids[][65],
                            const struct stage_run *r, const char *key_txt, const char *out_dir, struct dlk_err *err)
{
	cJSON *j = cJSON_CreateObject(), *pl = cJSON_CreateObject(), *ins = inputs_json(p, s, ids), *in;
	char *path = xasprintf("%s/%s", out_dir, DLK_PROVENANCE_FILE), *text;
	int rc;

	cJSON_AddStringToObject(j, "kind", s->kind == DLK_STAGE_TRAIN ? "pipeline-train" : "pipeline-stage");
	cJSON_AddStringToObject(pl, "name", p->name);
	cJSON_AddStringToObject(pl, "stage", s->name);
	cJSON_AddStringToObject(pl, "key", r->key);
	cJSON_AddStringToObject(pl, "run_id", r->run_id);
	cJSON_AddStringToObject(pl, "key_text", key_txt);
	cJSON_AddItemToObject(j, "pipeline", pl);
	/* the first input that is a dataset: a model's own lineage is in its bundle */
	cJSON_ArrayForEach(in, ins)
	{
		int i = 0;
		for (const cJSON *c = ins->child; c != in; c = c->next)
			i++;
		if (s->inputs[i].stage < 0 || dlk_stage_output_kind(&p->stages[s->inputs[i].stage]) == DLK_VALUE_DATASET) {
			cJSON_AddItemToObject(j, "input", cJSON_Duplicate(in, 1));
			break;
		}
	}
	cJSON_AddItemToObject(j, "inputs", ins);
	if (s->kind == DLK_STAGE_TRAIN) {
		/* the model, and the training run that made it (dlk train's own record) */
		struct dlk_bundle b = DLK_BUNDLE_INIT;
		char *bundle = xasprintf("%s/model.dlk", out_dir), hex[65], id[72];
		if (dlk_bundle_read(bundle, &b, err) || dlk_sha256_file(bundle, hex)) {
			dlk_err_prefix(err, "no model");
			dlk_bundle_release(&b);
			free(bundle);
			free(path);
			cJSON_Delete(j);
			return -1;
		}
		{
			cJSON *mo = cJSON_CreateObject();
			const cJSON *run = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b.meta, "provenance"),
			                                                    "run_id");
			const cJSON *name = cJSON_GetObjectItemCaseSensitive(b.meta, "name");
			snprintf(id, sizeof(id), "sha256:%s", hex);
			if (cJSON_IsString(name))
				cJSON_AddStringToObject(mo, "name", name->valuestring);
			cJSON_AddStringToObject(mo, "bundle_sha256", id);
			cJSON_AddStringToObject(mo, "weights_sha256", b.weights_sha256);
			if (cJSON_IsString(run))
				cJSON_AddStringToObject(mo, "run_id", run->valuestring);
			cJSON_AddItemToObject(j, "model", mo);
		}
		dlk_bundle_release(&b);
		free(bundle);
	}
	text = dlk_json_print(j);
	rc = dlk_write_file_atomic(path, text, strlen(text), 0644, err);
	free(text);
	free(path);
	cJSON_Delete(j);
	return rc;
}

static int push_dir(struct dlk_store *st, const char *dir, const char *output, char id[65], struct dlk_err *err)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_push_stats stats;
	const char *paths[1] = { dir };
	char *tag = xasprintf("%s@latest", output);
	const char *tags[1] = { tag };
	int rc = -1;

	memset(&stats, 0, sizeof(stats));
	if (dlk_manifest_build(paths, 1, NULL, NULL, &m, err) ||
	    dlk_dataset_push(st, &m, tags, 1, NULL, NULL, &stats, err))
		goto out;
	snprintf(id, 65, "%s", m.id);
	rc = 0;
out:
	dlk_manifest_release(&m);
	free(tag);
	return rc;
}

static int fetch_input(struct dlk_store *st, const char *id, const char *dir, struct dlk_err *err)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_get_stats gs;
	int rc;

	memset(&gs, 0, sizeof(gs));
	rc = dlk_dataset_manifest(st, id, &m, err) || dlk_dataset_get(st, &m, dir, NULL, NULL, NULL, &gs, err) ? -1 : 0;
	dlk_manifest_release(&m);
	return rc;
}

static void record_run(const struct dlk_pipeline *p, const struct dlk_stage *s, char ids[][65],
                       const struct stage_run *r, const char *started)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = xasprintf("%s/.dlk/runs/%s", p->dir, p->name);
	struct dlk_run_store *rs = dlk_runs_open_dir(dir, p->name);
	cJSON *rec = dlk_run_record_new(p->name, r->run_id), *data = cJSON_CreateArray(), *pl = cJSON_CreateObject();
	char now[32], out[72];

	dlk_run_set_str(rec, "started_at", started);
	dlk_run_time_now(now);
	dlk_run_set_str(rec, "finished_at", now);
	dlk_run_set_str(rec, "where", "local");
	for (int i = 0; i < s->n_inputs; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "split", s->inputs[i].name);
		cJSON_AddStringToObject(d, "url", s->inputs[i].stage >= 0 ? p->stages[s->inputs[i].stage].output : s->inputs[i].ref);
		cJSON_AddStringToObject(d, "sha256", ids[i]);
		cJSON_AddItemToArray(data, d);
	}
	dlk_run_set_item(rec, "data", data);
	cJSON_AddStringToObject(pl, "name", p->name);
	cJSON_AddStringToObject(pl, "stage", s->name);
	cJSON_AddStringToObject(pl, "kind", dlk_stage_kind_name(s->kind));
	cJSON_AddStringToObject(pl, "key", r->key);
	if (r->state == DLK_STAGE_SUCCEEDED) {
		snprintf(out, sizeof(out), "sha256:%s", r->out_id);
		cJSON_AddStringToObject(pl, "output", s->output);
		cJSON_AddStringToObject(pl, "output_id", out);
	}
	dlk_run_set_item(rec, "pipeline", pl);
	if (r->state == DLK_STAGE_SUCCEEDED) {
		dlk_run_set_outcome(rec, DLK_RUN_SUCCEEDED);
	} else {
		dlk_run_set_outcome(rec, DLK_RUN_FAILED);
		dlk_run_set_failure(rec, -1, r->exit_code, r->reason);
	}
	/* the history is a record of what happened; a stage's result does not hang on it */
	if (rs)
		dlk_runs_put(rs, rec, &err);
	dlk_err_clear(&err);
	dlk_runs_close(rs);
	cJSON_Delete(rec);
	free(dir);
}

/* The stages of the status document prev, read before this run (NULL when none). */
static cJSON *read_prev_status(const char *state_dir)
{
	char *path = xasprintf("%s/status.json", state_dir);
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[128];
	cJSON *j = NULL;

	if (!dlk_buf_read_file(&b, path, 16u << 20, msg, sizeof(msg)))
		j = cJSON_ParseWithLength(b.data, b.len);
	dlk_buf_release(&b);
	free(path);
	return j;
}

/* Stage name's entry in a previous status document, or NULL. */
static const cJSON *prev_stage(const cJSON *prev, const char *name)
{
	const cJSON *s;

	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(prev, "stages"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return s;
	}
	return NULL;
}

/* want: the stages this run was asked for; the others keep what the last run said of them */
static int write_status(const struct dlk_pipeline *p, const struct stage_run *runs, const char *want,
                        const cJSON *prev, const char *state_dir, const char *store_url, int finished,
                        struct dlk_err *err)
{
	cJSON *j = cJSON_CreateObject(), *a = cJSON_CreateArray();
	char *path = xasprintf("%s/status.json", state_dir), *text;
	char now[32];
	int rc;

	dlk_run_time_now(now);
	cJSON_AddStringToObject(j, "pipeline", p->name);
	cJSON_AddStringToObject(j, "file", p->file);
	cJSON_AddStringToObject(j, "store", store_url);
	cJSON_AddStringToObject(j, finished ? "finished_at" : "updated_at", now);
	for (int k = 0; k < p->n_stages; k++) {
		int i = p->order[k];
		const struct stage_run *r = &runs[i];
		const cJSON *old = want[i] ? NULL : prev_stage(prev, p->stages[i].name);
		cJSON *o;
		char id[72];

		if (old) {
			cJSON_AddItemToArray(a, cJSON_Duplicate(old, 1));
			continue;
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", p->stages[i].name);
		cJSON_AddStringToObject(o, "kind", dlk_stage_kind_name(p->stages[i].kind));
		cJSON_AddStringToObject(o, "state", dlk_stage_state_name(r->state));
		if (r->key[0])
			cJSON_AddStringToObject(o, "key", r->key);
		cJSON_AddStringToObject(o, "output", p->stages[i].output);
		if (r->out_id[0]) {
			snprintf(id, sizeof(id), "sha256:%s", r->out_id);
			cJSON_AddStringToObject(o, "output_id", id);
		}
		if (r->run_id[0])
			cJSON_AddStringToObject(o, r->state == DLK_STAGE_REUSED ? "reused_from_run" : "run_id", r->run_id);
		if (r->state == DLK_STAGE_FAILED)
			cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
		if (r->state == DLK_STAGE_SUCCEEDED || (r->state == DLK_STAGE_FAILED && r->exit_code >= 0))
			cJSON_AddNumberToObject(o, "seconds", (double)(long long)(r->seconds * 1000 + 0.5) / 1000);
		if (r->reason[0])
			cJSON_AddStringToObject(o, "reason", r->reason);
		cJSON_AddItemToArray(a, o);
	}
	cJSON_AddItemToObject(j, "stages", a);
	text = dlk_json_print(j);
	rc = dlk_write_file_atomic(path, text, strlen(text), 0644, err);
	free(text);
	free(path);
	cJSON_Delete(j);
	return rc;
}

static int in_list(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			return 1;
	return 0;
}

/* Starts stage s (r->ids and r->key_txt set): fetches its inputs and starts its process (r->pid),
 * or marks it failed when it cannot start. Returns -1 only for errors that are not the stage's
 * (the store, the disk), with err. */
static int start_stage(const struct dlk_pipeline *p, const struct dlk_stage *s, const struct dlk_pipeline_run_opts *o,
                       const char *state_dir, int stages_fd, struct stage_run *r, struct dlk_err *err)
{
	char(*ids)[65] = r->ids;
	char *work = xasprintf("%s/work/%s", state_dir, s->name), *out_dir = xasprintf("%s/out", work);
	char *log = xasprintf("%s/logs/%s.log", state_dir, s->name), *logs = xasprintf("%s/logs", state_dir);
	char **env = xcalloc((size_t)s->n_inputs + (size_t)s->n_params + 8, sizeof(char *));
	const char **argv = NULL;
	char **owned = xcalloc(8 + (size_t)s->n_params, sizeof(char *));
	char *abs_work;
	int n_env = 0, rc = -1;

	dlk_run_time_now(r->started);
	r->t0 = dlk_now();
	if (dlk_run_new_id(r->run_id, err))
		goto out;
	rm_tree(work);
	if (dlk_mkdir_p(out_dir, err) || dlk_mkdir_p(logs, err))
		goto out;
	abs_work = abs_in(".", work);
	for (int i = 0; i < s->n_inputs; i++) {
		char *in_dir = xasprintf("%s/in/%s", abs_work, s->inputs[i].name);
		char name[128];
		if (fetch_input(o->store, ids[i], in_dir, err)) {
			dlk_err_prefix(err, "stage '%s', input '%s'", s->name, s->inputs[i].name);
			free(in_dir);
			free(abs_work);
			goto out;
		}
		env_name(name, sizeof(name), "DLK_INPUT_", s->inputs[i].name);
		env[n_env++] = xasprintf("%s=%s", name, in_dir);
		free(in_dir);
	}
	env[n_env++] = xasprintf("DLK_OUTPUT=%s/out", abs_work);
	env[n_env++] = xasprintf("DLK_PIPELINE=%s", p->name);
	env[n_env++] = xasprintf("DLK_STAGE=%s", s->name);
	env[n_env++] = xasprintf("DLK_STAGE_KEY=%s", r->key);
	env[n_env++] = xasprintf("DLK_STAGE_RUN_ID=%s", r->run_id);
	for (int i = 0; i < s->n_params; i++) {
		char name[160];
		env_name(name, sizeof(name), "DLK_PARAM_", s->params[i].key);
		env[n_env++] = xasprintf("%s=%s", name, s->params[i].value);
	}
	switch (s->kind) {
	case DLK_STAGE_PROGRAM:
		break; /* its own argv */
	case DLK_STAGE_TRAIN: {
		int a = 0, data = 0;
		for (int i = 0; i < s->n_inputs; i++)
			if (s->inputs[i].stage < 0 || dlk_stage_output_kind(&p->stages[s->inputs[i].stage]) == DLK_VALUE_DATASET)
				data = i;
		/* in a stage's pod the pod's own worker serves the metrics port it was given: the
		   training inside serves none (its progress is in the stage's log) */
		env[n_env++] = xasprintf("%s=0", DLK_ENV_METRICS_PORT);
		argv = xcalloc(16 + 2 * (size_t)s->n_params, sizeof(char *));
		argv[a++] = o->self;
		argv[a++] = "train";
		argv[a++] = "--local";
		argv[a++] = "--fresh";
		argv[a++] = "-q";
		argv[a++] = "-f";
		argv[a++] = owned[0] = abs_in(p->dir, s->project);
		argv[a++] = "--set";
		argv[a++] = owned[1] = xasprintf("data.dataset=sha256:%s", ids[data]);
		argv[a++] = "--set";
		argv[a++] = owned[2] = xasprintf("data.store=%s", o->store_url);
		argv[a++] = "--bundle";
		argv[a++] = owned[3] = xasprintf("%s/out/model.dlk", abs_work);
		for (int i = 0; i < s->n_params; i++) {
			argv[a++] = "--set";
			argv[a++] = owned[8 + i] = xasprintf("%s=%s", s->params[i].key, s->params[i].value);
		}
		break;
	}
	case DLK_STAGE_PREDICT: {
		int a = 0, mi = strcmp(s->inputs[0].name, "model") ? 1 : 0;
		argv = xcalloc(16, sizeof(char *));
		argv[a++] = o->self;
		argv[a++] = "predict";
		argv[a++] = owned[0] = xasprintf("%s/in/model/model.dlk", abs_work);
		argv[a++] = "--data";
		argv[a++] = owned[1] = xasprintf("sha256:%s", ids[1 - mi]);
		argv[a++] = "--to";
		argv[a++] = o->store_url;
		argv[a++] = "--name";
		argv[a++] = owned[2] = xasprintf("%s@latest", s->output);
		argv[a++] = "-q";
		if (s->workers > 1 && o->rank) {
			/* a pod of the stage's Indexed Job: this rank's part (rank 0 joins the parts) */
			argv[a++] = "--workers";
			argv[a++] = owned[3] = xasprintf("%d", s->workers);
			argv[a++] = "--rank";
			argv[a++] = o->rank;
		}
		break;
	}
	}
	free(abs_work);
	r->pid = start_process(argv ? argv : (const char *const *)s->argv, p->dir, log, env, stages_fd);
	if (r->pid < 0) {
		r->pid = 0;
		r->state = DLK_STAGE_FAILED;
		r->exit_code = -1;
		snprintf(r->reason, sizeof(r->reason), "could not start: %s", strerror(errno));
		record_run(p, s, ids, r, r->started);
	}
	rc = 0;
out:
	for (int i = 0; env[i]; i++)
		free(env[i]);
	free(env);
	for (int i = 0; i < 8 + s->n_params; i++)
		free(owned[i]);
	free(owned);
	free(argv);
	free(log);
	free(logs);
	free(out_dir);
	free(work);
	return rc;
}

/* Stage s's process ended with exit code code: push its output (or record its failure). Returns
 * -1 only for errors that are not the stage's, with err. */
static int finish_stage(const struct dlk_pipeline *p, const struct dlk_stage *s, const struct dlk_pipeline_run_opts *o,
                        const char *state_dir, struct stage_run *r, int code, struct dlk_err *err)
{
	char *out_dir = xasprintf("%s/work/%s/out", state_dir, s->name);
	char *log = xasprintf("%s/logs/%s.log", state_dir, s->name);
	int rc = -1;

	r->pid = 0;
	r->seconds = dlk_now() - r->t0;
	if (code) {
		char last[400];
		last_line(log, last, sizeof(last));
		r->state = DLK_STAGE_FAILED;
		r->exit_code = code;
		snprintf(r->reason, sizeof(r->reason), "exit code %d%s%s", code, last[0] ? ": " : "", last);
		record_run(p, s, r->ids, r, r->started);
		rc = 0;
		goto out;
	}
	if (s->kind == DLK_STAGE_PREDICT && s->workers > 1 && o->rank && strcmp(o->rank, "0")) {
		/* a rank other than 0 of an N-worker predict stage: its part is in the store; rank 0
		 * pushes the stage's output and tags it with the key */
		r->state = DLK_STAGE_SUCCEEDED;
		rc = 0;
		goto out;
	}
	if (s->kind == DLK_STAGE_PREDICT) {
		char *tag = xasprintf("%s@latest", s->output);
		rc = dlk_dataset_resolve(o->store, tag, 0, r->out_id, err);
		free(tag);
		if (rc)
			goto out;
	} else if (write_provenance(p, s, r->ids, r, r->key_txt, out_dir, err) ||
	           push_dir(o->store, out_dir, s->output, r->out_id, err)) {
		/* the stage's output is not what it should be (no model, a link to a directory, a
		 * store that refused it): the stage failed, the stages below it are blocked */
		r->state = DLK_STAGE_FAILED;
		r->exit_code = 0;
		snprintf(r->reason, sizeof(r->reason), "its output '%.80s': %.400s", s->output, err->msg);
		r->out_id[0] = 0;
		dlk_err_clear(err);
		record_run(p, s, r->ids, r, r->started);
		rc = 0;
		goto out;
	}
	{
		char *tag = xasprintf("%s@key-%s", s->output, r->key);
		rc = dlk_dataset_tag(o->store, tag, r->out_id, err);
		free(tag);
		if (rc)
			goto out;
	}
	r->state = DLK_STAGE_SUCCEEDED;
	record_run(p, s, r->ids, r, r->started);
	rc = key_save(state_dir, s, r, r->key_txt, err);
	if (!rc) {
		/* its inputs and output are in the store now; a failed stage's stay for a look */
		char *work = xasprintf("%s/work/%s", state_dir, s->name);
		rm_tree(work);
		free(work);
	}
out:
	free(log);
	free(out_dir);
	return rc;
}

/* The output an earlier run made for r->key: the store's tag OUTPUT@key-KEY (so that a run on
 * another machine with the same store reuses it too), else this machine's key record when its
 * output is still in the store. Fills r->out_id and r->run_id (empty when neither the record nor
 * the output's provenance names it); 0 when there is none. */
static int find_output(struct dlk_store *st, const char *state_dir, const struct dlk_stage *s, struct stage_run *r)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *tag = xasprintf("%s@key-%s", s->output, r->key);
	char rec_id[65] = "", rec_run[40] = "";
	int have_rec = key_lookup(state_dir, r->key, rec_id, rec_run), found = 0;

	if (!dlk_dataset_resolve(st, tag, 0, r->out_id, &err)) {
		found = 1;
		if (have_rec && !strcmp(rec_id, r->out_id)) {
			memcpy(r->run_id, rec_run, sizeof(r->run_id));
		} else {
			/* made elsewhere: the run is in the output's provenance, when dlk wrote one */
			struct dlk_manifest m = DLK_MANIFEST_INIT;
			cJSON *prov = NULL;
			if (!dlk_dataset_manifest(st, r->out_id, &m, &err) && !dlk_dataset_provenance(st, &m, &prov, &err)) {
				const cJSON *run = cJSON_GetObjectItemCaseSensitive(
					cJSON_GetObjectItemCaseSensitive(prov, "pipeline"), "run_id");
				if (cJSON_IsString(run) && strlen(run->valuestring) < sizeof(r->run_id))
					snprintf(r->run_id, sizeof(r->run_id), "%s", run->valuestring);
			}
			cJSON_Delete(prov);
			dlk_manifest_release(&m);
		}
	} else if (have_rec) {
		char *ref = xasprintf("sha256:%s", rec_id);
		char probe[65];
		dlk_err_clear(&err);
		if (!dlk_dataset_resolve(st, ref, 0, probe, &err)) {
			memcpy(r->out_id, rec_id, 65);
			memcpy(r->run_id, rec_run, sizeof(r->run_id));
			found = 1;
		}
		free(ref);
	}
	if (!found)
		r->out_id[0] = r->run_id[0] = 0;
	free(tag);
	return found;
}

/* What can be said of stage i now: 1 when it was decided without running (reused, blocked, or
 * would run in a dry run) or was started, 0 when it must wait for a stage above it, -1 on an
 * error that is not the stage's. */
static int try_stage(const struct dlk_pipeline *p, int i, struct stage_run *runs, const struct dlk_pipeline_run_opts *o,
                     const char *state_dir, int stages_fd, const char *self_hex,
                     const struct dlk_pipeline_sink *sink, struct dlk_buf *blocked, struct dlk_err *err)
{
	const struct dlk_stage *s = &p->stages[i];
	struct stage_run *r = &runs[i];
	int upstream = -1, unknown = 0;

	for (int j = 0; j < s->n_inputs && upstream < 0; j++) {
		const struct stage_run *u = s->inputs[j].stage >= 0 ? &runs[s->inputs[j].stage] : NULL;
		if (!u)
			continue;
		if (u->state == DLK_STAGE_FAILED || u->state == DLK_STAGE_BLOCKED)
			upstream = s->inputs[j].stage;
		else if (u->would_run)
			unknown = 1;
		else if (u->state == DLK_STAGE_PENDING)
			return 0; /* still running, or not started */
	}
	if (upstream >= 0) {
		r->state = DLK_STAGE_BLOCKED;
		snprintf(r->reason, sizeof(r->reason), "not run: its input stage '%s' %s", p->stages[upstream].name,
		         runs[upstream].state == DLK_STAGE_FAILED ? "failed" : "did not run");
		note(sink, 1, "stage %s: %s", s->name, r->reason);
		dlk_buf_addf(blocked, "%s%s", blocked->len ? ", " : "", s->name);
		return 1;
	}
	if (unknown) {
		/* dry run: an input that would be made again has no id yet */
		r->would_run = 1;
		note(sink, 0, "stage %s: would run (an input stage would run)", s->name);
		return 1;
	}
	r->ids = xcalloc((size_t)s->n_inputs + 1, sizeof(*r->ids));
	for (int j = 0; j < s->n_inputs; j++) {
		const struct dlk_stage_input *in = &s->inputs[j];
		if (in->stage >= 0) {
			memcpy(r->ids[j], runs[in->stage].out_id, 65);
		} else if (dlk_dataset_resolve(o->store, in->ref, 0, r->ids[j], err)) {
			dlk_err_prefix(err, "stage '%s', input '%s'", s->name, in->name);
			return -1;
		}
	}
	r->key_txt = key_text(p, s, r->ids, self_hex);
	dlk_sha256_hex(r->key_txt, strlen(r->key_txt), r->key);
	if (!in_list(s->name, o->force, o->n_force) && find_output(o->store, state_dir, s, r)) {
		r->state = DLK_STAGE_REUSED;
		note(sink, 0, "stage %s: reused (key %.12s): %s sha256:%.12s from run %s", s->name, r->key, s->output,
		     r->out_id, r->run_id[0] ? r->run_id : "(not recorded)");
		return 1;
	}
	if (o->dry_run) {
		r->would_run = 1;
		note(sink, 0, "stage %s: would run (key %.12s)", s->name, r->key);
		return 1;
	}
	note(sink, 0, "stage %s: runs (key %.12s)", s->name, r->key);
	if (o->remote) {
		double t0 = dlk_now();
		int code = o->remote(o->remote_ud, s, r->key, r->reason, sizeof(r->reason), err);
		if (code < 0)
			return -1;
		r->seconds = dlk_now() - t0;
		r->exit_code = code;
		if (!code && find_output(o->store, state_dir, s, r)) {
			r->state = DLK_STAGE_SUCCEEDED;
			note(sink, 0, "stage %s: done in %.1f s: %s sha256:%.12s (run %s)", s->name, r->seconds, s->output,
			     r->out_id, r->run_id[0] ? r->run_id : "(not recorded)");
		} else {
			r->state = DLK_STAGE_FAILED;
			if (!code)
				snprintf(r->reason, sizeof(r->reason), "it ended well but left no output for key %.12s in the store",
				         r->key);
		}
		return 1;
	}
	return start_stage(p, s, o, state_dir, stages_fd, r, err) ? -1 : 1;
}

/* The processes of a run that was killed (a lost terminal, kill) got SIGTERM with its death, but
 * may take a while to end: a training writes its checkpoint, a program cleans up. Until they are
 * gone they write into the work directories this run clears and hold the locks of the runs they
 * train (a train stage started again would be refused), so a run waits for them first. Every
 * stage's process inherits the run's lock on STATE_DIR/stages (see start_process): it is free
 * when none is left. Returns the lock's descriptor (held, close-on-exec), or -1 with err. */
static int wait_stages_left(const struct dlk_pipeline *p, const char *state_dir, const struct dlk_pipeline_sink *sink,
                            struct dlk_err *err)
{
	char *path = xasprintf("%s/stages", state_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	for (int i = 0; flock(fd, LOCK_EX | LOCK_NB); i++) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot lock '%s': %s", path, strerror(errno));
			goto fail;
		}
		if (i == 0)
			note(sink, 0, "pipeline %s: waiting for the stages of a run that was cut off to end", p->name);
		if (i >= 1200) {
			dlk_errf(err, DLK_EXIT_FAIL, "pipeline %s: processes of a run that was cut off still hold '%s' after 2 minutes",
			         p->name, path);
			dlk_err_hint(err, "they were sent SIGTERM; end them (fuser or lsof names them) and run again");
			goto fail;
		}
		usleep(100000);
	}
	goto out;
fail:
	close(fd);
	fd = -1;
out:
	free(path);
	return fd;
}

int dlk_pipeline_run_local(const struct dlk_pipeline *p, const struct dlk_pipeline_run_opts *o,
                           const struct dlk_pipeline_sink *sink, struct dlk_err *err)
{
	struct stage_run *runs = xcalloc((size_t)p->n_stages, sizeof(*runs));
	char *want = xcalloc((size_t)p->n_stages, 1), *decided = xcalloc((size_t)p->n_stages, 1);
	char *state_dir = dlk_pipeline_state_dir(p);
	char self_hex[65] = "";
	struct dlk_buf failed = DLK_BUF_INIT, blocked = DLK_BUF_INIT;
	int rc = -1, n_failed = 0, n_running = 0, parallel = o->parallel > 0 ? o->parallel : 1, lock_fd = -1;
	int stages_fd = -1;
	cJSON *prev = NULL;

	for (size_t i = 0; i < o->n_only + o->n_force; i++) {
		const char *name = i < o->n_only ? o->only[i] : o->force[i - o->n_only];
		if (dlk_pipeline_stage(p, name) < 0) {
			dlk_errf(err, DLK_EXIT_USAGE, "no stage '%s' in %s", dlk_visible(name), p->file);
			goto out;
		}
	}
	if (o->n_only)
		for (size_t i = 0; i < o->n_only; i++)
			dlk_pipeline_ancestors(p, dlk_pipeline_stage(p, o->only[i]), want);
	else
		memset(want, 1, (size_t)p->n_stages);
	if (o->self && dlk_sha256_file(o->self, self_hex)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read the dlk binary '%s' to key its steps", o->self);
		goto out;
	}
	if (dlk_mkdir_p(state_dir, err))
		goto out;
	if (!o->dry_run) {
		/* two runs of one pipeline here would share its work directories */
		char *lock = xasprintf("%s/lock", state_dir);
		lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		free(lock);
		if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB)) {
			dlk_errf(err, DLK_EXIT_FAIL, "pipeline %s is running here already (%s/lock is held)", p->name, state_dir);
			dlk_err_hint(err, "wait for it to end, or stop it");
			goto out;
		}
		stages_fd = wait_stages_left(p, state_dir, sink, err);
		if (stages_fd < 0)
			goto out;
	}
	prev = read_prev_status(state_dir);
	/* Decide every stage whose inputs are known, in the file's dependency order, starting at
	 * most `parallel` processes; then wait for one to end, and again. */
	for (;;) {
		int status, found = -1;
		pid_t pid;

		for (int k = 0; k < p->n_stages; k++) {
			int i = p->order[k], got;
			if (!want[i] || decided[i])
				continue;
			if (n_running >= parallel)
				break;
			got = try_stage(p, i, runs, o, state_dir, stages_fd, self_hex, sink, &blocked, err);
			if (got < 0)
				goto out;
			if (got) {
				decided[i] = 1;
				if (runs[i].pid > 0)
					n_running++;
				else if (runs[i].state == DLK_STAGE_FAILED) {
					n_failed++;
					dlk_buf_addf(&failed, "%s%s", failed.len ? ", " : "", p->stages[i].name);
					note(sink, 1, "stage %s: failed, %s", p->stages[i].name, runs[i].reason);
				}
			}
		}
		if (!n_running)
			break;
		pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			dlk_errf(err, DLK_EXIT_FAIL, "waiting for the stages: %s", strerror(errno));
			goto out;
		}
		for (int i = 0; i < p->n_stages && found < 0; i++)
			if (runs[i].pid == pid)
				found = i;
		if (found < 0)
			continue; /* not a stage's process */
		n_running--;
		if (finish_stage(p, &p->stages[found], o, state_dir, &runs[found], exit_of(status), err))
			goto out;
		if (runs[found].state == DLK_STAGE_FAILED) {
			char *log = dlk_pipeline_log_path(p, p->stages[found].name);
			n_failed++;
			note(sink, 1, "stage %s: failed, %s (log: %s)", p->stages[found].name, runs[found].reason, log);
			dlk_buf_addf(&failed, "%s%s", failed.len ? ", " : "", p->stages[found].name);
			free(log);
		} else {
			note(sink, 0, "stage %s: done in %.1f s: %s sha256:%.12s (run %s)", p->stages[found].name,
			     runs[found].seconds, p->stages[found].output, runs[found].out_id, runs[found].run_id);
		}
		if (write_status(p, runs, want, prev, state_dir, o->store_url, 0, err))
			goto out;
	}
	if (!o->dry_run && write_status(p, runs, want, prev, state_dir, o->store_url, 1, err))
		goto out;
	if (n_failed) {
		dlk_errf(err, DLK_EXIT_FAIL, "pipeline %s: stage%s %s failed%s%s", p->name, n_failed > 1 ? "s" : "",
		         failed.data, blocked.len ? "; not run: " : "", blocked.len ? blocked.data : "");
		dlk_err_hint(err, "'dlk pipeline logs STAGE' shows a stage's log; run again and finished stages are reused");
		goto out;
	}
	rc = 0;
out:
	/* an error of the store or the disk: the stages still running are stopped, not left behind */
	for (int i = 0; i < p->n_stages; i++)
		if (runs[i].pid > 0) {
			kill(runs[i].pid, SIGTERM);
			waitpid(runs[i].pid, NULL, 0);
		}
	for (int i = 0; i < p->n_stages; i++) {
		free(runs[i].key_txt);
		free(runs[i].ids);
	}
	if (stages_fd >= 0)
		close(stages_fd);
	if (lock_fd >= 0)
		close(lock_fd);
	cJSON_Delete(prev);
	dlk_buf_release(&failed);
	dlk_buf_release(&blocked);
	free(state_dir);
	free(decided);
	free(want);
	free(runs);
	return rc;
}

cJSON *dlk_pipeline_read_status(const struct dlk_pipeline *p, struct dlk_err *err)
{
	char *dir = dlk_pipeline_state_dir(p), *path = xasprintf("%s/status.json", dir);
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	cJSON *j = NULL;

	if (dlk_buf_read_file(&b, path, 16u << 20, msg, sizeof(msg)))
		dlk_errf(err, DLK_EXIT_NOTFOUND, "pipeline %s has not run here (%s)", p->name, msg);
	else if (!(j = cJSON_ParseWithLength(b.data, b.len)) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "stages"))) {
		cJSON_Delete(j);
		j = NULL;
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a pipeline status; run the pipeline again", path);
	}
	dlk_buf_release(&b);
	free(path);
	free(dir);
	return j;
}
