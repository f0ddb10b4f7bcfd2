#include "lib/render/render.h"
#include "lib/jobs/logarchive.h"
#include "lib/kube/kubeconfig.h"
#include "lib/runs/runs.h"
#include "lib/data/fetch.h"
#include "lib/render/embedded.h"
#include "lib/render/mustache.h"
#include "lib/util/buf.h"
#include "lib/program/supervise.h"
#include "lib/util/utf8.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"
#include "lib/util/yamljson.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TEMPLATES 64

struct render_templates {
	size_t n;
	const char *names[MAX_TEMPLATES + 1]; /* borrowed from dlk_builtin_templates */
	struct mustache *t[MAX_TEMPLATES];
};

const char *const *render_builtin_names(void)
{
	static const char *names[MAX_TEMPLATES + 1];
	size_t i;

	for (i = 0; i < MAX_TEMPLATES && dlk_builtin_templates[i].name; i++)
		names[i] = dlk_builtin_templates[i].name;
	names[i] = NULL;
	return names;
}

void render_templates_free(struct render_templates *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		mustache_free(set->t[i]);
	free(set);
}

static int builtin_index(const struct render_templates *set, const char *name)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->names[i], name))
			return (int)i;
	return -1;
}

static int is_yaml_name(const char *n)
{
	size_t l = strlen(n);
	return l > 5 && !strcmp(n + l - 5, ".yaml") && n[0] != '.';
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int load_overrides(struct render_templates *set, const char *dir, int optional, struct dlk_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *files[MAX_TEMPLATES * 4];
	size_t nf = 0;
	int rc = -1;

	if (!d) {
		if (errno == ENOENT && optional)
			return 0;
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot open template directory '%s': %s", dir, strerror(errno));
	}
	while ((de = readdir(d))) {
		if (!is_yaml_name(de->d_name))
			continue;
		if (nf == DLK_ARRAY_SIZE(files)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' holds too many templates", dir);
			goto out;
		}
		files[nf++] = xstrdup(de->d_name);
	}
	/* readdir order is arbitrary: sort, so the first error reported is the same every time */
	qsort(files, nf, sizeof(files[0]), name_cmp);
	for (size_t i = 0; i < nf; i++) {
		int idx = builtin_index(set, files[i]);
		char *path = xasprintf("%s/%s", dir, files[i]);
		if (idx < 0) {
			struct dlk_buf valid = DLK_BUF_INIT;
			const char *s = dlk_suggest(files[i], set->names, set->n);
			for (size_t k = 0; k < set->n; k++)
				dlk_buf_addf(&valid, "%s%s", k ? ", " : "", set->names[k]);
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' overrides no built-in template%s%s%s", path,
			         s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
			dlk_err_hint(err, "template names are: %s", valid.data);
			dlk_buf_release(&valid);
			free(path);
			goto out;
		}
		struct dlk_buf text = DLK_BUF_INIT;
		char msg[512];
		if (dlk_buf_read_file(&text, path, MUSTACHE_MAX_TEMPLATE, msg, sizeof(msg)) < 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s", msg);
			dlk_buf_release(&text);
			free(path);
			goto out;
		}
		struct mustache *t = mustache_parse(path, text.data, text.len, err);
		dlk_buf_release(&text);
		free(path);
		if (!t)
			goto out;
		mustache_free(set->t[idx]);
		set->t[idx] = t;
	}
	rc = 0;
out:
	for (size_t i = 0; i < nf; i++)
		free(files[i]);
	closedir(d);
	return rc;
}

struct render_templates *render_templates_load(const char *dir, int dir_optional, struct dlk_err *err)
{
	struct render_templates *set = xcalloc(1, sizeof(*set));

	for (size_t i = 0; dlk_builtin_templates[i].name; i++) {
		const struct dlk_embedded *e = &dlk_builtin_templates[i];
		if (set->n == MAX_TEMPLATES) {
			dlk_errf(err, DLK_EXIT_FAIL, "more than %d built-in templates", MAX_TEMPLATES);
			goto fail;
		}
		set->names[set->n] = e->name;
		set->t[set->n] = mustache_parse(e->name, e->data, e->len, err);
		if (!set->t[set->n])
			goto fail;
		set->n++;
	}
	if (dir && load_overrides(set, dir, dir_optional, err) < 0)
		goto fail;
	return set;
fail:
	render_templates_free(set);
	return NULL;
}

static const struct mustache *find_partial(void *ud, const char *name, struct dlk_err *err)
{
	const struct render_templates *set = ud;
	int i = builtin_index(set, name);

	if (i < 0) {
		char sug[DLK_ERR_MSG_MAX / 2];
		dlk_suggest_or_list(sug, sizeof(sug), name, set->names, set->n, "templates are");
		dlk_errf(err, DLK_EXIT_CONFIG, "unknown partial '%s'%s", name, sug);
		return NULL;
	}
	return set->t[i];
}

/* "job.yaml (rendered):12:5: problem" plus the rendered line, so a user can see what broke */
static void show_rendered_line(struct dlk_err *err, const char *text, size_t len, size_t line)
{
	size_t cur = 1, i = 0;

	if (!line)
		return;
	while (i < len && cur < line) {
		if (text[i++] == '\n')
			cur++;
	}
	if (cur != line)
		return;
	const char *nl = memchr(text + i, '\n', len - i);
	size_t end = nl ? (size_t)(nl - text) : len;
	size_t used = strlen(err->msg);
	snprintf(err->msg + used, sizeof(err->msg) - used, "\n    %zu | %.*s", line,
	         (int)(end - i > 300 ? 300 : end - i), text + i);
}

static int check_object(const cJSON *o, const char *file, int n, struct dlk_err *err)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");

	if (!cJSON_IsObject(o) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "apiVersion")) ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "kind")) || !cJSON_IsObject(md) ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(md, "name")))
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "%s: rendered document %d is not a Kubernetes object (a mapping with apiVersion, kind "
		                "and metadata.name strings)", file, n);
	return 0;
}

cJSON *render_objects(const struct render_templates *set, const char *const *names, const cJSON *ctx,
                      struct dlk_err *err)
{
	struct mustache_partials partials = { find_partial, (void *)set };
	cJSON *objects = cJSON_CreateArray();
	struct dlk_buf out = DLK_BUF_INIT;

