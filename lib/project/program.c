/* The `program:` and `serving.program:` sections (lib/project/program.h): parsed, defaulted,
 * validated and dumped here; project.c's loader calls in through lib/project/program_load.h and
 * keeps the positions, so every problem names file:line like the rest of dlk.yaml. */
#include "lib/project/program_load.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM_MAX_ARGS 4096
#define PROGRAM_MAX_ENV 256
#define PROGRAM_MAX_CODES 64

static const char *const framework_names[] = { "none", "pytorch", "jax", "tensorflow", "paddle", NULL };

const char *dlk_program_exit_class(const struct dlk_program *p, int code)
{
	if (!code)
		return NULL;
	for (int i = 0; i < p->n_fail_codes; i++)
		if (p->fail_codes[i] == code)
			return "fatal";
	return "restartable";
}

const char *dlk_framework_name(enum dlk_framework fw)
{
	return (int)fw >= 0 && (int)fw < 5 ? framework_names[fw] : "none";
}

int dlk_framework_of(const char *name)
{
	for (int i = 0; name && framework_names[i]; i++)
		if (!strcmp(name, framework_names[i]))
			return i;
	return -1;
}

const char *const program_subkeys[] = { ".framework", ".image", ".command", ".args", ".workdir", ".env",
	                                ".env.KEY", ".code", ".procs_per_worker", ".port", ".exit_codes",
	                                ".exit_codes.restart", ".exit_codes.fail", NULL };
const char *const program_server_subkeys[] = { ".image", ".command", ".env", ".env.KEY", ".port", ".ready_path",
	                                       ".live_path", ".metrics_path", NULL };

/* the default failure policy: a usage error (2, argparse's), a command that cannot run (126) or
 * is not there (127) fail at once, since running them again cannot help; every other non-zero
 * code restarts the gang up to the backoff limit, which is what torchrun's own exit (1 when any
 * worker failed) needs */
static const int default_fail_codes[] = { 2, 126, 127 };

static void problemf(const struct program_problems *pp, const struct ynode *at, const char *path, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));
static void problemf(const struct program_problems *pp, const struct ynode *at, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pp->report(pp->ctx, at, path, msg);
}

/* a value as a message quotes it: control characters visible, long ones shortened */
static const char *shown(const char *s, char *buf, size_t len)
{
	const char *v = dlk_visible(s);
	if (strlen(v) > 60)
		snprintf(buf, len, "%.57s...", v);
	else
		snprintf(buf, len, "%s", v);
	return buf;
}

static int is_text(const struct ynode *n)
{
	return n && n->kind == YN_SCALAR && !ynode_is_null(n) && ynode_type(n) != YS_BADTAG;
}

/* "torchrun --nproc-per-node 2 'my script.py'": a shell's word splitting with its quotes and
 * backslashes, nothing else (no variables, no globs). -1 with why on an unfinished quote. */
