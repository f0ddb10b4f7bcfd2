#include "lib/kube/kubeconfig.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"
#include "lib/util/yamljson.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KC_MAX_FILES 64

/* One loaded kubeconfig file. Entries found in it resolve their relative paths against dir. */
struct kc_file {
	char *path, *display, *dir;
	cJSON *root;
};

/* Where a named entry came from, for error messages ("users[2].user.token"). */
struct kc_entry {
	struct kc_file *file;
	const char *section; /* "clusters", "users", "contexts" */
	const char *inner;   /* "cluster", "user", "context" */
	int index;
	cJSON *body;         /* the inner object (may be NULL when absent) */
};

char *kube_display_path(const char *path)
{
	const char *home = getenv("HOME");
	size_t n = home ? strlen(home) : 0;

	if (n > 1 && !strncmp(path, home, n) && path[n] == '/')
		return xasprintf("~%s", path + n);
	return xstrdup(path);
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

char *kube_base64_decode(const char *in, size_t *out_len)
{
	size_t n = strlen(in);
	char *out = xmalloc(n / 4 * 3 + 4);
	size_t o = 0, pad = 0;
	unsigned acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)in[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int v = b64val(c);
		if (v < 0 || pad)
			goto bad; /* bad character, or data after padding */
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (pad > 2 || bits >= 6)
		goto bad; /* one leftover sextet cannot encode a byte */
	out[o] = '\0';
	*out_len = o;
	return out;
bad:
	free(out);
	return NULL;
}

/* ---- reading fields with errors that name file and key ---- */

static int kc_fail(struct dlk_err *err, const struct kc_entry *e, const char *key, const char *fmt, const char *arg)
{
	char what[512];

	snprintf(what, sizeof(what), fmt, arg ? arg : "");
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s[%d].%s.%s: %s", e->file->display, e->section, e->index,
			e->inner, key, what);
}

/* *out = the string value (borrowed) or NULL when absent/null; -1 when not a string. */
static int kc_str(const struct kc_entry *e, const char *key, const char **out, struct dlk_err *err)
{
	cJSON *v = e->body ? cJSON_GetObjectItemCaseSensitive(e->body, key) : NULL;

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return kc_fail(err, e, key, "must be a string%s", NULL);
	*out = v->valuestring[0] ? v->valuestring : NULL;
	return 0;
}

static int kc_bool(const struct kc_entry *e, const char *key, int *out, struct dlk_err *err)
{
	cJSON *v = e->body ? cJSON_GetObjectItemCaseSensitive(e->body, key) : NULL;

	*out = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (cJSON_IsBool(v)) {
		*out = cJSON_IsTrue(v);
		return 0;
	}
	if (cJSON_IsString(v) && (!strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "false"))) {
		*out = !strcmp(v->valuestring, "true");
		return 0;
	}
	return kc_fail(err, e, key, "must be true or false%s", NULL);
}

static char *kc_resolve(const struct kc_file *f, const char *p)
{
	if (p[0] == '/')
		return xstrdup(p);
	if (p[0] == '~' && p[1] == '/' && getenv("HOME"))
		return xasprintf("%s%s", getenv("HOME"), p + 1);
	return xasprintf("%s/%s", f->dir, p);
}

static int looks_pem(const char *s)
{
	return strstr(s, "-----BEGIN ") != NULL;
}

/* Reads KEY-data (base64 PEM) or KEY (a file) into blob; data wins, as in kubectl. */
static int kc_pem(const struct kc_entry *e, const char *key, struct kube_blob *blob, struct dlk_err *err)
{
	char datakey[128];
	const char *data, *path;

	snprintf(datakey, sizeof(datakey), "%s-data", key);
	if (kc_str(e, datakey, &data, err) < 0 || kc_str(e, key, &path, err) < 0)
		return -1;
	if (data) {
		if (strlen(data) > KUBE_PEM_MAX_BYTES * 2)
			return kc_fail(err, e, datakey, "longer than the %s limit", "1 MiB");
		blob->data = kube_base64_decode(data, &blob->len);
		if (!blob->data)
			return kc_fail(err, e, datakey, "not valid base64%s", NULL);
		if (!looks_pem(blob->data))
			return kc_fail(err, e, datakey, "not PEM data (no '-----BEGIN' line)%s", NULL);
		return 0;
	}
	if (path) {
		char *abs = kc_resolve(e->file, path), msg[512];
		struct dlk_buf b = DLK_BUF_INIT;
		int rc = dlk_buf_read_file(&b, abs, KUBE_PEM_MAX_BYTES, msg, sizeof(msg));
		free(abs);
		if (rc < 0) {
			dlk_buf_release(&b);
			return kc_fail(err, e, key, "%s", msg);
		}
		if (!looks_pem(b.data)) {
			dlk_buf_release(&b);
			return kc_fail(err, e, key, "'%s' is not PEM data (no '-----BEGIN' line)", path);
		}
		blob->data = dlk_buf_detach(&b, &blob->len);
	}
	return 0;
}