	for (; *names; names++) {
		int i = builtin_index(set, *names);
		const char *file;
		size_t line = 0;

		if (i < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "no template named '%s'", *names);
			goto fail;
		}
		file = mustache_file(set->t[i]);
		dlk_buf_reset(&out);
		/* strict about branches this spec does not take, too: a typo in an override's GPU
		 * section must not wait for the first GPU job to show */
		if (mustache_check(set->t[i], ctx, &partials, err) < 0)
			goto fail;
		if (mustache_render(set->t[i], ctx, &partials, RENDER_MAX_OUTPUT, &out, err) < 0)
			goto fail;
		char *what = xasprintf("%s (rendered)", file);
		cJSON *docs = yamljson_parse(out.data, out.len, what, &line, err);
		free(what);
		if (!docs) {
			show_rendered_line(err, out.data, out.len, line);
			goto fail;
		}
		int n = 0;
		while (cJSON_GetArraySize(docs) > 0) {
			cJSON *o = cJSON_DetachItemFromArray(docs, 0);
			n++;
			if (check_object(o, file, n, err) < 0) {
				cJSON_Delete(o);
				cJSON_Delete(docs);
				goto fail;
			}
			cJSON_AddItemToArray(objects, o);
		}
		cJSON_Delete(docs);
	}
	dlk_buf_release(&out);
	return objects;
fail:
	dlk_buf_release(&out);
	cJSON_Delete(objects);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* the context of a training run */

static cJSON *str_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *kv_list(const struct dlk_kv *kv, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "key", str_or_null(kv[i].key));
		cJSON_AddItemToObject(o, "value", str_or_null(kv[i].value));
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

static int need(const char *value, const char *field, struct dlk_err *err)
{
	if (value && *value)
		return 0;
	return dlk_errf(err, DLK_EXIT_CONFIG, "spec field '%s' is not set: cannot render the job", field);
}

/* The claims that the data sources name (pvc://CLAIM/PATH), and a dataset's store when it is
 * pvc://CLAIM[/PATH], each once, in the order they come: [{claim, volume, mount}]: volume is
 * the pod's name for it, mount where the worker reads it (DLK_PVC_ROOT/CLAIM). A malformed URL
 * is left to the worker, which says what is wrong with it. */
static cJSON *data_claims(const struct dlk_data *d)
{
	const struct dlk_split *sp[2] = { &d->train, &d->test };
	size_t nu = 0, cap = 9 + (size_t)(d->train.n_shards > 0 ? d->train.n_shards : 0) +
	                     (size_t)(d->test.n_shards > 0 ? d->test.n_shards : 0);
	const char **urls = xcalloc(cap, sizeof(*urls));
	cJSON *arr = cJSON_CreateArray();
	int n = 0;

	for (int k = 0; k < 2; k++) {
		urls[nu++] = sp[k]->images.url;
		urls[nu++] = sp[k]->labels.url;
		urls[nu++] = sp[k]->source.url;
		urls[nu++] = sp[k]->targets.url; /* paired image folders */
		for (int i = 0; sp[k]->shards && i < sp[k]->n_shards; i++)
			urls[nu++] = sp[k]->shards[i].url;
	}
	urls[nu++] = d->dataset.id || d->dataset.tag ? d->store : NULL; /* last */
	for (size_t i = 0; i < nu; i++) {
		const char *u = urls[i], *claim, *slash;
		const cJSON *e;
		size_t len;
		int seen = 0;
		if (!u || strncmp(u, "pvc://", 6))
			continue;
		claim = u + 6;
		slash = strchr(claim, '/');
		if (!slash && i == nu - 1) /* a store may be a whole claim */
			slash = claim + strlen(claim);
		if (!slash || slash == claim)
			continue;
		len = (size_t)(slash - claim);
		cJSON_ArrayForEach(e, arr) {
			const char *have = cJSON_GetObjectItemCaseSensitive(e, "claim")->valuestring;
			if (strlen(have) == len && !strncmp(have, claim, len))
				seen = 1;
		}
		if (seen)
			continue;
		cJSON *o = cJSON_CreateObject();
		char *s = xstrndup(claim, len);
		cJSON_AddStringToObject(o, "claim", s);
		free(s);
		s = xasprintf("data-%d", n++);
		cJSON_AddStringToObject(o, "volume", s);
		free(s);
		s = xasprintf("%s/%.*s", DLK_PVC_ROOT, (int)len, claim);
		cJSON_AddStringToObject(o, "mount", s);
		free(s);
		cJSON_AddItemToArray(arr, o);
	}
	free(urls);
	return arr;
}

/* Where pods go and what they get: node_selector, tolerations, gpu, gpus, gpu_quantity,
 * gpu_product, cpu, memory, has_node_selector, has_tolerations, priority_class. Training and
 * serving pods share resources' selectors and tolerations; gpus, cpu and memory are each's own. */
static void add_placement(cJSON *c, const struct dlk_resources *res, int gpus, const char *cpu, const char *memory)
{
	char *s;

	cJSON_AddItemToObject(c, "node_selector", kv_list(res->node_selector, res->n_node_selector));
	cJSON *tol = cJSON_AddArrayToObject(c, "tolerations");
	for (int i = 0; i < res->n_tolerations; i++) {
		const struct dlk_toleration *t = &res->tolerations[i];
		cJSON *to = cJSON_CreateObject();
		cJSON_AddItemToObject(to, "key", str_or_null(t->key));
		/* Kubernetes' own default, written out so the template needs no special case */
		cJSON_AddStringToObject(to, "operator", t->op ? t->op : "Equal");
		cJSON_AddItemToObject(to, "value", str_or_null(t->value));
		cJSON_AddItemToObject(to, "effect", str_or_null(t->effect));
		cJSON_AddItemToArray(tol, to);
	}
	cJSON_AddBoolToObject(c, "gpu", gpus > 0);
	cJSON_AddNumberToObject(c, "gpus", gpus);
	s = xasprintf("%d", gpus);
	cJSON_AddStringToObject(c, "gpu_quantity", s);
	free(s);
	cJSON_AddItemToObject(c, "gpu_product", str_or_null(gpus > 0 ? res->gpu_product : NULL));
	cJSON_AddStringToObject(c, "cpu", cpu);
	cJSON_AddStringToObject(c, "memory", memory);
	cJSON_AddBoolToObject(c, "has_node_selector", (gpus > 0 && res->gpu_product) || res->n_node_selector > 0);
	cJSON_AddBoolToObject(c, "has_tolerations", gpus > 0 || res->n_tolerations > 0);
	cJSON_AddItemToObject(c, "priority_class", str_or_null(res->priority_class));
}

