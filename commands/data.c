/* dlk data: versioned datasets. `push` hashes files into a manifest whose sha256 is the dataset's
 * id and uploads what the store lacks; `ls`, `show` and `get` read a store. The store is --to /
 * --from, else the project's data.store. The work is lib/store; this file is the terminal. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/project/project.h"
#include "lib/store/cache.h"
#include "lib/store/serve.h"
#include "lib/store/dataset.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct bar {
	struct dlk_progress p;
	const char *verb;
};

static int on_progress(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct bar *b = vctx;
	char d[32], t[32];

	dlk_fmt_bytes(d, sizeof(d), done);
	dlk_fmt_bytes(t, sizeof(t), total);
	if (total)
		dlk_progress_draw(&b->p, 0, "%s %s: %llu%% (%s of %s)", b->verb, what, done * 100 / total, d, t);
	else
		dlk_progress_draw(&b->p, 0, "%s %s: %s", b->verb, what, d);
	return dlk_interrupted();
}

static int print_structured(const struct dlk_ctx *ctx, cJSON *v, struct dlk_err *err)
{
	return dlk_doc_print(stdout, v, ctx->output == DLK_OUTPUT_JSON, err);
}

static int structured(const struct dlk_ctx *ctx)
{
	return ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML;
}

/* ---- push ---- */

static const char *push_to;
static struct dlk_strlist push_tags;
static int push_verify;

static int run_push(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_push_stats st = { 0 };
	struct bar bar = { { ctx, 0, 0 }, "hashing" };
	char total[32], sent[32];
	int rc = 0;

	dlk_interrupt_catch();
	if (dlk_data_maybe_project(ctx, push_to, &spec, &err) || dlk_data_store_open(ctx, push_to, spec, &ds, &err))
		goto fail;
	if (dlk_manifest_build(args->pos, (size_t)args->n_pos, on_progress, &bar, &m, &err))
		goto fail;
	dlk_store_read_back(ds.store, push_verify);
	bar.verb = "pushing";
	if (dlk_dataset_push(ds.store, &m, push_tags.v, push_tags.n, on_progress, &bar, &st, &err)) {
		dlk_progress_clear(&bar.p);
		dlk_err_prefix(&err, "cannot push to '%s'", dlk_store_url(ds.store));
		goto fail;
	}
	dlk_progress_clear(&bar.p);
	if (structured(ctx)) {
		cJSON *o = cJSON_CreateObject(), *t = cJSON_AddArrayToObject(o, "tags");
		char id[72];
		snprintf(id, sizeof(id), "sha256:%s", m.id);
		cJSON_AddStringToObject(o, "id", id);
		cJSON_AddStringToObject(o, "store", dlk_store_url(ds.store));
		cJSON_AddNumberToObject(o, "files", (double)st.files);
		cJSON_AddNumberToObject(o, "bytes", (double)st.bytes);
		cJSON_AddNumberToObject(o, "uploaded", (double)st.uploaded);
		cJSON_AddNumberToObject(o, "uploadedBytes", (double)st.uploaded_bytes);
		for (size_t i = 0; i < push_tags.n; i++) {
			char *tag = strchr(push_tags.v[i], '@') ? xstrdup(push_tags.v[i]) : xasprintf("%s@latest", push_tags.v[i]);
			cJSON_AddItemToArray(t, cJSON_CreateString(tag));
			free(tag);
		}
		rc = print_structured(ctx, o, &err);
		cJSON_Delete(o);
		if (rc)
			goto fail;
		goto out;
	}
	printf("sha256:%s\n", m.id);
	dlk_fmt_bytes(total, sizeof(total), st.bytes);
	dlk_fmt_bytes(sent, sizeof(sent), st.uploaded_bytes);
	if (st.uploaded)
		dlk_info(ctx, "pushed to %s: %zu file%s, %s; uploaded %zu (%s), %zu already there", dlk_store_url(ds.store), st.files,
		         st.files == 1 ? "" : "s", total, st.uploaded, sent, st.files - st.uploaded);
	else
		dlk_info(ctx, "pushed to %s: %zu file%s, %s; %s", dlk_store_url(ds.store), st.files, st.files == 1 ? "" : "s", total,
		         st.manifest_new ? "every file was already there" : "the dataset was already there: nothing uploaded");
	if (st.resumed_bytes) {
		char r[32];
		dlk_fmt_bytes(r, sizeof(r), st.resumed_bytes);
		dlk_info(ctx, "continued an interrupted upload: %s of it were already in the store", r);
	}
	for (size_t i = 0; i < push_tags.n; i++)
		dlk_info(ctx, "tagged %s%s", push_tags.v[i], strchr(push_tags.v[i], '@') ? "" : "@latest");
	goto out;
fail:
	dlk_progress_clear(&bar.p);
	rc = dlk_report(ctx, &err);
out:
	dlk_manifest_release(&m);
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

static const struct dlk_option push_options[] = {
	OPT_STRING(0, "to", &push_to, "STORE", NULL, "the store: a directory, s3://BUCKET/PREFIX or pvc://CLAIM/PATH",
	           .def_doc = "data.store of the project file", .complete = COMPLETE_DIR),
	OPT_LIST('t', "tag", &push_tags, "NAME[@TAG]", "point a tag at the dataset (NAME alone is NAME@latest; repeatable)"),
	OPT_BOOL(0, "verify", &push_verify,
	         "read back every object the store already has and hash it, replacing any that does not match"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_data_push = {
	.usage = "PATH...",
	.description = "Hash every file of PATH... into a manifest (sorted paths, sizes, sha256) whose own sha256\n"
	               "is the dataset's id, upload the files the store does not have yet, then the manifest,\n"
	               "then the tags; print the id. A directory contributes the files under it, named by\n"
	               "their paths below it; a file contributes itself, named by its base name.",
	.options = push_options,
	.min_pos = 1,
	.max_pos = -1,
	.complete_pos = COMPLETE_FILE,
	.run = run_push,
	.examples = "  $ dlk data push ./fashion --to s3://datasets/dlk --tag fashion@v1\n"
	            "  $ dlk data push train.csv test.csv --tag tabular\n"
	            "  $ id=$(dlk data push -q ./fashion)\n",
};

/* ---- ls ---- */

static const char *ls_from;

static const char *tags_of(const struct dlk_tag *t, size_t n, const char *id, struct dlk_buf *b)
{
	dlk_buf_reset(b);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].id, id))
			dlk_buf_addf(b, "%s%s", b->len ? ", " : "", t[i].name);
	return b->data;
}