static char **kc_strv_add(char **v, size_t *n, char *s)
{
	v = xrealloc(v, (*n + 2) * sizeof(*v));
	v[(*n)++] = s;
	v[*n] = NULL;
	return v;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int kc_exec(const struct kc_entry *user, cJSON *ex, struct kube_config *cfg, struct dlk_err *err)
{
	struct kc_entry e = *user;
	const char *api, *cmd, *mode, *hint;
	struct kube_exec_config *x = xcalloc(1, sizeof(*x));
	size_t n = 0;

	cfg->exec = x;
	e.inner = "user.exec";
	e.body = ex;
	if (!cJSON_IsObject(ex))
		return kc_fail(err, user, "exec", "must be a mapping%s", NULL);
	if (kc_str(&e, "apiVersion", &api, err) < 0 || kc_str(&e, "command", &cmd, err) < 0 ||
	    kc_str(&e, "interactiveMode", &mode, err) < 0 || kc_str(&e, "installHint", &hint, err) < 0 ||
	    kc_bool(&e, "provideClusterInfo", &x->provide_cluster_info, err) < 0)
		return -1;
	if (!api)
		return kc_fail(err, &e, "apiVersion", "missing (use client.authentication.k8s.io/v1)%s", NULL);
	if (strcmp(api, "client.authentication.k8s.io/v1") && strcmp(api, "client.authentication.k8s.io/v1beta1"))
		return kc_fail(err, &e, "apiVersion", "'%s' is not supported (use client.authentication.k8s.io/v1 or v1beta1)", api);
	if (!cmd)
		return kc_fail(err, &e, "command", "missing%s", NULL);
	x->api_version = xstrdup(api);
	x->command = strchr(cmd, '/') ? kc_resolve(e.file, cmd) : xstrdup(cmd);
	x->install_hint = hint ? xstrdup(hint) : NULL;
	if (!mode) {
		if (!strcmp(api, "client.authentication.k8s.io/v1"))
			return kc_fail(err, &e, "interactiveMode", "required for client.authentication.k8s.io/v1 (Never, IfAvailable or Always)%s", NULL);
		x->interactive = KUBE_EXEC_IF_AVAILABLE;
	} else if (!strcmp(mode, "Never")) {
		x->interactive = KUBE_EXEC_NEVER;
	} else if (!strcmp(mode, "IfAvailable")) {
		x->interactive = KUBE_EXEC_IF_AVAILABLE;
	} else if (!strcmp(mode, "Always")) {
		x->interactive = KUBE_EXEC_ALWAYS;
	} else {
		return kc_fail(err, &e, "interactiveMode", "'%s' is not one of Never, IfAvailable, Always", mode);
	}
	cJSON *args = cJSON_GetObjectItemCaseSensitive(ex, "args"), *it;
	x->args = kc_strv_add(NULL, &n, xstrdup(x->command));
	if (args && !cJSON_IsNull(args)) {
		if (!cJSON_IsArray(args))
			return kc_fail(err, &e, "args", "must be a list of strings%s", NULL);
		cJSON_ArrayForEach(it, args) {
			if (!cJSON_IsString(it))
				return kc_fail(err, &e, "args", "must be a list of strings%s", NULL);
			if (n > 256)
				return kc_fail(err, &e, "args", "more than 256 arguments%s", NULL);
			x->args = kc_strv_add(x->args, &n, xstrdup(it->valuestring));
		}
	}
	cJSON *env = cJSON_GetObjectItemCaseSensitive(ex, "env");
	n = 0;
	x->env = kc_strv_add(NULL, &n, NULL);
	n = 0;
	if (env && !cJSON_IsNull(env)) {
		if (!cJSON_IsArray(env))
			return kc_fail(err, &e, "env", "must be a list of {name, value}%s", NULL);
		cJSON_ArrayForEach(it, env) {
			cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
			cJSON *vl = cJSON_GetObjectItemCaseSensitive(it, "value");
			if (!cJSON_IsString(nm) || !nm->valuestring[0] || strchr(nm->valuestring, '=') ||
			    (vl && !cJSON_IsString(vl) && !cJSON_IsNull(vl)))
				return kc_fail(err, &e, "env", "every entry needs a name (without '=') and a string value%s", NULL);
			if (n > 256)
				return kc_fail(err, &e, "env", "more than 256 variables%s", NULL);
			x->env = kc_strv_add(x->env, &n, xasprintf("%s=%s", nm->valuestring,
								 cJSON_IsString(vl) ? vl->valuestring : ""));
		}
	}
	return 0;
}

/* ---- merging ---- */

static void kc_files_free(struct kc_file *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].path);
		free(f[i].display);
		free(f[i].dir);
		cJSON_Delete(f[i].root);
	}
	free(f);
}