static int split_words(const char *s, char ***out, int *n_out, char *why, size_t why_len)
{
	char **v = NULL, *w = xcalloc(strlen(s) + 1, 1);
	int n = 0;
	size_t wl = 0;
	int in_word = 0;

	for (const char *p = s;; p++) {
		if (!*p || *p == ' ' || *p == '\t' || *p == '\n') {
			if (in_word) {
				if (n >= PROGRAM_MAX_ARGS)
					goto too_many;
				v = xrealloc(v, (size_t)(n + 2) * sizeof(*v));
				w[wl] = 0;
				v[n++] = xstrdup(w);
				v[n] = NULL;
				wl = 0;
				in_word = 0;
			}
			if (!*p)
				break;
			continue;
		}
		in_word = 1;
		if (*p == '\'') {
			const char *e = strchr(p + 1, '\'');
			if (!e) {
				snprintf(why, why_len, "has a ' that is never closed");
				goto fail;
			}
			memcpy(w + wl, p + 1, (size_t)(e - p - 1));
			wl += (size_t)(e - p - 1);
			p = e;
		} else if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$' || p[1] == '`'))
					p++;
				w[wl++] = *p;
			}
			if (!*p) {
				snprintf(why, why_len, "has a \" that is never closed");
				goto fail;
			}
		} else if (*p == '\\' && p[1]) {
			w[wl++] = *++p;
		} else {
			w[wl++] = *p;
		}
	}
	free(w);
	*out = v;
	*n_out = n;
	return 0;
too_many:
	snprintf(why, why_len, "has more than %d words", PROGRAM_MAX_ARGS);
fail:
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
	free(w);
	return -1;
}

static void free_argv(char ***v, int *n)
{
	for (int i = 0; *v && i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* a list of words, or (allow_string) one string split like a shell's words */
static void parse_words(const struct ynode *val, const char *path, int allow_string, char ***out, int *n_out,
                        const struct program_problems *pp)
{
	char p[300], why[128], buf[80];

	free_argv(out, n_out);
	if (allow_string && is_text(val)) {
		if (split_words(val->text, out, n_out, why, sizeof(why)))
			problemf(pp, val, path, "'%s' %s", shown(val->text, buf, sizeof(buf)), why);
		else if (!*n_out)
			problemf(pp, val, path, "is empty: name the program to run");
		return;
	}
	if (val->kind != YN_SEQ) {
		problemf(pp, val, path, "expected %s", allow_string ? "a list of words or one string" : "a list of words");
		return;
	}
	if (val->n > PROGRAM_MAX_ARGS) {
		problemf(pp, val, path, "has %d words, more than the limit of %d", val->n, PROGRAM_MAX_ARGS);
		return;
	}
	*out = xcalloc((size_t)val->n + 1, sizeof(**out));
	for (int i = 0; i < val->n; i++) {
		const struct ynode *v = val->vals[i];
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		/* "--epochs, 3": a number is the word it is written as */
		if (!is_text(v)) {
			problemf(pp, v, p, "expected a word (a string or a number)");
			continue;
		}
		(*out)[(*n_out)++] = xstrdup(v->text);
	}
}

static int env_name_ok(const char *s)
{
	if (!*s || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return 0;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == strlen(s);
}

static void parse_env(const struct ynode *val, const char *path, struct dlk_program_kv **env, int *n_env,
                      const struct program_problems *pp)
{
	char p[300], buf[80];

	if (val->kind != YN_MAP) {
		problemf(pp, val, path, "expected a mapping of variable names to values");
		return;
	}
	if (val->n > PROGRAM_MAX_ENV) {
		problemf(pp, val, path, "has %d variables, more than the limit of %d", val->n, PROGRAM_MAX_ENV);
		return;
	}
	*env = xcalloc((size_t)val->n + 1, sizeof(**env));
	for (int i = 0; i < val->n; i++) {
		const struct ynode *k = val->keys[i], *v = val->vals[i];
		int dup = 0;
		snprintf(p, sizeof(p), "%s.%s", path, k->text);
		for (int j = 0; j < i; j++)
			dup |= !strcmp(val->keys[j]->text, k->text);
		if (dup) {
			problemf(pp, k, p, "'%s' is given twice", shown(k->text, buf, sizeof(buf)));
			continue;
		}
		if (!env_name_ok(k->text)) {
			problemf(pp, k, p, "'%s' is not a variable name (letters, digits and '_', not first a digit)",
			         shown(k->text, buf, sizeof(buf)));
			continue;
		}
		/* the rendezvous and dlk's own variables come from dlk; one set here would be overridden
		 * on one side and not the other */
		if (!strncmp(k->text, "DLK_", 4)) {
			problemf(pp, k, p, "DLK_ variables are set by dlk (see docs/program.md); choose another name");
			continue;
		}
		if (!is_text(v)) {
			problemf(pp, v, p, "expected a value (a string or a number)");
			continue;
		}
		(*env)[*n_env].key = xstrdup(k->text);
		(*env)[(*n_env)++].value = xstrdup(v->text);
	}
}

static int parse_int(const struct ynode *v, const char *path, long long lo, long long hi, int *out,
                     const struct program_problems *pp)
{
	long long i;
	if (v->kind != YN_SCALAR || ynode_type(v) != YS_INT || ynode_int(v, &i) || i < lo || i > hi) {
		problemf(pp, v, path, "expected an integer from %lld to %lld", lo, hi);
		return -1;
	}
	*out = (int)i;
	return 0;
}

static void parse_codes(const struct ynode *val, const char *path, int **codes, int *n,
                        const struct program_problems *pp)
{
	char p[300];
	free(*codes);
	*codes = NULL;
	*n = 0;
	if (val->kind != YN_SEQ) {
		problemf(pp, val, path, "expected a list of exit codes (1 to 255)");
		return;
	}
	if (val->n > PROGRAM_MAX_CODES) {
		problemf(pp, val, path, "has %d codes, more than the limit of %d", val->n, PROGRAM_MAX_CODES);
		return;
	}
	*codes = xcalloc((size_t)val->n + 1, sizeof(**codes));
	for (int i = 0; i < val->n; i++) {
		int code;
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if (parse_int(val->vals[i], p, 1, 255, &code, pp))
			continue;
		(*codes)[(*n)++] = code;
	}
}

/* a directory of the project: relative, inside it */
static int code_dir_ok(const char *s, char *why, size_t len)
{
	if (!*s)
		return snprintf(why, len, "is empty"), -1;
	if (s[0] == '/')
		return snprintf(why, len, "is absolute: name a directory of the project, relative to dlk.yaml"), -1;
	for (const char *c = s; *c;) {
		size_t l = strcspn(c, "/");
		if (l == 2 && !strncmp(c, "..", 2))
			return snprintf(why, len, "leaves the project ('..'): name a directory inside it"), -1;
		c += l;
		while (*c == '/')
			c++;
	}
	if (strpbrk(s, "\n\r\t"))
		return snprintf(why, len, "holds a control character"), -1;
	return 0;
}

static int find_key(const struct ynode *map, const char *const *keys, const char *k)
{
	(void)map;
	for (int i = 0; keys[i]; i++)
		if (!strcmp(keys[i], k))
			return i;
	return -1;
}

/* unknown keys, duplicates and null values of a section; returns the nodes by key index */
static int walk_keys(const struct ynode *val, const char *path, const char *const *keys, const struct ynode **by_key,
                     const struct ynode **key_nodes, const struct program_problems *pp)
{
	char p[300], buf[80], list[300];
	int n_keys = 0;

	while (keys[n_keys])
		n_keys++;
	for (int i = 0; i < n_keys; i++)
		by_key[i] = key_nodes[i] = NULL;
	if (val->kind != YN_MAP) {
		problemf(pp, val, path, "expected a mapping");
		return -1;
	}
	list[0] = 0;
	for (int i = 0; i < n_keys; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", keys[i]);
	for (int i = 0; i < val->n; i++) {
		const struct ynode *k = val->keys[i];
		int idx = find_key(val, keys, k->text);
		snprintf(p, sizeof(p), "%s.%s", path, k->text);
		if (idx < 0) {
			problemf(pp, k, p, "unknown key '%s' (keys here are %s)", shown(k->text, buf, sizeof(buf)), list);
			continue;
		}
		if (key_nodes[idx]) {
			problemf(pp, k, p, "'%s' is given twice (first on line %d)", keys[idx], key_nodes[idx]->line);
			continue;
		}
		key_nodes[idx] = k;
		if (!ynode_is_null(val->vals[i]))
			by_key[idx] = val->vals[i];
	}
	return 0;
}

enum { K_FRAMEWORK, K_IMAGE, K_COMMAND, K_ARGS, K_WORKDIR, K_ENV, K_CODE, K_PROCS, K_PORT, K_EXIT, K_N };
static const char *const program_keys[] = { "framework", "image", "command", "args", "workdir", "env", "code",
	                                    "procs_per_worker", "port", "exit_codes", NULL };

static void parse_string(const struct ynode *v, const char *path, char **out, const struct program_problems *pp)
{
	if (!is_text(v) || ynode_type(v) != YS_STR) {
		problemf(pp, v, path, "expected a string");
		return;
	}
	if (!*v->text || strpbrk(v->text, "\n\r")) {
		problemf(pp, v, path, "expected one non-empty line");
		return;
	}
	free(*out);
	*out = xstrdup(v->text);
}

void program_parse(const struct ynode *val, const char *path, struct dlk_program *out,
                   const struct program_problems *pp)
{
	const struct ynode *v[K_N], *k[K_N];
	char p[300], why[160], buf[80];
	int fail_given = 0;

	program_release(out);
	out->present = 1;
	out->line = val->line;
	out->procs_per_worker = 1;
	out->port = 29500;
	if (walk_keys(val, path, program_keys, v, k, pp))
		return;
#define P(key) (snprintf(p, sizeof(p), "%s.%s", path, key), p)
	if (v[K_FRAMEWORK]) {
		int fw = is_text(v[K_FRAMEWORK]) ? dlk_framework_of(v[K_FRAMEWORK]->text) : -1;
		if (fw < 0)
			problemf(pp, v[K_FRAMEWORK], P("framework"),
			         "unknown value '%s' (expected one of none, pytorch, jax, tensorflow, paddle)",
			         is_text(v[K_FRAMEWORK]) ? shown(v[K_FRAMEWORK]->text, buf, sizeof(buf)) : "");
		else
			out->framework = (enum dlk_framework)fw;
	}
	if (v[K_IMAGE])
		parse_string(v[K_IMAGE], P("image"), &out->image, pp);
	if (v[K_COMMAND])
		parse_words(v[K_COMMAND], P("command"), 1, &out->command, &out->n_command, pp);
	else
		problemf(pp, k[K_COMMAND] ? k[K_COMMAND] : val, P("command"),
		         "missing required key 'command' (the program to run, like [python, train.py])");
	if (v[K_COMMAND] && v[K_COMMAND]->kind == YN_SEQ && !v[K_COMMAND]->n)
		problemf(pp, v[K_COMMAND], P("command"), "is empty: name the program to run");
	if (out->n_command && !*out->command[0])
		problemf(pp, v[K_COMMAND], P("command"), "the program's name is empty");
	if (v[K_ARGS])
		parse_words(v[K_ARGS], P("args"), 0, &out->args, &out->n_args, pp);
	if (v[K_WORKDIR]) {
		parse_string(v[K_WORKDIR], P("workdir"), &out->workdir, pp);
		if (out->workdir && out->workdir[0] != '/') {
			problemf(pp, v[K_WORKDIR], P("workdir"), "'%s' is not an absolute path (the directory in the pod)",
			         shown(out->workdir, buf, sizeof(buf)));
			free(out->workdir);
			out->workdir = NULL;
		}
	}
	if (v[K_ENV])
		parse_env(v[K_ENV], P("env"), &out->env, &out->n_env, pp);
	if (v[K_CODE]) {
		parse_string(v[K_CODE], P("code"), &out->code, pp);
		if (out->code && code_dir_ok(out->code, why, sizeof(why))) {
			problemf(pp, v[K_CODE], P("code"), "'%s' %s", shown(out->code, buf, sizeof(buf)), why);
			free(out->code);
			out->code = NULL;
		}
	}
	if (v[K_PROCS])
		parse_int(v[K_PROCS], P("procs_per_worker"), 0, 1024, &out->procs_per_worker, pp);
	if (v[K_PORT])
		parse_int(v[K_PORT], P("port"), 1, 65535, &out->port, pp);
	if (v[K_EXIT]) {
		static const char *const exit_keys[] = { "restart", "fail", NULL };
		const struct ynode *ev[2], *ek[2];
		if (!walk_keys(v[K_EXIT], P("exit_codes"), exit_keys, ev, ek, pp)) {
			if (ev[0])
				parse_codes(ev[0], P("exit_codes.restart"), &out->restart_codes, &out->n_restart_codes, pp);
			if (ev[1]) {
				parse_codes(ev[1], P("exit_codes.fail"), &out->fail_codes, &out->n_fail_codes, pp);
				fail_given = 1;
			} else if (ek[1]) {
				fail_given = 1; /* "fail:" with nothing: no code fails at once */
			}
		}
		for (int i = 0; i < out->n_restart_codes; i++)
			for (int j = 0; j < out->n_fail_codes; j++)
				if (out->restart_codes[i] == out->fail_codes[j])
					problemf(pp, v[K_EXIT], P("exit_codes"),
					         "exit code %d is both a restart and a fail code: keep it in one list",
					         out->restart_codes[i]);
	}
	if (!fail_given) {
		int n = (int)(sizeof(default_fail_codes) / sizeof(*default_fail_codes));
		out->fail_codes = xcalloc((size_t)n, sizeof(int));
		/* a restart code the user listed wins over the default that would fail it */
		for (int i = 0; i < n; i++) {
			int listed = 0;
			for (int j = 0; j < out->n_restart_codes; j++)
				listed |= out->restart_codes[j] == default_fail_codes[i];
			if (!listed)
				out->fail_codes[out->n_fail_codes++] = default_fail_codes[i];
		}
	}
	/* torchrun starts the processes and sets their variables itself, from the flags dlk gives it */
	if (out->n_command && !strcmp(out->command[0], "torchrun") && out->framework != DLK_FW_PYTORCH)
		problemf(pp, v[K_COMMAND], P("command"), "torchrun is PyTorch's launcher: set %s.framework: pytorch",
		         path);
#undef P
}

enum { S_IMAGE, S_COMMAND, S_ENV, S_PORT, S_READY, S_LIVE, S_METRICS, S_N };
static const char *const server_keys[] = { "image", "command", "env", "port", "ready_path", "live_path",
	                                   "metrics_path", NULL };

static void parse_http_path(const struct ynode *v, const char *path, char **out, const struct program_problems *pp)
{
	char buf[80];
	parse_string(v, path, out, pp);
	if (*out && ((*out)[0] != '/' || strpbrk(*out, " \t"))) {
		problemf(pp, v, path, "'%s' is not an HTTP path (it starts with '/', no spaces)", shown(*out, buf, sizeof(buf)));
		free(*out);
		*out = NULL;
	}
}

void program_server_parse(const struct ynode *val, const char *path, struct dlk_program_server *out,
                          const struct program_problems *pp)
{
	const struct ynode *v[S_N], *k[S_N];
	char p[300];

	program_server_release(out);
	out->present = 1;
	out->line = val->line;
	if (walk_keys(val, path, server_keys, v, k, pp))
		return;
#define P(key) (snprintf(p, sizeof(p), "%s.%s", path, key), p)
	if (v[S_IMAGE])
		parse_string(v[S_IMAGE], P("image"), &out->image, pp);
	else
		problemf(pp, k[S_IMAGE] ? k[S_IMAGE] : val, P("image"), "missing required key 'image' (the server's image)");
	if (v[S_COMMAND]) {
		parse_words(v[S_COMMAND], P("command"), 1, &out->command, &out->n_command, pp);
		if (v[S_COMMAND]->kind == YN_SEQ && !v[S_COMMAND]->n)
			problemf(pp, v[S_COMMAND], P("command"), "is empty: leave it out to run the image's entrypoint");
	}
	if (v[S_ENV])
		parse_env(v[S_ENV], P("env"), &out->env, &out->n_env, pp);
	if (v[S_PORT])
		parse_int(v[S_PORT], P("port"), 1, 65535, &out->port, pp);
	if (v[S_READY])
		parse_http_path(v[S_READY], P("ready_path"), &out->ready_path, pp);
	if (v[S_LIVE])
		parse_http_path(v[S_LIVE], P("live_path"), &out->live_path, pp);
	if (v[S_METRICS])
		parse_http_path(v[S_METRICS], P("metrics_path"), &out->metrics_path, pp);
	if (!out->ready_path)
		out->ready_path = xstrdup("/");
	if (!out->live_path)
		out->live_path = xstrdup(out->ready_path);
#undef P
}

/* ---- dump ---- */

static void dump_words(struct dlk_buf *b, char *const *w, int n)
{
	dlk_buf_addc(b, '[');
	for (int i = 0; i < n; i++) {
		if (i)
			dlk_buf_adds(b, ", ");
		project_dump_string(b, w[i]);
	}
	dlk_buf_addc(b, ']');
}

static void dump_env(struct dlk_buf *b, const struct dlk_program_kv *env, int n)
{
	dlk_buf_addc(b, '{');
	for (int i = 0; i < n; i++) {
		if (i)
			dlk_buf_adds(b, ", ");
		project_dump_string(b, env[i].key);
		dlk_buf_adds(b, ": ");
		project_dump_string(b, env[i].value);
	}
	dlk_buf_addc(b, '}');
}

static void dump_codes(struct dlk_buf *b, const int *c, int n)
{
	dlk_buf_addc(b, '[');
	for (int i = 0; i < n; i++)
		dlk_buf_addf(b, "%s%d", i ? ", " : "", c[i]);
	dlk_buf_addc(b, ']');
}

void program_dump(struct dlk_buf *b, const struct dlk_program *p, int indent)
{
	int in = indent + 2;
	if (!p->present) {
		dlk_buf_adds(b, " null\n");
		return;
	}
	dlk_buf_addf(b, "\n%*sframework: %s\n", in, "", dlk_framework_name(p->framework));
	dlk_buf_addf(b, "%*simage: ", in, "");
	project_dump_string(b, p->image);
	dlk_buf_addf(b, "\n%*scommand: ", in, "");
	dump_words(b, p->command, p->n_command);
	dlk_buf_addf(b, "\n%*sargs: ", in, "");
	dump_words(b, p->args, p->n_args);
	dlk_buf_addf(b, "\n%*sworkdir: ", in, "");
	project_dump_string(b, p->workdir);
	dlk_buf_addf(b, "\n%*senv: ", in, "");
	dump_env(b, p->env, p->n_env);
	dlk_buf_addf(b, "\n%*scode: ", in, "");
	project_dump_string(b, p->code);
	dlk_buf_addf(b, "\n%*sprocs_per_worker: %d\n%*sport: %d\n", in, "", p->procs_per_worker, in, "", p->port);
	dlk_buf_addf(b, "%*sexit_codes: {restart: ", in, "");
	dump_codes(b, p->restart_codes, p->n_restart_codes);
	dlk_buf_adds(b, ", fail: ");
	dump_codes(b, p->fail_codes, p->n_fail_codes);
	dlk_buf_adds(b, "}\n");
}

void program_server_dump(struct dlk_buf *b, const struct dlk_program_server *p, int indent)
{
	int in = indent + 2;
	if (!p->present) {
		dlk_buf_adds(b, " null\n");
		return;
	}
	dlk_buf_addf(b, "\n%*simage: ", in, "");
	project_dump_string(b, p->image);
	dlk_buf_addf(b, "\n%*scommand: ", in, "");
	if (p->command)
		dump_words(b, p->command, p->n_command);
	else
		dlk_buf_adds(b, "null");
	dlk_buf_addf(b, "\n%*senv: ", in, "");
	dump_env(b, p->env, p->n_env);
	dlk_buf_addf(b, "\n%*sport: %d\n%*sready_path: ", in, "", p->port, in, "");
	project_dump_string(b, p->ready_path);
	dlk_buf_addf(b, "\n%*slive_path: ", in, "");
	project_dump_string(b, p->live_path);
	dlk_buf_addf(b, "\n%*smetrics_path: ", in, "");
	project_dump_string(b, p->metrics_path);
	dlk_buf_addc(b, '\n');
}

static void free_env(struct dlk_program_kv **env, int *n)
{
	for (int i = 0; *env && i < *n; i++) {
		free((*env)[i].key);
		free((*env)[i].value);
	}
	free(*env);
	*env = NULL;
	*n = 0;
}

void program_release(struct dlk_program *p)
{
	free(p->image);
	free_argv(&p->command, &p->n_command);
	free_argv(&p->args, &p->n_args);
	free(p->workdir);
	free_env(&p->env, &p->n_env);
	free(p->code);
	free(p->restart_codes);
	free(p->fail_codes);
	memset(p, 0, sizeof(*p));
}

void program_server_release(struct dlk_program_server *p)
{
	free(p->image);
	free_argv(&p->command, &p->n_command);
	free_env(&p->env, &p->n_env);
	free(p->ready_path);
	free(p->live_path);
	free(p->metrics_path);
	memset(p, 0, sizeof(*p));
}