/* names the Job's container sets itself: a program.env entry of the same name would change what
 * dlk reads (the supervisor gives the program its own values of them anyway) */
static int env_rendered_by_dlk(const char *k)
{
	static const char *const own[] = { "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "POD_NAME", "NETRC", NULL };
	for (int i = 0; own[i]; i++)
		if (!strcmp(own[i], k))
			return 1;
	return !strncmp(k, "DLK_", 4);
}

static cJSON *int_list(const int *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
	return a;
}

/* A ConfigMap key for the file at path: its index and base name, in the characters keys allow
 * ([-._a-zA-Z0-9]); the volume's items put it back at path. */
static char *code_key(size_t i, const char *path)
{
	const char *base = strrchr(path, '/');
	char *k = xasprintf("%zu-%.200s", i, base ? base + 1 : path);
	for (char *c = k; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
		      *c == '.' || *c == '_'))
			*c = '_';
	return k;
}

/* program.code: the tree read into code.{enabled, config_map, digest, mount, files, binary,
 * has_files, has_binary, items}; 0 or -1 with err */
static int add_program_code(cJSON *code, const struct dlk_project *spec, const struct render_opts *opts,
                            struct dlk_err *err)
{
	const struct dlk_program *p = &spec->program;
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_buf data = DLK_BUF_INIT, b64 = DLK_BUF_INIT;
	cJSON *files = cJSON_CreateArray(), *binary = cJSON_CreateArray(), *items = cJSON_CreateArray();
	const char *pdir = opts && opts->project_dir ? opts->project_dir : ".";
	char *dir = NULL, *s;
	size_t shipped = 0;
	int rc = -1;

	cJSON_AddBoolToObject(code, "enabled", p->code != NULL);
	cJSON_AddItemToObject(code, "files", files);
	cJSON_AddItemToObject(code, "binary", binary);
	cJSON_AddItemToObject(code, "items", items);
	cJSON_AddStringToObject(code, "mount", p->workdir ? p->workdir : RENDER_CODE_MOUNT);
	if (!p->code) {
		cJSON_AddNullToObject(code, "config_map");
		cJSON_AddNullToObject(code, "digest");
		cJSON_AddBoolToObject(code, "has_files", 0);
		cJSON_AddBoolToObject(code, "has_binary", 0);
		return 0;
	}
	dir = xasprintf("%s/%s", pdir, p->code);
	if (dlk_program_code_manifest(dir, &m, err))
		goto out;
	if (!m.n) {
		dlk_errf(err, DLK_EXIT_CONFIG, "program.code '%s' holds no files to ship", dlk_visible(p->code));
		goto out;
	}
	for (size_t i = 0; i < m.n; i++) {
		const struct dlk_manifest_entry *e = &m.e[i];
		char msg[512];
		struct stat st;
		cJSON *o;
		char *key;

		/* the limit before reading: a tree of checkpoints is refused without reading it */
		if (shipped + e->size > RENDER_MAX_CODE_BYTES || m.total > 4ull * RENDER_MAX_CODE_BYTES) {
			dlk_errf(err, DLK_EXIT_CONFIG, "program.code '%s' holds %llu bytes in %zu files: more than the %u KiB "
			         "dlk ships in a ConfigMap (the API server takes at most 1 MiB per object)",
			         dlk_visible(p->code), m.total, m.n, RENDER_MAX_CODE_BYTES >> 10);
			dlk_err_hint(err, "name a smaller directory as program.code (data and checkpoints do not belong in it: "
			             "data: and DLK_CHECKPOINT_DIR carry them), or bake the code into program.image and drop "
			             "program.code");
			goto out;
		}
		dlk_buf_reset(&data);
		if (dlk_buf_read_file(&data, e->local, RENDER_MAX_CODE_BYTES, msg, sizeof(msg)) < 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "program.code: %s", msg);
			goto out;
		}
		key = code_key(i, e->path);
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "key", key);
		/* text goes as it is (what `kubectl get` shows); anything else as base64 binaryData */
		if (dlk_utf8_valid(data.data, data.len) && !memchr(data.data, '\0', data.len)) {
			cJSON_AddStringToObject(o, "content", data.len ? data.data : "");
			cJSON_AddItemToArray(files, o);
			shipped += data.len + strlen(key);
		} else {
			dlk_buf_reset(&b64);
			dlk_buf_add_base64(&b64, data.data, data.len);
			cJSON_AddStringToObject(o, "content", b64.len ? b64.data : "");
			cJSON_AddItemToArray(binary, o);
			shipped += b64.len + strlen(key);
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "key", key);
		cJSON_AddStringToObject(o, "path", e->path);
		/* the program may run a script of its tree: executables stay executable */
		cJSON_AddNumberToObject(o, "mode", stat(e->local, &st) == 0 && (st.st_mode & 0111) ? 0755 : 0644);
		cJSON_AddItemToArray(items, o);
		free(key);
	}
	if (shipped > RENDER_MAX_CODE_BYTES) {
		dlk_errf(err, DLK_EXIT_CONFIG, "program.code '%s' takes %zu bytes as a ConfigMap (binary files grow by a "
		         "third in base64): more than the %u KiB dlk ships in one (the API server takes at most 1 MiB per "
		         "object)", dlk_visible(p->code), shipped, RENDER_MAX_CODE_BYTES >> 10);
		dlk_err_hint(err, "name a smaller directory as program.code, or bake the code into program.image and drop "
		             "program.code");
		goto out;
	}
	/* named by the digest: a new tree is a new object, and a running gang never sees its code change */
	s = xasprintf("%s-code-%.12s", spec->name, m.id);
	cJSON_AddStringToObject(code, "config_map", s);
	free(s);
	cJSON_AddStringToObject(code, "digest", m.id);
	cJSON_AddBoolToObject(code, "has_files", cJSON_GetArraySize(files) > 0);
	cJSON_AddBoolToObject(code, "has_binary", cJSON_GetArraySize(binary) > 0);
	rc = 0;