cJSON *kube_yaml_to_json(const char *text, size_t len, const char *name, struct dlk_err *err)
{
	/* a kubeconfig is its first document; a file with none is an empty configuration */
	cJSON *docs = yamljson_parse(text, len, name, NULL, err), *first;

	if (!docs)
		return NULL;
	first = cJSON_DetachItemFromArray(docs, 0);
	cJSON_Delete(docs);
	return first ? first : cJSON_CreateObject();
}

static int kc_load_file(const char *path, struct kc_file *f, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[512];
	const char *slash;

	f->path = xstrdup(path);
	f->display = kube_display_path(path);
	slash = strrchr(path, '/');
	f->dir = slash ? (slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path))) : xstrdup(".");
	if (f->dir[0] != '/') {
		char cwd[4096];
		if (getcwd(cwd, sizeof(cwd))) {
			char *abs = xasprintf("%s/%s", cwd, f->dir);
			free(f->dir);
			f->dir = abs;
		}
	}
	if (dlk_buf_read_file(&b, path, KUBE_CONFIG_MAX_BYTES, msg, sizeof(msg)) < 0) {
		dlk_buf_release(&b);
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s", msg);
	}
	f->root = kube_yaml_to_json(b.data, b.len, f->display, err);
	dlk_buf_release(&b);
	if (!f->root)
		return -1;
	if (cJSON_IsNull(f->root)) {
		cJSON_Delete(f->root);
		f->root = cJSON_CreateObject();
	}
	if (!cJSON_IsObject(f->root))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a kubeconfig (the top level must be a mapping)", f->display);
	static const char *const sections[] = { "clusters", "users", "contexts" };
	for (size_t i = 0; i < 3; i++) {
		cJSON *s = cJSON_GetObjectItemCaseSensitive(f->root, sections[i]), *it;
		int idx = 0;
		if (!s || cJSON_IsNull(s))
			continue;
		if (!cJSON_IsArray(s))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s: must be a list", f->display, sections[i]);
		cJSON_ArrayForEach(it, s) {
			cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
			if (!cJSON_IsString(nm) || !nm->valuestring[0])
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s[%d].name: missing or not a string",
						f->display, sections[i], idx);
			idx++;
		}
	}
	cJSON *cc = cJSON_GetObjectItemCaseSensitive(f->root, "current-context");
	if (cc && !cJSON_IsNull(cc) && !cJSON_IsString(cc))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: current-context: must be a string", f->display);
	return 0;
}

/* First file (in KUBECONFIG order) that defines name in section wins. */
static int kc_find(struct kc_file *files, size_t nfiles, const char *section, const char *inner,
		   const char *name, struct kc_entry *out)
{
	for (size_t i = 0; i < nfiles; i++) {
		cJSON *s = cJSON_GetObjectItemCaseSensitive(files[i].root, section), *it;
		int idx = 0;
		cJSON_ArrayForEach(it, s) {
			cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
			if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) {
				out->file = &files[i];
				out->section = section;
				out->inner = inner;
				out->index = idx;
				out->body = cJSON_GetObjectItemCaseSensitive(it, inner);
				return 0;
			}
			idx++;
		}
	}
	return -1;
}