static cJSON *tags_json(const struct dlk_tag *t, size_t n, const char *id)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].id, id))
			cJSON_AddItemToArray(a, cJSON_CreateString(t[i].name));
	return a;
}

static int run_ls(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	struct dlk_tag *tags = NULL;
	struct dlk_buf b = DLK_BUF_INIT;
	char **ids = NULL;
	size_t n = 0, nt = 0;
	cJSON *list = NULL;
	int rc = 0, wide = ctx->output == DLK_OUTPUT_WIDE;

	(void)args;
	if (dlk_data_maybe_project(ctx, ls_from, &spec, &err) || dlk_data_store_open(ctx, ls_from, spec, &ds, &err) ||
	    dlk_dataset_list(ds.store, &ids, &n, &err) || dlk_dataset_tags(ds.store, &tags, &nt, &err))
		goto fail;
	if (structured(ctx))
		list = cJSON_CreateArray();
	else if (n)
		printf("%-*s  %6s  %10s  %s\n", wide ? 71 : 19, "ID", "FILES", "SIZE", "TAGS");
	for (size_t i = 0; i < n; i++) {
		struct dlk_manifest m = DLK_MANIFEST_INIT;
		char size[32], id[72];
		if (dlk_dataset_manifest(ds.store, ids[i], &m, &err))
			goto fail;
		snprintf(id, sizeof(id), "sha256:%s", ids[i]);
		if (list) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "id", id);
			cJSON_AddNumberToObject(o, "files", (double)m.n);
			cJSON_AddNumberToObject(o, "bytes", (double)m.total);
			cJSON_AddItemToObject(o, "tags", tags_json(tags, nt, ids[i]));
			cJSON_AddItemToArray(list, o);
		} else {
			dlk_fmt_bytes(size, sizeof(size), m.total);
			printf("%-*.*s  %6zu  %10s  %s\n", wide ? 71 : 19, wide ? 71 : 19, id, m.n, size,
			       dlk_visible(tags_of(tags, nt, ids[i], &b)));
		}
		dlk_manifest_release(&m);
	}
	if (list && print_structured(ctx, list, &err))
		goto fail;
	if (!list && !n)
		dlk_info(ctx, "no datasets in %s", dlk_store_url(ds.store));
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	cJSON_Delete(list);
	dlk_buf_release(&b);
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	dlk_tags_free(tags, nt);
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