out:
	dlk_manifest_release(&m);
	dlk_buf_release(&data);
	dlk_buf_release(&b64);
	free(dir);
	return rc;
}

/* where a program pod's init container places dlk for an image without it */
#define RENDER_PLACED_DIR "/dlk"

/* program.{enabled, workdir, env, fail_codes, restart_codes, has_fail, has_restart, procs, code,
 * placed.{enabled, image, dir}, supervisor}:
 * the user's program (docs/program-cluster.md); every key present when there is none */
static int add_program(cJSON *c, const struct dlk_project *spec, const struct render_opts *opts, struct dlk_err *err)
{
	const struct dlk_program *p = &spec->program;
	cJSON *o = cJSON_AddObjectToObject(c, "program"), *env = cJSON_CreateArray();
	int on = p->present;
	char *s;

	cJSON_AddBoolToObject(o, "enabled", on);
	/* the code's mount is the working directory when there is no other */
	cJSON_AddItemToObject(o, "workdir",
	                      str_or_null(!on ? NULL : p->workdir ? p->workdir : p->code ? RENDER_CODE_MOUNT : NULL));
	for (int i = 0; on && i < p->n_env; i++) {
		struct dlk_buf v = DLK_BUF_INIT;
		if (env_rendered_by_dlk(p->env[i].key))
			continue;
		/* Kubernetes expands $(NAME) in env values; the supervisor does not: $$ keeps it literal,
		 * so the container sees what the program gets */
		for (const char *q = p->env[i].value; *q; q++) {
			if (q[0] == '$' && q[1] == '(')
				dlk_buf_addc(&v, '$');
			dlk_buf_addc(&v, *q);
		}
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "key", p->env[i].key);
		cJSON_AddStringToObject(e, "value", v.len ? v.data : "");
		cJSON_AddItemToArray(env, e);
		dlk_buf_release(&v);
	}
	cJSON_AddItemToObject(o, "env", env);
	cJSON_AddItemToObject(o, "fail_codes", int_list(p->fail_codes, on ? p->n_fail_codes : 0));
	cJSON_AddItemToObject(o, "restart_codes", int_list(p->restart_codes, on ? p->n_restart_codes : 0));
	cJSON_AddBoolToObject(o, "has_fail", on && p->n_fail_codes > 0);
	cJSON_AddBoolToObject(o, "has_restart", on && p->n_restart_codes > 0);
	/* what the supervisor starts per pod: 0 is one per GPU */
	s = xasprintf("%d", !on ? 1 : p->procs_per_worker > 0 ? p->procs_per_worker
	                              : spec->resources.gpus > 0 ? spec->resources.gpus : 1);
	cJSON_AddStringToObject(o, "procs", s);
	free(s);
	/* an image of the user's (program.image other than dlk's own image): it holds no dlk, so an
	 * init container from dlk's image places a self-contained one in an emptyDir, and the
	 * container starts that (lib/program/place.h) */
	{
		int placed = on && p->image && spec->image && strcmp(p->image, spec->image);
		cJSON *pl = cJSON_AddObjectToObject(o, "placed");
		cJSON_AddBoolToObject(pl, "enabled", placed);
		cJSON_AddStringToObject(pl, "image", spec->image ? spec->image : "");
		cJSON_AddStringToObject(pl, "dir", RENDER_PLACED_DIR);
		cJSON_AddStringToObject(o, "supervisor", placed ? RENDER_PLACED_DIR "/dlk" : "dlk");
	}
	return add_program_code(cJSON_AddObjectToObject(o, "code"), spec, opts, err);
}

/* Keys (every one always present, null when the spec has no value, so that strict rendering
 * catches misspelled names in templates):
 *   name, namespace, image, version, spec_yaml
 *   config_map, service, service_account, role          object names
 *   workers, master_port, backoff_limit_per_index, termination_grace_seconds   numbers
 *   env.master_addr, env.master_port, env.world_size   env values (strings)
 *   labels, node_selector                             lists of {key, value}
 *   tolerations                                       list of {key, operator, value, effect}
 *   gpu (bool), gpus (number), gpu_quantity (string), gpu_product, cpu, memory, shm_size
 *   has_node_selector, has_tolerations                 bools: whether those blocks are needed
 *   priority_class, queue, schedule                    string or null
 *   storage.{claim, create, size, storage_class, mount, access_mode}
 *   log_archive                                       string or null: with a checkpoint volume, the
 *                                                     folder of it where workers archive their logs
 *   netrc_secret                                      string or null: data.netrc_secret
 *   store_secret                                      string or null: data.store_secret (envFrom)
 *   data_cache.{enabled, empty_dir, host_path, checkpoint, path, mount, max_bytes}
 *                                                     the node cache of a dataset's objects:
 *                                                     enabled (data.dataset is set), which volume
 *                                                     (bools), the hostPath, where the worker
 *                                                     mounts it, its bound in bytes (a string)
 *   data_claims                                       the claims pvc:// data sources and a pvc://
 *                                                     dataset store name: a list of {claim, volume, mount}
 *   exit.{usage, config, restartable, resized}         worker exit codes (podFailurePolicy)
 *   git.commit (string or null), git.dirty ("true"/"false")  the project's commit, for the record
 *   log_format                                        "text" or "json": logging.format, the pods' logs
 *   metrics.{enabled, port, port_text, path}            Prometheus metrics of every worker
 *                                                     (resources.metrics_port; 0: not enabled)
 *   program.{enabled, workdir, env, procs}            the user's program (program:): the container's
 *                                                     workingDir (string or null), program.env as
 *                                                     {key, value} (but names the container sets
 *                                                     itself), the processes per pod (a string)
 *   program.{fail_codes, restart_codes, has_fail, has_restart}   exit_codes, for podFailurePolicy
 *   program.code.{enabled, config_map, digest, mount, has_files, has_binary}   program.code shipped
 *                                                     as a ConfigMap named by its digest, mounted at mount
 *   program.code.{files, binary}                      its data and binaryData: {key, content}
 *   program.code.items                                the volume's {key, path, mode}
 * With a program, image is program.image (else the project's), master_port program.port. */