static int kc_context_missing(struct kc_file *files, size_t nfiles, const char *name, struct dlk_err *err)
{
	const char **names = NULL;
	size_t n = 0;

	for (size_t i = 0; i < nfiles; i++) {
		cJSON *s = cJSON_GetObjectItemCaseSensitive(files[i].root, "contexts"), *it;
		cJSON_ArrayForEach(it, s) {
			names = xrealloc(names, (n + 1) * sizeof(*names));
			names[n++] = cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring;
		}
	}
	const char *near = dlk_suggest(name, names, n);
	if (near)
		dlk_errf(err, DLK_EXIT_CONFIG, "context '%s' not found (did you mean '%s'?)", name, near);
	else
		dlk_errf(err, DLK_EXIT_CONFIG, "context '%s' not found", name);
	if (n) {
		struct dlk_buf b = DLK_BUF_INIT;
		for (size_t i = 0; i < n && i < 20; i++)
			dlk_buf_addf(&b, "%s%s", i ? ", " : "", names[i]);
		dlk_err_hint(err, "contexts in %s: %s", files[0].display, b.data);
		dlk_buf_release(&b);
	}
	free(names);
	return -1;
}

static int kc_cluster(const struct kc_entry *e, struct kube_config *cfg, struct dlk_err *err)
{
	const char *server, *tsn, *proxy;

	if (!cJSON_IsObject(e->body))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s[%d].%s: missing or not a mapping", e->file->display,
				e->section, e->index, e->inner);
	if (kc_str(e, "server", &server, err) < 0 || kc_str(e, "tls-server-name", &tsn, err) < 0 ||
	    kc_str(e, "proxy-url", &proxy, err) < 0 || kc_bool(e, "insecure-skip-tls-verify", &cfg->insecure, err) < 0)
		return -1;
	if (!server)
		return kc_fail(err, e, "server", "missing%s", NULL);
	if (strncmp(server, "https://", 8) && strncmp(server, "http://", 7))
		return kc_fail(err, e, "server", "'%s' is not an http(s):// URL", server);
	cfg->server = xstrdup(server);
	for (size_t n = strlen(cfg->server); n > 8 && cfg->server[n - 1] == '/'; n--)
		cfg->server[n - 1] = '\0';
	cfg->tls_server_name = tsn ? xstrdup(tsn) : NULL;
	cfg->proxy_url = proxy ? xstrdup(proxy) : NULL;
	if (kc_pem(e, "certificate-authority", &cfg->ca, err) < 0)
		return -1;
	if (cfg->insecure) {
		if (cfg->ca.data)
			return kc_fail(err, e, "insecure-skip-tls-verify",
				       "cannot be combined with a certificate authority%s", NULL);
		cfg->warning = xasprintf("cluster '%s' (%s) has insecure-skip-tls-verify: the server's certificate "
					 "is not checked, so the connection can be intercepted", cfg->cluster_name,
					 e->file->display);
	}
	return 0;
}

static int kc_user(const struct kc_entry *e, struct kube_config *cfg, struct dlk_err *err)
{
	const char *token, *tokfile, *user, *pass, *as;

	if (!e->body || cJSON_IsNull(e->body))
		return 0; /* a user with no credentials is allowed (anonymous) */
	if (!cJSON_IsObject(e->body))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s[%d].%s: not a mapping", e->file->display, e->section,
				e->index, e->inner);
	if (kc_str(e, "token", &token, err) < 0 || kc_str(e, "tokenFile", &tokfile, err) < 0 ||
	    kc_str(e, "username", &user, err) < 0 || kc_str(e, "password", &pass, err) < 0 ||
	    kc_str(e, "as", &as, err) < 0)
		return -1;
	if (kc_pem(e, "client-certificate", &cfg->client_cert, err) < 0 ||
	    kc_pem(e, "client-key", &cfg->client_key, err) < 0)
		return -1;
	if (!cfg->client_cert.data != !cfg->client_key.data)
		return kc_fail(err, e, cfg->client_cert.data ? "client-key" : "client-certificate",
			       "missing (a client certificate needs its key, and the key its certificate)%s", NULL);
	if (token)
		cfg->token = xstrdup(token);
	else if (tokfile)
		cfg->token_file = kc_resolve(e->file, tokfile);
	if (user || pass) {
		cfg->username = xstrdup(user ? user : "");
		cfg->password = xstrdup(pass ? pass : "");
	}
	if (as)
		cfg->as_user = xstrdup(as);
	cJSON *groups = cJSON_GetObjectItemCaseSensitive(e->body, "as-groups"), *it;
	if (groups && !cJSON_IsNull(groups)) {
		size_t n = 0;
		if (!cJSON_IsArray(groups))
			return kc_fail(err, e, "as-groups", "must be a list of strings%s", NULL);
		cJSON_ArrayForEach(it, groups) {
			if (!cJSON_IsString(it))
				return kc_fail(err, e, "as-groups", "must be a list of strings%s", NULL);
			cfg->as_groups = kc_strv_add(cfg->as_groups, &n, xstrdup(it->valuestring));
		}
		if (n && !cfg->as_user)
			return kc_fail(err, e, "as-groups", "needs 'as' (a user to impersonate)%s", NULL);
	}
	cJSON *ex = cJSON_GetObjectItemCaseSensitive(e->body, "exec");
	if (ex && !cJSON_IsNull(ex) && kc_exec(e, ex, cfg, err) < 0)
		return -1;
	return 0;
}