static const struct dlk_option ls_options[] = {
	OPT_STRING(0, "from", &ls_from, "STORE", NULL, "the store to list", .def_doc = "data.store of the project file",
	           .complete = COMPLETE_DIR),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_data_ls = {
	.usage = "",
	.description = "List the datasets of a store: id, number of files, size and the tags that point at each.\n"
	               "-o wide shows whole ids; -o json or yaml gives the same as data.",
	.options = ls_options,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_ls,
	.examples = "  $ dlk data ls --from s3://datasets/dlk\n"
	            "  $ dlk data ls -o json\n",
};

/* ---- show ---- */

static const char *show_from;

static int run_show(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_tag *tags = NULL;
	struct dlk_buf b = DLK_BUF_INIT;
	size_t nt = 0;
	char id[65], size[32];
	int rc = 0;

	if (dlk_data_maybe_project(ctx, show_from, &spec, &err) || dlk_data_store_open(ctx, show_from, spec, &ds, &err) ||
	    dlk_dataset_resolve(ds.store, args->pos[0], 1, id, &err) || dlk_dataset_manifest(ds.store, id, &m, &err) ||
	    dlk_dataset_tags(ds.store, &tags, &nt, &err))
		goto fail;
	if (structured(ctx)) {
		cJSON *o = cJSON_CreateObject(), *files = cJSON_CreateArray();
		char full[72];
		snprintf(full, sizeof(full), "sha256:%s", id);
		cJSON_AddStringToObject(o, "id", full);
		cJSON_AddStringToObject(o, "store", dlk_store_url(ds.store));
		cJSON_AddNumberToObject(o, "bytes", (double)m.total);
		cJSON_AddItemToObject(o, "tags", tags_json(tags, nt, id));
		for (size_t i = 0; i < m.n; i++) {
			cJSON *f = cJSON_CreateObject();
			cJSON_AddStringToObject(f, "path", m.e[i].path);
			cJSON_AddNumberToObject(f, "size", (double)m.e[i].size);
			cJSON_AddStringToObject(f, "sha256", m.e[i].sha256);
			cJSON_AddItemToArray(files, f);
		}
		cJSON_AddItemToObject(o, "files", files);
		rc = print_structured(ctx, o, &err);
		cJSON_Delete(o);
		if (rc)
			goto fail;
		goto out;
	}
	dlk_fmt_bytes(size, sizeof(size), m.total);
	printf("dataset  sha256:%s\n", id);
	printf("store    %s\n", dlk_visible(dlk_store_url(ds.store)));
	printf("files    %zu, %s\n", m.n, size);
	printf("tags     %s\n", nt && *tags_of(tags, nt, id, &b) ? dlk_visible(b.data) : "(none)");
	printf("\n%10s  %-12s  %s\n", "SIZE", "SHA256", "PATH");
	for (size_t i = 0; i < m.n; i++) {
		dlk_fmt_bytes(size, sizeof(size), m.e[i].size);
		printf("%10s  %.12s  %s\n", size, m.e[i].sha256, dlk_visible(m.e[i].path));
	}
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	dlk_buf_release(&b);
	dlk_tags_free(tags, nt);
	dlk_manifest_release(&m);
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

static const struct dlk_option show_options[] = {
	OPT_STRING(0, "from", &show_from, "STORE", NULL, "the store the dataset is in",
	           .def_doc = "data.store of the project file", .complete = COMPLETE_DIR),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_data_show = {
	.usage = "DATASET",
	.description = "Show a dataset: its id, files with sizes and sha256, and tags. DATASET is sha256:ID, a\n"
	               "unique prefix of an id (at least 6 hex digits), NAME@TAG or NAME (NAME@latest).",
	.options = show_options,
	.min_pos = 1,
	.max_pos = 1,
	.run = run_show,
	.examples = "  $ dlk data show fashion@v1\n"
	            "  $ dlk data show sha256:1f2e3d4c -o json\n",
};

/* ---- get ---- */

static const char *get_from;

static int run_get(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_get_stats st = { 0 };
	struct bar bar = { { ctx, 0, 0 }, "getting" };
	char id[65], total[32], got[32];
	int rc = 0;

	dlk_interrupt_catch();
	if (dlk_data_maybe_project(ctx, get_from, &spec, &err) || dlk_data_store_open(ctx, get_from, spec, &ds, &err) ||
	    dlk_dataset_resolve(ds.store, args->pos[0], 1, id, &err) || dlk_dataset_manifest(ds.store, id, &m, &err))
		goto fail;
	if (dlk_dataset_get(ds.store, &m, args->pos[1], NULL, on_progress, &bar, &st, &err))
		goto fail;
	dlk_progress_clear(&bar.p);
	if (structured(ctx)) {
		cJSON *o = cJSON_CreateObject();
		char full[72];
		snprintf(full, sizeof(full), "sha256:%s", id);
		cJSON_AddStringToObject(o, "id", full);
		cJSON_AddStringToObject(o, "dir", args->pos[1]);
		cJSON_AddNumberToObject(o, "files", (double)st.files);
		cJSON_AddNumberToObject(o, "bytes", (double)st.bytes);
		cJSON_AddNumberToObject(o, "fetched", (double)st.fetched);
		cJSON_AddNumberToObject(o, "fetchedBytes", (double)st.fetched_bytes);
		cJSON_AddNumberToObject(o, "kept", (double)st.kept);
		rc = print_structured(ctx, o, &err);
		cJSON_Delete(o);
		if (rc)
			goto fail;
		goto out;
	}
	dlk_fmt_bytes(total, sizeof(total), st.bytes);
	dlk_fmt_bytes(got, sizeof(got), st.fetched_bytes);
	printf("sha256:%s\n", id);
	dlk_info(ctx, "got sha256:%.12s into %s: %zu file%s, %s, every one verified; fetched %zu (%s), %zu already there", id,
	         args->pos[1], st.files, st.files == 1 ? "" : "s", total, st.fetched, got, st.kept);
	goto out;
fail:
	dlk_progress_clear(&bar.p);
	rc = dlk_report(ctx, &err);
out:
	dlk_manifest_release(&m);
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

static const struct dlk_option get_options[] = {
	OPT_STRING(0, "from", &get_from, "STORE", NULL, "the store the dataset is in",
	           .def_doc = "data.store of the project file", .complete = COMPLETE_DIR),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_data_get = {
	.usage = "DATASET DIR",
	.description = "Download every file of DATASET into DIR (created when missing), each one checked against\n"
	               "the sha256 its manifest lists before it takes its name; files already in DIR with the\n"
	               "right digest are kept. An object of the store that does not match is named and\n"
	               "nothing is written in its place. An interrupted get continues where it stopped.",
	.options = get_options,
	.min_pos = 2,
	.max_pos = 2,
	.complete_pos = COMPLETE_DIR,
	.run = run_get,
	.examples = "  $ dlk data get fashion@v1 ./fashion\n"
	            "  $ dlk data get sha256:1f2e3d4c /tmp/data --from pvc://datasets/dlk\n",
};

/* ---- serve ---- */

static const char *serve_listen;
static double serve_idle_s;
static volatile sig_atomic_t serve_stop;

static void on_serve_signal(int sig)
{
	(void)sig;
	serve_stop = 1;
}

static void serve_ready(void *vctx, int port)
{
	const struct dlk_ctx *ctx = vctx;

	dlk_info(ctx, "serving the store on port %d", port);
}

static int run_serve(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_store_serve_opts o = { 0 };
	struct sigaction sa = { 0 };
	struct stat st;

	/* a store's directory appears with its first push, as a directory store's does */
	if (stat(args->pos[0], &st) < 0 && errno == ENOENT && dlk_mkdir_p(args->pos[0], &err))
		return dlk_report(ctx, &err);
	if (stat(args->pos[0], &st) < 0 || !S_ISDIR(st.st_mode)) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "'%s' is not a directory", args->pos[0]);
		return dlk_report(ctx, &err);
	}
	serve_stop = 0;
	sa.sa_handler = on_serve_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	o.root = args->pos[0];
	o.listen = serve_listen;
	o.token = getenv("DLK_STORE_TOKEN");
	o.idle_s = serve_idle_s;
	o.stop = &serve_stop;
	o.ready = serve_ready;
	o.ready_ctx = ctx;
	if (dlk_store_serve(&o, &err))
		return dlk_report(ctx, &err);
	return 0;
}

static const struct dlk_option serve_options[] = {
	OPT_STRING(0, "listen", &serve_listen, "ADDR", ":8080", "where to listen: HOST:PORT, or :PORT on every address"),
	OPT_DURATION(0, "idle", &serve_idle_s, "DURATION", "stop after this long without a request",
	             .def_doc = "never"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_data_serve = {
	.usage = "DIR",
	.description = "Serve the directory store DIR over HTTP until SIGTERM (or --idle). Every request must carry\n"
	               "the token in $DLK_STORE_TOKEN. A pvc:// store is this command in a short-lived pod, which\n"
	               "dlk reaches through the API server's pod proxy.",
	.options = serve_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_DIR,
	.run = run_serve,
	.examples = "  $ DLK_STORE_TOKEN=$(openssl rand -hex 16) dlk data serve /srv/datasets --listen 127.0.0.1:8080\n",
};

/* ---- the parent ---- */

const struct dlk_command_def dlk_cmd_data = {
	.usage = "",
	.description = "Versioned datasets. A dataset is a set of files named by the sha256 of its manifest (its\n"
	               "id); a store keeps each file once, by its own sha256. dlk.yaml names a dataset by id or\n"
	               "tag (data.dataset), and a run records the id it trained on.",
	.min_pos = 0,
	.max_pos = -1,
	.examples = "  $ dlk data push ./fashion --to s3://datasets/dlk --tag fashion@v1\n"
	            "  $ dlk data ls\n"
	            "  $ dlk data show fashion@v1\n"
	            "  $ dlk data get fashion@v1 ./copy\n",
};