cJSON *render_context_train(const struct dlk_project *spec, const char *spec_yaml, const struct render_opts *opts,
                            struct dlk_err *err)
{
	const struct dlk_resources *res = &spec->resources;
	const struct dlk_storage *st = &spec->storage;
	const char *ns = kube_namespace_pick(opts ? opts->namespace_ : NULL, spec->namespace_, NULL);
	/* a program's gang meets on program.port */
	int port = spec->program.present ? spec->program.port : res->master_port;
	cJSON *c, *o;
	char *s;

	if (need(spec->name, "name", err) ||
	    need(spec->program.present && spec->program.image ? spec->program.image : spec->image, "image", err) ||
	    need(res->cpu, "resources.cpu", err) ||
	    need(res->memory, "resources.memory", err) || need(spec_yaml, "(the resolved spec text)", err))
		return NULL;
	if (res->gpus > 0 && need(res->shm_size, "resources.shm_size", err))
		return NULL;
	if ((st->claim || st->size) && need(st->mount, "storage.mount", err))
		return NULL;
	if (res->workers < 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "resources.workers is %d: at least 1 is needed", res->workers), NULL;
	if (port < 1 || port > 65535)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s %d is not a TCP port",
		                spec->program.present ? "program.port" : "resources.master_port", port), NULL;
	if (res->metrics_port > 0 && res->metrics_port == port)
		return dlk_errf(err, DLK_EXIT_CONFIG, "resources.metrics_port and %s are both %d: the workers need two ports",
		                spec->program.present ? "program.port" : "resources.master_port", port), NULL;
	if (strlen(spec_yaml) > RENDER_MAX_SPEC_YAML)
		return dlk_errf(err, DLK_EXIT_CONFIG, "the resolved spec is %zu bytes; a ConfigMap takes at most %u here",
		                strlen(spec_yaml), RENDER_MAX_SPEC_YAML), NULL;

	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "name", spec->name);
	cJSON_AddStringToObject(c, "namespace", ns);
	/* a program runs in its own image when it names one */
	cJSON_AddStringToObject(c, "image", spec->program.present && spec->program.image ? spec->program.image : spec->image);
	cJSON_AddStringToObject(c, "version", DLK_VERSION);
	cJSON_AddStringToObject(c, "spec_yaml", spec_yaml);

	s = xasprintf("%s-spec", spec->name);
	cJSON_AddStringToObject(c, "config_map", s);
	free(s);
	s = xasprintf("%s%s", spec->name, DLK_RUNS_CONFIGMAP_SUFFIX);
	cJSON_AddStringToObject(c, "runs_config_map", s);
	free(s);
	cJSON_AddStringToObject(c, "service", spec->name);
	cJSON_AddStringToObject(c, "service_account", spec->name);
	cJSON_AddStringToObject(c, "role", spec->name);

	cJSON_AddNumberToObject(c, "workers", res->workers);
	cJSON_AddNumberToObject(c, "master_port", port);
	cJSON_AddNumberToObject(c, "backoff_limit_per_index", res->backoff_limit_per_index);
	cJSON_AddNumberToObject(c, "termination_grace_seconds", RENDER_TERMINATION_GRACE_S);

	o = cJSON_AddObjectToObject(c, "env");
	/* pod 0 of an Indexed Job is <job>-0, reachable as <job>-0.<service>; a CronJob's Jobs get
	 * their names when they start, so the address is spelled with the pod's own DLK_JOB_NAME
	 * (Kubernetes expands $(VAR) from earlier entries of env) */
	s = spec->schedule ? xasprintf("$(DLK_JOB_NAME)-0.%s", spec->name) : xasprintf("%s-0.%s", spec->name, spec->name);
	cJSON_AddStringToObject(o, "master_addr", s);
	free(s);
	s = xasprintf("%d", port);
	cJSON_AddStringToObject(o, "master_port", s);
	free(s);
	s = xasprintf("%d", res->workers);
	cJSON_AddStringToObject(o, "world_size", s);
	free(s);

	cJSON_AddItemToObject(c, "labels", kv_list(spec->labels, spec->n_labels));
	add_placement(c, res, res->gpus, res->cpu, res->memory);
	cJSON_AddItemToObject(c, "shm_size", str_or_null(res->shm_size));
	cJSON_AddItemToObject(c, "queue", str_or_null(res->queue));
	cJSON_AddItemToObject(c, "schedule", str_or_null(spec->schedule));
	cJSON_AddItemToObject(c, "netrc_secret", str_or_null(spec->data.netrc_secret));
	cJSON_AddItemToObject(c, "store_secret", str_or_null(spec->data.store_secret));
	{
		const struct dlk_node_cache *nc = &spec->data.node_cache;
		int on = spec->data.dataset.id || spec->data.dataset.tag;
		o = cJSON_AddObjectToObject(c, "data_cache");
		cJSON_AddBoolToObject(o, "enabled", on);
		cJSON_AddBoolToObject(o, "empty_dir", on && nc->volume == DLK_CACHE_EMPTYDIR);
		cJSON_AddBoolToObject(o, "host_path", on && nc->volume == DLK_CACHE_HOSTPATH);
		cJSON_AddBoolToObject(o, "checkpoint", on && nc->volume == DLK_CACHE_CHECKPOINT);
		cJSON_AddItemToObject(o, "path", str_or_null(nc->host_path));
		cJSON_AddStringToObject(o, "mount", RENDER_DATA_CACHE_MOUNT);
		s = xasprintf("%lld", nc->max_bytes);
		cJSON_AddStringToObject(o, "max_bytes", s);
		free(s);
		if (on && nc->volume == DLK_CACHE_CHECKPOINT && !st->claim && !st->size) {
			cJSON_Delete(c);
			return dlk_errf(err, DLK_EXIT_CONFIG, "data.node_cache.volume is checkpoint but there is no checkpoint "
			                "volume (storage.claim or storage.size)"), NULL;
		}
		if (on && nc->volume == DLK_CACHE_HOSTPATH && !nc->host_path) {
			cJSON_Delete(c);
			return dlk_errf(err, DLK_EXIT_CONFIG, "data.node_cache.host_path is not set: cannot render the job"), NULL;
		}
	}
	cJSON_AddItemToObject(c, "data_claims", data_claims(&spec->data));

	/* the folder of the checkpoint volume where workers archive their logs */
	if (st->claim || st->size) {
		s = xasprintf("%s/%s/%s", st->mount, DLK_LOG_ARCHIVE_DIR, spec->name);
		cJSON_AddStringToObject(c, "log_archive", s);
		free(s);
	} else {
		cJSON_AddNullToObject(c, "log_archive");
	}

	o = cJSON_AddObjectToObject(c, "storage");
	if (st->claim) {
		cJSON_AddStringToObject(o, "claim", st->claim);
		cJSON_AddBoolToObject(o, "create", 0);
	} else if (st->size) {
		s = xasprintf("%s-checkpoints", spec->name);
		cJSON_AddStringToObject(o, "claim", s);
		free(s);
		cJSON_AddBoolToObject(o, "create", 1);
	} else {
		cJSON_AddNullToObject(o, "claim");
		cJSON_AddBoolToObject(o, "create", 0);
	}
	cJSON_AddItemToObject(o, "size", str_or_null(st->claim ? NULL : st->size));
	cJSON_AddItemToObject(o, "storage_class", str_or_null(st->storage_class));
	cJSON_AddItemToObject(o, "mount", str_or_null(st->mount));
	/* every worker mounts the checkpoint volume; workers on several nodes need ReadWriteMany */
	cJSON_AddStringToObject(o, "access_mode", res->workers > 1 ? "ReadWriteMany" : "ReadWriteOnce");

	o = cJSON_AddObjectToObject(c, "exit");
	cJSON_AddNumberToObject(o, "usage", DLK_EXIT_USAGE);
	cJSON_AddNumberToObject(o, "config", DLK_EXIT_CONFIG);
	cJSON_AddNumberToObject(o, "restartable", DLK_EXIT_RESTARTABLE);
	cJSON_AddNumberToObject(o, "resized", DLK_EXIT_RESIZED);

	cJSON_AddStringToObject(c, "log_format", spec->logging.format == DLK_LOGFMT_JSON ? "json" : "text");
	o = cJSON_AddObjectToObject(c, "metrics");
	cJSON_AddBoolToObject(o, "enabled", res->metrics_port > 0);
	cJSON_AddNumberToObject(o, "port", res->metrics_port);
	s = xasprintf("%d", res->metrics_port);
	cJSON_AddStringToObject(o, "port_text", s);
	free(s);
	cJSON_AddStringToObject(o, "path", "/metrics");

	o = cJSON_AddObjectToObject(c, "git");
	cJSON_AddItemToObject(o, "commit", str_or_null(opts && opts->git_commit && *opts->git_commit ? opts->git_commit : NULL));
	cJSON_AddStringToObject(o, "dirty", opts && opts->git_dirty ? "true" : "false");
	if (add_program(c, spec, opts, err)) {
		cJSON_Delete(c);
		return NULL;
	}
	return c;
}

