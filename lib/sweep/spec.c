/* The sweep: section of a project file. The project loader leaves the section to this reader
 * (it is not part of what a run trains), which walks the same YAML tree and names
 * FILE:LINE:COL in every message. Whether a parameter's key and values make a valid project is
 * the project loader's to say: the driver loads the project with each trial's --set. */
#include "lib/sweep/sweep.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/ytree.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct ytree_opts sweep_yaml_opts = { 64, 1000000, 100000, 0 };

#define SPEC_FILE_MAX (4 << 20)

static int at(struct dlk_err *err, const char *file, const struct ynode *n, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int at(struct dlk_err *err, const char *file, const struct ynode *n, const char *path, const char *fmt, ...)
{
	char what[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d:%d: %s: %s", file, n ? n->line : 0, n ? n->col : 0,
	                dlk_visible(path), what);
}

static const struct ynode *map_get(const struct ynode *m, const char *key)
{
	for (int i = 0; m && m->kind == YN_MAP && i < m->n; i++)
		if (!strcmp(m->keys[i]->text, key))
			return m->vals[i];
	return NULL;
}

static int get_num(const char *file, const struct ynode *v, const char *path, double *out, struct dlk_err *err)
{
	char d[128];
	if (!v || v->kind != YN_SCALAR || ynode_float(v, out) || !isfinite(*out))
		return at(err, file, v, path, "is %s, not a number", v ? ynode_describe(v, d, sizeof(d)) : "missing");
	return 0;
}

static int get_int(const char *file, const struct ynode *v, const char *path, long long lo, long long hi, long long *out,
                   struct dlk_err *err)
{
	char d[128];
	if (!v || v->kind != YN_SCALAR || ynode_int(v, out))
		return at(err, file, v, path, "is %s, not a whole number", v ? ynode_describe(v, d, sizeof(d)) : "missing");
	if (*out < lo || *out > hi)
		return at(err, file, v, path, "is %lld, outside %lld..%lld", *out, lo, hi);
	return 0;
}

static int get_word(const char *file, const struct ynode *v, const char *path, const char *const *words, int *out,
                    struct dlk_err *err)
{
	char d[128], list[256] = "";
	if (v && v->kind == YN_SCALAR)
		for (int i = 0; words[i]; i++)
			if (!strcmp(v->text, words[i])) {
				*out = i;
				return 0;
			}
	for (int i = 0; words[i]; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", words[i]);
	return at(err, file, v, path, "is %s; one of %s", ynode_describe(v, d, sizeof(d)), list);
}

static const char *const param_kinds[] = { "values", "uniform", "loguniform", "int", NULL };

static int parse_param(const char *file, const struct ynode *k, const struct ynode *v, struct dlk_sweep_param *p,
                       struct dlk_err *err)
{
	char path[600], d[128];
	int kind = -1;
	const struct ynode *arg = NULL;

	snprintf(path, sizeof(path), "sweep.parameters.%s", k->text);
	p->key = xstrdup(k->text);
	p->line = k->line;
	p->col = k->col;
	if (!k->text[0] || strspn(k->text, "abcdefghijklmnopqrstuvwxyz0123456789_.") != strlen(k->text))
		return at(err, file, k, path, "is not a project key as --set spells it (training.optimizer.lr)");
	if (!strcmp(k->text, "name") || !strncmp(k->text, "sweep", 5))
		return at(err, file, k, path, "cannot be swept (each trial's name is the sweep's)");
	/* a bare list is a list of values */
	if (v->kind == YN_SEQ) {
		kind = DLK_SWEEP_VALUES;
		arg = v;
	} else if (v->kind == YN_MAP && v->n == 1) {
		if (get_word(file, v->keys[0], path, param_kinds, &kind, err))
			return -1;
		arg = v->vals[0];
	} else {
		return at(err, file, v, path, "is %s; give {values: [...]}, {uniform: [LO, HI]}, {loguniform: [LO, HI]} "
		          "or {int: [LO, HI]}", ynode_describe(v, d, sizeof(d)));
	}
	p->kind = (enum dlk_sweep_kind)kind;
	if (!arg || arg->kind != YN_SEQ)
		return at(err, file, arg ? arg : v, path, "is %s, not a list", arg ? ynode_describe(arg, d, sizeof(d)) : "empty");
	if (p->kind == DLK_SWEEP_VALUES) {
		if (arg->n < 1 || arg->n > DLK_SWEEP_MAX_VALUES)
			return at(err, file, arg, path, "has %d values; give 1 to %d", arg->n, DLK_SWEEP_MAX_VALUES);
		p->values = xcalloc((size_t)arg->n, sizeof(char *));
		for (int i = 0; i < arg->n; i++) {
			if (arg->vals[i]->kind != YN_SCALAR || ynode_is_null(arg->vals[i]))
				return at(err, file, arg->vals[i], path, "value %d is %s, not a scalar", i,
				          ynode_describe(arg->vals[i], d, sizeof(d)));
			if (strpbrk(arg->vals[i]->text, "\n\r"))
				return at(err, file, arg->vals[i], path, "value %d spans lines", i);
			p->values[p->n_values++] = xstrdup(arg->vals[i]->text);
		}
		return 0;
	}
	if (arg->n != 2)
		return at(err, file, arg, path, "has %d numbers; give [LO, HI]", arg->n);
	if (p->kind == DLK_SWEEP_INT) {
		long long lo, hi;
		if (get_int(file, arg->vals[0], path, -(1LL << 40), 1LL << 40, &lo, err) ||
		    get_int(file, arg->vals[1], path, -(1LL << 40), 1LL << 40, &hi, err))
			return -1;
		p->lo = (double)lo;
		p->hi = (double)hi;
	} else if (get_num(file, arg->vals[0], path, &p->lo, err) || get_num(file, arg->vals[1], path, &p->hi, err)) {
		return -1;
	}
	if (!(p->lo < p->hi))
		return at(err, file, arg, path, "LO (%g) is not below HI (%g)", p->lo, p->hi);
	if (!isfinite(p->hi - p->lo))
		return at(err, file, arg, path, "the range [%g, %g] is too wide to sample", p->lo, p->hi);
	if (p->kind == DLK_SWEEP_LOGUNIFORM && p->lo <= 0)
		return at(err, file, arg, path, "a log-uniform range is positive; LO is %g", p->lo);
	return 0;
}

static const char *const methods[] = { "random", "grid", "tpe", NULL };
static const char *const metrics[] = { "accuracy", "loss", NULL };
static const char *const goals[] = { "maximize", "minimize", NULL };
static const char *const asha_at[] = { "epochs", "steps", NULL };
static const char *const keys[] = { "name", "method", "metric", "goal", "trials", "gpu_hours", "parallel", "seed",
	                            "parameters", "early_stopping", NULL };
static const char *const es_keys[] = { "method", "at", "min", "reduction_factor", NULL };
static const char *const es_methods[] = { "asha", "none", NULL };

static int check_keys(const char *file, const struct ynode *m, const char *path, const char *const *known,
                      struct dlk_err *err)
{
	char p[300], d[128];
	if (m->kind != YN_MAP)
		return at(err, file, m, path, "is %s, not a mapping", ynode_describe(m, d, sizeof(d)));
	for (int i = 0; i < m->n; i++) {
		int ok = 0;
		for (int j = 0; known[j]; j++)
			ok |= !strcmp(m->keys[i]->text, known[j]);
		for (int j = 0; j < i; j++)
			if (!strcmp(m->keys[i]->text, m->keys[j]->text)) {
				snprintf(p, sizeof(p), "%s.%s", path, m->keys[i]->text);
				return at(err, file, m->keys[i], p, "given twice (first at line %d)", m->keys[j]->line);
			}
		if (!ok) {
			snprintf(p, sizeof(p), "%s.%s", path, m->keys[i]->text);
			return at(err, file, m->keys[i], p, "unknown key");
		}
	}
	return 0;
}

static int parse_root(const char *file, const struct ynode *sw, const char *project, struct dlk_sweep_spec *s,
                      struct dlk_err *err)
{
	const struct ynode *v, *ps, *es;
	long long n;
	int w;

	if (check_keys(file, sw, "sweep", keys, err))
		return -1;
	s->line = sw->line;
	s->method = DLK_SWEEP_RANDOM;
	s->trials = 10;
	s->parallel = 1;
	s->seed = 1;
	s->asha_min = 1;
	s->asha_factor = 3;
	if ((v = map_get(sw, "name"))) {
		char why[160];
		if (v->kind != YN_SCALAR || !v->text[0] || strlen(v->text) > 44 ||
		    strspn(v->text, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v->text) || v->text[0] == '-' ||
		    v->text[strlen(v->text) - 1] == '-') {
			snprintf(why, sizeof(why), "is not a name of at most 44 lowercase letters, digits and '-' "
			         "(its trials are projects NAME-0, NAME-1, ...)");
			return at(err, file, v, "sweep.name", "%s", why);
		}
		s->name = xstrdup(v->text);
	} else {
		/* trials are projects NAME-N, N < 10000: within the 50 characters of a project name */
		s->name = xasprintf("%.38s-sweep", project);
	}
	if ((v = map_get(sw, "method"))) {
		if (get_word(file, v, "sweep.method", methods, &w, err))
			return -1;
		s->method = (enum dlk_sweep_method)w;
	}
	w = 0;
	if ((v = map_get(sw, "metric")) && get_word(file, v, "sweep.metric", metrics, &w, err))
		return -1;
	s->metric = xstrdup(metrics[w]);
	s->maximize = w == 0;
	if ((v = map_get(sw, "goal"))) {
		if (get_word(file, v, "sweep.goal", goals, &w, err))
			return -1;
		s->maximize = w == 0;
	}
	if ((v = map_get(sw, "trials"))) {
		if (get_int(file, v, "sweep.trials", 1, DLK_SWEEP_MAX_TRIALS, &n, err))
			return -1;
		s->trials = (int)n;
	}
	if ((v = map_get(sw, "parallel"))) {
		if (get_int(file, v, "sweep.parallel", 1, 256, &n, err))
			return -1;
		s->parallel = (int)n;
	}
	if ((v = map_get(sw, "seed"))) {
		if (get_int(file, v, "sweep.seed", 0, 1LL << 53, &n, err))
			return -1;
		s->seed = (unsigned long long)n;
	}
	if ((v = map_get(sw, "gpu_hours"))) {
		if (get_num(file, v, "sweep.gpu_hours", &s->gpu_hours, err))
			return -1;
		if (s->gpu_hours < 0 || s->gpu_hours > 1e7)
			return at(err, file, v, "sweep.gpu_hours", "is %g, outside 0..1e7", s->gpu_hours);
	}
	ps = map_get(sw, "parameters");
	if (!ps || ps->kind != YN_MAP || ps->n == 0)
		return at(err, file, ps ? ps : sw, "sweep.parameters", "missing or empty: name at least one project key "
		          "and its values or range");
	if (ps->n > DLK_SWEEP_MAX_PARAMS)
		return at(err, file, ps, "sweep.parameters", "has %d keys, more than the limit of %d", ps->n,
		          DLK_SWEEP_MAX_PARAMS);
	s->params = xcalloc((size_t)ps->n, sizeof(*s->params));
	for (int i = 0; i < ps->n; i++) {
		for (int j = 0; j < i; j++)
			if (!strcmp(ps->keys[i]->text, ps->keys[j]->text))
				return at(err, file, ps->keys[i], "sweep.parameters", "'%s' given twice (first at line %d)",
				          ps->keys[i]->text, ps->keys[j]->line);
		s->n_params++;
		if (parse_param(file, ps->keys[i], ps->vals[i], &s->params[i], err))
			return -1;
		if (s->method == DLK_SWEEP_GRID && s->params[i].kind != DLK_SWEEP_VALUES)
			return at(err, file, ps->vals[i], "sweep.parameters", "'%s': grid search needs a list of values, "
			          "not a range", ps->keys[i]->text);
	}
	if (s->method == DLK_SWEEP_GRID && dlk_sweep_grid_size(s) < s->trials)
		s->trials = (int)dlk_sweep_grid_size(s);
	if ((es = map_get(sw, "early_stopping")) && !ynode_is_null(es)) {
		if (check_keys(file, es, "sweep.early_stopping", es_keys, err))
			return -1;
		w = 0;
		if ((v = map_get(es, "method")) && get_word(file, v, "sweep.early_stopping.method", es_methods, &w, err))
			return -1;
		s->asha = w == 0;
		if ((v = map_get(es, "at"))) {
			if (get_word(file, v, "sweep.early_stopping.at", asha_at, &w, err))
				return -1;
			s->asha_steps = w == 1;
			/* a step's line has the training loss; the test metrics come once an epoch */
			if (s->asha_steps && strcmp(s->metric, "loss"))
				return at(err, file, v, "sweep.early_stopping.at", "rungs at steps judge the training loss: "
				          "set metric: loss, or at: epochs");
		}
		if ((v = map_get(es, "min"))) {
			if (get_int(file, v, "sweep.early_stopping.min", 1, 1LL << 40, &n, err))
				return -1;
			s->asha_min = (long)n;
		}
		if ((v = map_get(es, "reduction_factor"))) {
			if (get_int(file, v, "sweep.early_stopping.reduction_factor", 2, 100, &n, err))
				return -1;
			s->asha_factor = (int)n;
		}
	}
	return 0;
}

int dlk_sweep_spec_parse(const char *text, size_t len, const char *file, const char *project,
                         struct dlk_sweep_spec *s, struct dlk_err *err)
{
	struct ynode *root = NULL;
	struct ytree_error ye;
	const struct ynode *sw;
	char buf[512];
	int rc;

	*s = (struct dlk_sweep_spec)DLK_SWEEP_SPEC_INIT;
	s->file = xstrdup(file);
	if (ytree_parse(text, len, &sweep_yaml_opts, &root, &ye)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d:%d: %s", file, ye.line, ye.col,
		         ytree_error_text(&ye, &sweep_yaml_opts, buf, sizeof(buf)));
		dlk_sweep_spec_release(s);
		return -1;
	}
	sw = root && root->kind == YN_MAP ? map_get(root, "sweep") : NULL;
	if (!sw || ynode_is_null(sw)) {
		ynode_free(root);
		dlk_sweep_spec_release(s);
		return 1;
	}
	rc = parse_root(file, sw, project && *project ? project : "project", s, err);
	ynode_free(root);
	if (rc)
		dlk_sweep_spec_release(s);
	return rc;
}

int dlk_sweep_spec_load(const char *path, const char *project, struct dlk_sweep_spec *s, struct dlk_err *err)
{
	FILE *f;
	char *text, msg[512];
	size_t n;
	int rc;

	f = dlk_fopen_regular(path, msg, sizeof(msg));
	if (!f)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s", msg);
	text = xmalloc(SPEC_FILE_MAX + 1);
	n = fread(text, 1, SPEC_FILE_MAX + 1, f);
	fclose(f);
	if (n > SPEC_FILE_MAX) {
		free(text);
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is larger than %d bytes", path, SPEC_FILE_MAX);
	}
	rc = dlk_sweep_spec_parse(text, n, path, project, s, err);
	free(text);
	return rc;
}

void dlk_sweep_spec_release(struct dlk_sweep_spec *s)
{
	for (int i = 0; s->params && i < s->n_params; i++) {
		free(s->params[i].key);
		for (int j = 0; j < s->params[i].n_values; j++)
			free(s->params[i].values[j]);
		free(s->params[i].values);
	}
	free(s->params);
	free(s->file);
	free(s->name);
	free(s->metric);
	*s = (struct dlk_sweep_spec)DLK_SWEEP_SPEC_INIT;
}

long dlk_sweep_grid_size(const struct dlk_sweep_spec *s)
{
	long n = 1;
	for (int i = 0; i < s->n_params; i++) {
		if (s->params[i].kind != DLK_SWEEP_VALUES)
			return 0;
		n *= s->params[i].n_values;
		if (n > DLK_SWEEP_MAX_TRIALS)
			return DLK_SWEEP_MAX_TRIALS;
	}
	return n;
}