int kube_config_load(const struct kube_config_opts *opts, struct kube_config *cfg, struct dlk_err *err)
{
	struct kube_config_opts none = KUBE_CONFIG_OPTS_INIT;
	struct kc_file *files = NULL;
	size_t nfiles = 0;
	char *list = NULL, *deflt = NULL;
	const char *ctxname = NULL;
	int rc = -1;

	if (!opts)
		opts = &none;
	if (opts->kubeconfig) {
		files = xcalloc(1, sizeof(*files));
		nfiles = 1;
		if (kc_load_file(opts->kubeconfig, &files[0], err) < 0)
			goto out;
	} else {
		const char *env = getenv("KUBECONFIG");
		if (env && *env) {
			list = xstrdup(env);
		} else {
			const char *home = getenv("HOME");
			deflt = home ? xasprintf("%s/.kube/config", home) : xstrdup("");
			list = xstrdup(deflt);
		}
		/* Files named in KUBECONFIG that do not exist are skipped, as kubectl does. */
		for (char *save = NULL, *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			struct stat st;
			if (!*p || stat(p, &st) < 0)
				continue;
			if (nfiles >= KC_MAX_FILES) {
				dlk_errf(err, DLK_EXIT_CONFIG, "KUBECONFIG: more than %d files", KC_MAX_FILES);
				goto out;
			}
			files = xrealloc(files, (nfiles + 1) * sizeof(*files));
			memset(&files[nfiles], 0, sizeof(*files));
			if (kc_load_file(p, &files[nfiles++], err) < 0)
				goto out;
		}
		if (!nfiles) {
			if (getenv("KUBERNETES_SERVICE_HOST") && *getenv("KUBERNETES_SERVICE_HOST")) {
				rc = kube_config_in_cluster(opts->sa_dir, opts->namespace, cfg, err);
				goto out;
			}
			if (env && *env)
				dlk_errf(err, DLK_EXIT_CONFIG, "no kubeconfig: none of the files in KUBECONFIG exist");
			else
				dlk_errf(err, DLK_EXIT_CONFIG, "no kubeconfig: cannot read '%s'", deflt ? deflt : "~/.kube/config");
			dlk_err_hint(err, "point KUBECONFIG or --kubeconfig at your cluster's kubeconfig file");
			goto out;
		}
	}
	ctxname = opts->context;
	if (!ctxname || !*ctxname) {
		ctxname = NULL;
		for (size_t i = 0; i < nfiles && !ctxname; i++) {
			cJSON *cc = cJSON_GetObjectItemCaseSensitive(files[i].root, "current-context");
			if (cJSON_IsString(cc) && cc->valuestring[0])
				ctxname = cc->valuestring;
		}
		if (!ctxname) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: no current-context is set", files[0].display);
			dlk_err_hint(err, "pick one with --context, or run 'kubectl config use-context NAME'");
			goto out;
		}
	}
	struct kc_entry ctx, cl, us;
	if (kc_find(files, nfiles, "contexts", "context", ctxname, &ctx) < 0) {
		kc_context_missing(files, nfiles, ctxname, err);
		goto out;
	}
	const char *clname, *usname, *ns;
	if (!cJSON_IsObject(ctx.body)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: contexts[%d].context: missing or not a mapping", ctx.file->display, ctx.index);
		goto out;
	}
	if (kc_str(&ctx, "cluster", &clname, err) < 0 || kc_str(&ctx, "user", &usname, err) < 0 ||
	    kc_str(&ctx, "namespace", &ns, err) < 0)
		goto out;
	if (!clname) {
		kc_fail(err, &ctx, "cluster", "missing%s", NULL);
		goto out;
	}
	cfg->source = xstrdup(ctx.file->display);
	cfg->context = xstrdup(ctxname);
	cfg->cluster_name = xstrdup(clname);
	cfg->user_name = xstrdup(usname ? usname : "");
	cfg->namespace = xstrdup(kube_namespace_pick(opts->namespace, NULL, ns));
	if (kc_find(files, nfiles, "clusters", "cluster", clname, &cl) < 0) {
		kc_fail(err, &ctx, "cluster", "cluster '%s' not found", clname);
		goto out;
	}
	if (kc_cluster(&cl, cfg, err) < 0)
		goto out;
	if (usname) {
		if (kc_find(files, nfiles, "users", "user", usname, &us) < 0) {
			kc_fail(err, &ctx, "user", "user '%s' not found", usname);
			goto out;
		}
		if (kc_user(&us, cfg, err) < 0)
			goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		kube_config_release(cfg);
	kc_files_free(files, nfiles);
	free(list);
	free(deflt);
	return rc;
}