static const char *const train_templates[] = {
	"configmap.yaml", "code-configmap.yaml", "runs.yaml", "serviceaccount.yaml", "role.yaml", "rolebinding.yaml", "pvc.yaml",
	"service.yaml", "job.yaml", "cronjob.yaml", NULL,
};

cJSON *render_train(const struct dlk_project *spec, const char *spec_yaml, const struct render_opts *opts,
                    struct dlk_err *err)
{
	struct render_templates *set = NULL;
	cJSON *ctx = NULL, *objects = NULL;

	ctx = render_context_train(spec, spec_yaml, opts, err);
	if (!ctx)
		goto out;
	set = render_templates_load(opts ? opts->templates_dir : NULL, opts ? opts->templates_dir_optional : 0, err);
	if (!set)
		goto out;
	objects = render_objects(set, train_templates, ctx, err);
out:
	render_templates_free(set);
	cJSON_Delete(ctx);
	return objects;
}

cJSON *render_train_project(const struct dlk_project *spec, const char *project_file, const char *templates_dir,
                            const char *namespace_, struct dlk_err *err)
{
	return render_train_project_git(spec, project_file, templates_dir, namespace_, NULL, 0, err);
}

/* the project's own templates: templates/ beside its project file */
static char *templates_dir_of(const char *project_file)
{
	char *dir = dlk_dir_of(project_file), *t;

	t = strcmp(dir, ".") ? xasprintf("%s/templates", dir) : xstrdup("templates");
	free(dir);
	return t;
}

cJSON *render_train_project_git(const struct dlk_project *spec, const char *project_file, const char *templates_dir,
                                const char *namespace_, const char *git_commit, int git_dirty, struct dlk_err *err)
{
	struct render_opts ro = RENDER_OPTS_INIT;
	char *tdir = NULL, *yaml = project_dump_yaml(spec), *pdir = dlk_dir_of(project_file);
	cJSON *objects;

	ro.namespace_ = namespace_;
	ro.git_commit = git_commit;
	ro.git_dirty = git_dirty;
	ro.project_dir = pdir;
	if (templates_dir) {
		ro.templates_dir = templates_dir;
	} else {
		/* the project's own templates/, next to its file, when there is one */
		tdir = templates_dir_of(project_file);
		ro.templates_dir = tdir;
		ro.templates_dir_optional = 1;
	}
	objects = render_train(spec, yaml, &ro, err);
	free(pdir);
	free(tdir);
	free(yaml);
	return objects;
}

int render_serving_hpa(const struct dlk_project *spec, const struct render_serving *sv)
{
	return !sv->canary && spec->serving.max_replicas > spec->serving.replicas;
}

/* Keys of a serving track (always present, as for training):
 *   name, namespace, image, version, spec_yaml, labels      as for training
 *   spec_digest                                             sha256 of the resolved spec (project_digest)
 *   deployment, service, config_map, track                  object names; "stable" or "canary"
 *   replicas, port, port_arg (string), canary_percent (string)
 *   termination_grace_seconds, drain_delay_seconds (0: no preStop hook)
 *   progress_deadline_seconds, startup_failure_threshold
 *   placement (see add_placement) from serving.gpus/cpu/memory and resources' selectors
 *   model.{arg, claim, sha256_pin, sha256, source, accuracy, revision}  the worker's model argument
 *                                                           (NAME=PATH or NAME=URL) and its origin
 *   hpa.{create, min_replicas, max_replicas, target_cpu_percent}, pdb (bool)
 *   route.{enabled, gateway_name, gateway_namespace, track_service, stable_service, canary_service,
 *          with_canary, stable_weight, canary_weight}   the HTTPRoute and the tracks' Services */
/* server.{enabled, image, command (a list, null: the image's entrypoint), env [{key, value}],
 * port, ready_path, live_path, metrics_path (null: none)}: serving.program, the user's own
 * server in place of `dlk serve --worker` (docs/program.md); its container port is the one the
 * Services' targetPort (http) names */
static void add_server(cJSON *c, const struct dlk_serving *sg)
{
	const struct dlk_program_server *p = &sg->program;
	cJSON *o = cJSON_AddObjectToObject(c, "server"), *env = cJSON_CreateArray();
	int on = p->present;

	cJSON_AddBoolToObject(o, "enabled", on);
	cJSON_AddStringToObject(o, "image", on && p->image ? p->image : "");
	cJSON_AddBoolToObject(o, "has_command", on && p->n_command > 0);
	if (on && p->n_command) {
		cJSON *cmd = cJSON_AddArrayToObject(o, "command");
		for (int i = 0; i < p->n_command; i++)
			cJSON_AddItemToArray(cmd, cJSON_CreateString(p->command[i]));
	} else {
		cJSON_AddNullToObject(o, "command");
	}
	for (int i = 0; on && i < p->n_env; i++) {
		cJSON *e = cJSON_CreateObject();
		struct dlk_buf v = DLK_BUF_INIT;
		/* Kubernetes expands $(NAME): $$ keeps the value as written */
		for (const char *q = p->env[i].value; *q; q++) {
			if (q[0] == '$' && q[1] == '(')
				dlk_buf_addc(&v, '$');
			dlk_buf_addc(&v, *q);
		}
		cJSON_AddStringToObject(e, "key", p->env[i].key);
		cJSON_AddStringToObject(e, "value", v.len ? v.data : "");
		cJSON_AddItemToArray(env, e);
		dlk_buf_release(&v);
	}
	cJSON_AddItemToObject(o, "env", env);
	cJSON_AddNumberToObject(o, "port", on && p->port > 0 ? p->port : sg->port);
	cJSON_AddStringToObject(o, "ready_path", on && p->ready_path ? p->ready_path : "/");
	cJSON_AddStringToObject(o, "live_path", on && p->live_path ? p->live_path : "/");
	cJSON_AddItemToObject(o, "metrics_path", str_or_null(on ? p->metrics_path : NULL));
}