int kube_config_in_cluster(const char *sa_dir, const char *ns_override, struct kube_config *cfg, struct dlk_err *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[512], *path = NULL;
	int rc = -1;

	if (!sa_dir)
		sa_dir = KUBE_SA_DIR;
	if (!host || !*host || !port || !*port)
		return dlk_errf(err, DLK_EXIT_CONFIG,
				"in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
	if (strlen(host) > 255 || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
		return dlk_errf(err, DLK_EXIT_CONFIG, "in-cluster config: bad KUBERNETES_SERVICE_HOST or _PORT");
	cfg->source = xstrdup("in-cluster");
	cfg->context = xstrdup("");
	cfg->cluster_name = xstrdup("in-cluster");
	cfg->user_name = xstrdup("serviceaccount");
	cfg->server = strchr(host, ':') ? xasprintf("https://[%s]:%s", host, port) : xasprintf("https://%s:%s", host, port);
	path = xasprintf("%s/token", sa_dir);
	if (dlk_buf_read_file(&b, path, KUBE_TOKEN_MAX_BYTES, msg, sizeof(msg)) < 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "in-cluster config: %s", msg);
		goto out;
	}
	cfg->token_file = path;
	path = NULL;
	dlk_buf_reset(&b);
	free(path);
	path = xasprintf("%s/ca.crt", sa_dir);
	if (dlk_buf_read_file(&b, path, KUBE_PEM_MAX_BYTES, msg, sizeof(msg)) < 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "in-cluster config: %s", msg);
		goto out;
	}
	if (!looks_pem(b.data)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "in-cluster config: '%s' is not PEM data", path);
		goto out;
	}
	cfg->ca.data = dlk_buf_detach(&b, &cfg->ca.len);
	free(path);
	path = xasprintf("%s/namespace", sa_dir);
	if (ns_override && *ns_override) {
		cfg->namespace = xstrdup(ns_override);
	} else if (dlk_buf_read_file(&b, path, 256, msg, sizeof(msg)) == 0 && b.len) {
		while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
			b.data[--b.len] = '\0';
		cfg->namespace = dlk_buf_detach(&b, NULL);
	} else {
		cfg->namespace = xstrdup(kube_namespace_pick(NULL, NULL, NULL));
	}
	rc = 0;
out:
	free(path);
	dlk_buf_release(&b);
	if (rc < 0)
		kube_config_release(cfg);
	return rc;
}

static void blob_free(struct kube_blob *b)
{
	if (b->data)
		memset(b->data, 0, b->len); /* keys: do not leave them in freed memory */
	free(b->data);
	b->data = NULL;
	b->len = 0;
}

static void secret_free(char *s)
{
	if (s)
		memset(s, 0, strlen(s));
	free(s);
}

void kube_config_release(struct kube_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->source);
	free(cfg->context);
	free(cfg->cluster_name);
	free(cfg->user_name);
	free(cfg->namespace);
	free(cfg->server);
	blob_free(&cfg->ca);
	free(cfg->tls_server_name);
	free(cfg->proxy_url);
	blob_free(&cfg->client_cert);
	blob_free(&cfg->client_key);
	secret_free(cfg->token);
	free(cfg->token_file);
	free(cfg->username);
	secret_free(cfg->password);
	free(cfg->as_user);
	strv_free(cfg->as_groups);
	if (cfg->exec) {
		free(cfg->exec->api_version);
		free(cfg->exec->command);
		strv_free(cfg->exec->args);
		strv_free(cfg->exec->env);
		free(cfg->exec->install_hint);
		free(cfg->exec);
	}
	free(cfg->warning);
	memset(cfg, 0, sizeof(*cfg));
}

const char *kube_namespace_pick(const char *flag, const char *project, const char *context)
{
	if (flag && *flag)
		return flag;
	if (project && *project)
		return project;
	return context && *context ? context : "default";
}