cJSON *render_context_serving(const struct dlk_project *spec, const char *spec_yaml, const struct render_serving *sv,
                              const struct render_opts *opts, struct dlk_err *err)
{
	const struct dlk_serving *sg = &spec->serving;
	const struct render_serving_model *m = &sv->model;
	const char *ns = kube_namespace_pick(opts ? opts->namespace_ : NULL, spec->namespace_, NULL);
	cJSON *c, *o;
	char *s;

	if (need(sv->name, "name", err) || need(spec->image, "image", err) || need(sg->cpu, "serving.cpu", err) ||
	    need(sg->memory, "serving.memory", err) || need(spec_yaml, "(the resolved spec text)", err))
		return NULL;
	/* serving.program: the user's own server, no bundle */
	if (!sg->program.present && !(m->claim && m->path) == !m->url)
		return dlk_errf(err, DLK_EXIT_USAGE, "a served model comes from a claim or from a URL, exactly one"), NULL;
	if (strlen(sv->name) > 63 - strlen(RENDER_CANARY_SUFFIX))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is too long for a served model's name (at most %zu characters, "
		                "so that '%s%s' is a valid object name)", sv->name, 63 - strlen(RENDER_CANARY_SUFFIX), sv->name,
		                RENDER_CANARY_SUFFIX), NULL;
	if (strlen(spec_yaml) > RENDER_MAX_SPEC_YAML)
		return dlk_errf(err, DLK_EXIT_CONFIG, "the resolved spec is %zu bytes; a ConfigMap takes at most %u here",
		                strlen(spec_yaml), RENDER_MAX_SPEC_YAML), NULL;

	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "log_format", spec->logging.format == DLK_LOGFMT_JSON ? "json" : "text");
	cJSON_AddStringToObject(c, "name", sv->name);
	cJSON_AddStringToObject(c, "namespace", ns);
	cJSON_AddStringToObject(c, "image", spec->image);
	cJSON_AddStringToObject(c, "version", DLK_VERSION);
	cJSON_AddStringToObject(c, "spec_yaml", spec_yaml);
	char digest[65];
	project_digest(spec, digest);
	cJSON_AddStringToObject(c, "spec_digest", digest);
	cJSON_AddItemToObject(c, "labels", kv_list(spec->labels, spec->n_labels));
	s = xasprintf("%s%s", sv->name, sv->canary ? RENDER_CANARY_SUFFIX : RENDER_SERVING_SUFFIX);
	cJSON_AddStringToObject(c, "deployment", s);
	cJSON_AddStringToObject(c, "config_map", s);
	free(s);
	s = xasprintf("%s%s", sv->name, RENDER_SERVING_SUFFIX);
	cJSON_AddStringToObject(c, "service", s);
	free(s);
	cJSON_AddStringToObject(c, "track", sv->canary ? "canary" : "stable");
	cJSON_AddNumberToObject(c, "replicas", sv->replicas);
	cJSON_AddNumberToObject(c, "port", sg->port);
	s = xasprintf("%d", sg->port);
	cJSON_AddStringToObject(c, "port_arg", s);
	free(s);
	s = xasprintf("%d", sv->canary_percent);
	cJSON_AddStringToObject(c, "canary_percent", s);
	free(s);
	cJSON_AddNumberToObject(c, "termination_grace_seconds",
	                        sg->drain_delay_s + sg->drain_timeout_s + RENDER_SERVING_DRAIN_MARGIN_S);
	cJSON_AddNumberToObject(c, "drain_delay_seconds", sg->drain_delay_s);
	cJSON_AddNumberToObject(c, "progress_deadline_seconds", 600);
	/* fetching a model from a URL comes before listening: 10 minutes of startup */
	cJSON_AddNumberToObject(c, "startup_failure_threshold", 300);
	add_placement(c, &spec->resources, sg->gpus, sg->cpu, sg->memory);

	add_server(c, sg);
	o = cJSON_AddObjectToObject(c, "model");
	s = m->url ? xasprintf("%s=%s", sv->name, m->url) : m->path ? xasprintf("%s=/models/%s", sv->name, m->path)
	                                                            : xstrdup("");
	cJSON_AddStringToObject(o, "arg", s);
	free(s);
	cJSON_AddItemToObject(o, "claim", str_or_null(m->url ? NULL : m->claim));
	cJSON_AddItemToObject(o, "sha256_pin", str_or_null(m->url ? m->pin : NULL));
	cJSON_AddStringToObject(o, "sha256", m->sha256 ? m->sha256 : "");
	cJSON_AddStringToObject(o, "source", m->source ? m->source : "");
	cJSON_AddStringToObject(o, "revision", m->revision ? m->revision : m->url && m->pin ? m->pin : "");
	if (m->accuracy >= 0) {
		s = xasprintf("%.4f", m->accuracy);
		cJSON_AddStringToObject(o, "accuracy", s);
		free(s);
	} else {
		cJSON_AddStringToObject(o, "accuracy", "");
	}

	o = cJSON_AddObjectToObject(c, "hpa");
	cJSON_AddBoolToObject(o, "create", render_serving_hpa(spec, sv));
	cJSON_AddNumberToObject(o, "min_replicas", sg->replicas);
	cJSON_AddNumberToObject(o, "max_replicas", sg->max_replicas);
	cJSON_AddNumberToObject(o, "target_cpu_percent", sg->target_cpu_percent);
	cJSON_AddBoolToObject(c, "pdb", !sv->canary && (sv->replicas > 1 || sg->max_replicas > 1));

	o = cJSON_AddObjectToObject(c, "route");
	cJSON_AddBoolToObject(o, "enabled", sv->route && sg->gateway);
	const char *gw = sg->gateway ? sg->gateway : "", *slash = strchr(gw, '/');
	s = slash ? xstrndup(gw, (size_t)(slash - gw)) : NULL;
	cJSON_AddItemToObject(o, "gateway_namespace", str_or_null(s));
	free(s);
	cJSON_AddStringToObject(o, "gateway_name", slash ? slash + 1 : gw);
	s = xasprintf("%s%s-%s", sv->name, RENDER_SERVING_SUFFIX, sv->canary ? "canary" : "stable");
	cJSON_AddStringToObject(o, "track_service", s);
	free(s);
	s = xasprintf("%s%s-stable", sv->name, RENDER_SERVING_SUFFIX);
	cJSON_AddStringToObject(o, "stable_service", s);
	free(s);
	s = xasprintf("%s%s-canary", sv->name, RENDER_SERVING_SUFFIX);
	cJSON_AddStringToObject(o, "canary_service", s);
	free(s);
	cJSON_AddBoolToObject(o, "with_canary", sv->canary);
	cJSON_AddNumberToObject(o, "stable_weight", sv->canary ? 100 - sv->canary_percent : 100);
	cJSON_AddNumberToObject(o, "canary_weight", sv->canary ? sv->canary_percent : 0);
	return c;
}

static const char *const serving_templates[] = {
	"serving-configmap.yaml", "serving-service.yaml", "serving-track-service.yaml", "serving-deployment.yaml",
	"serving-hpa.yaml", "serving-pdb.yaml", "serving-httproute.yaml", NULL,
};

cJSON *render_serving_project(const struct dlk_project *spec, const char *project_file, const char *templates_dir,
                              const char *namespace_, const struct render_serving *sv, struct dlk_err *err)
{
	struct render_opts ro = RENDER_OPTS_INIT;
	struct render_templates *set = NULL;
	char *tdir = NULL, *yaml = project_dump_yaml(spec);
	cJSON *ctx = NULL, *objects = NULL;

	ro.namespace_ = namespace_;
	if (templates_dir) {
		ro.templates_dir = templates_dir;
	} else {
		tdir = templates_dir_of(project_file);
		ro.templates_dir = tdir;
		ro.templates_dir_optional = 1;
	}
	ctx = render_context_serving(spec, yaml, sv, &ro, err);
	if (!ctx)
		goto out;
	set = render_templates_load(ro.templates_dir, ro.templates_dir_optional, err);
	if (!set)
		goto out;
	objects = render_objects(set, serving_templates, ctx, err);
out:
	render_templates_free(set);
	cJSON_Delete(ctx);
	free(tdir);
	free(yaml);
	return objects;
}

int render_templates_copy(const char *dir, int force, struct dlk_err *err)
{
	int n = 0;

	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", dir, strerror(errno));
	if (!force) {
		for (size_t i = 0; dlk_builtin_templates[i].name; i++) {
			char *path = xasprintf("%s/%s", dir, dlk_builtin_templates[i].name);
			int exists = access(path, F_OK) == 0;
			if (exists) {
				dlk_errf(err, DLK_EXIT_EXISTS, "'%s' already exists", path);
				dlk_err_hint(err, "use --force to overwrite the templates there");
				free(path);
				return -1;
			}
			free(path);
		}
	}
	for (size_t i = 0; dlk_builtin_templates[i].name; i++) {
		const struct dlk_embedded *e = &dlk_builtin_templates[i];
		char *path = xasprintf("%s/%s", dir, e->name);
		FILE *f = fopen(path, "wb");
		int ok = f && fwrite(e->data, 1, e->len, f) == e->len;
		if (f && fclose(f) != 0)
			ok = 0;
		if (!ok) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", path, strerror(errno));
			free(path);
			return -1;
		}
		free(path);
		n++;
	}
	return n;
}
