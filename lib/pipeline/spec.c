/* The pipeline file: stages, their inputs, what they run and what they write. Read with the one
 * YAML reader (lib/util/ytree) so every message names FILE:LINE:COL; checked as a whole (names,
 * references, the kinds along each edge, cycles) before anything runs. */
#include "lib/pipeline/pipeline.h"
#include "lib/store/manifest.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"
#include "lib/util/utf8.h"
#include "lib/util/ytree.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct ytree_opts pipeline_yaml_opts = { 32, 200000, 10000, 0 };

#define PIPELINE_FILE_MAX (1 << 20)

static int at(struct dlk_err *err, const char *file, int line, int col, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int at(struct dlk_err *err, const char *file, int line, int col, const char *fmt, ...)
{
	char what[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d:%d: %s", file, line, col, what);
}

#define AT(n, ...) at(err, file, (n) ? (n)->line : 0, (n) ? (n)->col : 0, __VA_ARGS__)

const char *dlk_stage_kind_name(enum dlk_stage_kind k)
{
	return k == DLK_STAGE_TRAIN ? "train" : k == DLK_STAGE_PREDICT ? "predict" : "program";
}

enum dlk_value_kind dlk_stage_output_kind(const struct dlk_stage *s)
{
	return s->kind == DLK_STAGE_TRAIN ? DLK_VALUE_MODEL : DLK_VALUE_DATASET;
}

int dlk_pipeline_stage(const struct dlk_pipeline *p, const char *name)
{
	for (int i = 0; i < p->n_stages; i++)
		if (!strcmp(p->stages[i].name, name))
			return i;
	return -1;
}

/* a DNS label, so that a stage's Job and its output's name can carry it */
static int is_label(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max || !islower((unsigned char)s[0]) || s[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

/* an input's name becomes an environment variable's tail: DLK_INPUT_<NAME> */
static int is_input_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 63 || !islower((unsigned char)s[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

static int scalar_text(const char *file, const struct ynode *v, const char *what, char **out, struct dlk_err *err)
{
	char d[128];

	if (!v || v->kind != YN_SCALAR || ynode_is_null(v) || !*v->text)
		return AT(v, "%s is %s, not a string", what, v ? ynode_describe(v, d, sizeof(d)) : "missing");
	*out = xstrdup(v->text);
	return 0;
}

static int key_known(const char *file, const struct ynode *k, const char *where, const char *const *keys, size_t n,
                     struct dlk_err *err)
{
	char buf[512];

	for (size_t i = 0; i < n; i++)
		if (!strcmp(k->text, keys[i]))
			return 0;
	return AT(k, "unknown key '%s' in %s%s", dlk_visible(k->text), where,
	          dlk_suggest_or_list(buf, sizeof(buf), k->text, keys, n, "keys here are"));
}

/* YAML leaves a repeated key to the reader: here the second one is an error, not a silent
 * replacement of the first */
static int key_once(const char *file, const struct ynode *m, int i, struct dlk_err *err)
{
	for (int j = 0; j < i; j++)
		if (!strcmp(m->keys[j]->text, m->keys[i]->text))
			return at(err, file, m->keys[i]->line, m->keys[i]->col, "key '%s' twice (first at line %d)",
			          dlk_visible(m->keys[i]->text), m->keys[j]->line);
	return 0;
}

static const char *const top_keys[] = { "name", "store", "stages", "store_secret", "image", "schedule", "trigger",
	                                 "log_claim" };
static const char *const stage_keys[] = { "inputs", "run", "train", "predict", "code", "image", "params", "output",
	                                  "resources" };
static const char *const resource_keys[] = { "cpu", "memory", "gpus" };
static const char *const predict_keys[] = { "workers" };

static int parse_argv(const char *file, const struct ynode *v, const char *what, char ***out, int *n_out,
                      struct dlk_err *err)
{
	char d[128];

	if (!v || v->kind != YN_SEQ || !v->n)
		return AT(v, "%s is %s; write a list of words, e.g. [python3, prepare.py]", what,
		          v ? ynode_describe(v, d, sizeof(d)) : "missing");
	*out = xcalloc((size_t)v->n + 1, sizeof(char *));
	for (int i = 0; i < v->n; i++) {
		const struct ynode *w = v->vals[i];
		if (w->kind != YN_SCALAR || ynode_is_null(w))
			return AT(w, "%s[%d] is %s, not a word", what, i, ynode_describe(w, d, sizeof(d)));
		(*out)[i] = xstrdup(w->text);
	}
	if (n_out)
		*n_out = v->n;
	return 0;
}

static int parse_stage(const char *file, const struct ynode *k, const struct ynode *v, struct dlk_stage *s,
                       struct dlk_err *err)
{
	const struct ynode *prog = NULL;
	char d[128];
	int n_prog = 0;

	s->name = xstrdup(k->text);
	s->line = k->line;
	s->col = k->col;
	if (!is_label(s->name, 40))
		return AT(k, "stage name '%s' is not lowercase letters, digits and '-' (at most 40, starting with a letter)",
		          dlk_visible(s->name));
	if (!v || v->kind != YN_MAP)
		return AT(v, "stage '%s' is %s, not a mapping", s->name, ynode_describe(v, d, sizeof(d)));
	for (int i = 0; i < v->n; i++) {
		const struct ynode *key = v->keys[i], *val = v->vals[i];
		char what[128];

		snprintf(what, sizeof(what), "stages.%s.%s", s->name, key->text);
		if (key_known(file, key, "a stage", stage_keys, sizeof(stage_keys) / sizeof(*stage_keys), err) ||
		    key_once(file, v, i, err))
			return -1;
		if (!strcmp(key->text, "inputs")) {
			if (val->kind != YN_MAP)
				return AT(val, "%s is %s; write NAME: DATASET@TAG or NAME: STAGE", what, ynode_describe(val, d, sizeof(d)));
			if (val->n > DLK_PIPELINE_MAX_INPUTS)
				return AT(val, "%s has %d inputs, more than %d", what, val->n, DLK_PIPELINE_MAX_INPUTS);
			s->inputs = xcalloc((size_t)val->n + 1, sizeof(*s->inputs));
			for (int j = 0; j < val->n; j++) {
				struct dlk_stage_input *in = &s->inputs[s->n_inputs++];
				in->name = xstrdup(val->keys[j]->text);
				in->line = val->vals[j]->line;
				in->col = val->vals[j]->col;
				in->stage = -1;
				if (!is_input_name(in->name))
					return AT(val->keys[j], "input name '%s' is not lowercase letters, digits and '_'",
					          dlk_visible(in->name));
				for (int m = 0; m < j; m++)
					if (!strcmp(s->inputs[m].name, in->name))
						return AT(val->keys[j], "input '%s' twice in stage '%s'", in->name, s->name);
				if (scalar_text(file, val->vals[j], what, &in->ref, err))
					return -1;
			}
		} else if (!strcmp(key->text, "run")) {
			prog = key;
			n_prog++;
			s->kind = DLK_STAGE_PROGRAM;
			if (parse_argv(file, val, what, &s->argv, NULL, err))
				return -1;
		} else if (!strcmp(key->text, "train")) {
			prog = key;
			n_prog++;
			s->kind = DLK_STAGE_TRAIN;
			if (scalar_text(file, val, what, &s->project, err))
				return -1;
		} else if (!strcmp(key->text, "predict")) {
			prog = key;
			n_prog++;
			s->kind = DLK_STAGE_PREDICT;
			if (val->kind != YN_MAP)
				return AT(val, "%s is %s; write predict: {} or predict: {workers: N}", what,
				          ynode_describe(val, d, sizeof(d)));
			for (int j = 0; j < val->n; j++) {
				const struct ynode *wv = val->vals[j];
				char *end = NULL;
				long n;
				if (key_known(file, val->keys[j], what, predict_keys, sizeof(predict_keys) / sizeof(*predict_keys), err) ||
				    key_once(file, val, j, err))
					return -1;
				/* how many pods score it on a cluster (dlk predict --workers N); not in the key:
				   the parts joined are the bytes of one process */
				n = wv->kind == YN_SCALAR && !ynode_is_null(wv) ? strtol(wv->text, &end, 10) : 0;
				if (!end || *end || end == wv->text || n < 1 || n > 1000)
					return AT(wv, "%s.workers is %s, not a whole number from 1 to 1000", what,
					          ynode_describe(wv, d, sizeof(d)));
				s->workers = (int)n;
			}
		} else if (!strcmp(key->text, "code")) {
			if (parse_argv(file, val, what, &s->code, &s->n_code, err))
				return -1;
		} else if (!strcmp(key->text, "image")) {
			if (scalar_text(file, val, what, &s->image, err))
				return -1;
		} else if (!strcmp(key->text, "output")) {
			char why[256];
			if (scalar_text(file, val, what, &s->output, err))
				return -1;
			if (strchr(s->output, '@') || dlk_dataset_tag_check(s->output, why, sizeof(why)))
				return AT(val, "%s '%s' is not a dataset name (without @TAG: each run tags it): %s", what,
				          dlk_visible(s->output), strchr(s->output, '@') ? "it has a tag" : why);
		} else if (!strcmp(key->text, "resources")) {
			/* what the stage's pod asks for on a cluster; not in the key: it does not change
			   what the stage computes */
			if (val->kind != YN_MAP)
				return AT(val, "%s is %s; write e.g. {cpu: \"2\", memory: 4Gi, gpus: 1}", what,
				          ynode_describe(val, d, sizeof(d)));
			s->resources = xcalloc((size_t)val->n + 1, sizeof(*s->resources));
			for (int j = 0; j < val->n; j++) {
				const struct ynode *rv = val->vals[j];
				if (key_known(file, val->keys[j], what, resource_keys, sizeof(resource_keys) / sizeof(*resource_keys),
				              err) ||
				    key_once(file, val, j, err))
					return -1;
				if (rv->kind != YN_SCALAR || ynode_is_null(rv) || !rv->text[0] || strpbrk(rv->text, "\"\\\n\r\t'"))
					return AT(rv, "%s.%s is %s, not a quantity like 2 or 4Gi", what, val->keys[j]->text,
					          ynode_describe(rv, d, sizeof(d)));
				if (!strcmp(val->keys[j]->text, "gpus") && strspn(rv->text, "0123456789") != strlen(rv->text))
					return AT(rv, "%s.gpus is '%s', not a whole number", what, dlk_visible(rv->text));
				s->resources[s->n_resources].key = xstrdup(val->keys[j]->text);
				s->resources[s->n_resources++].value = xstrdup(rv->text);
			}
		} else if (!strcmp(key->text, "params")) {
			if (val->kind != YN_MAP)
				return AT(val, "%s is %s; write KEY: VALUE lines", what, ynode_describe(val, d, sizeof(d)));
			s->params = xcalloc((size_t)val->n + 1, sizeof(*s->params));
			for (int j = 0; j < val->n; j++) {
				if (val->vals[j]->kind != YN_SCALAR)
					return AT(val->vals[j], "%s.%s is %s, not a single value", what, val->keys[j]->text,
					          ynode_describe(val->vals[j], d, sizeof(d)));
				if (key_once(file, val, j, err))
					return -1;
				s->params[s->n_params].key = xstrdup(val->keys[j]->text);
				s->params[s->n_params++].value = xstrdup(val->vals[j]->text);
			}
		}
	}
	if (n_prog != 1)
		return n_prog ? AT(prog, "stage '%s' says what it runs twice: give one of run, train, predict", s->name)
		              : AT(k, "stage '%s' runs nothing: give run: [PROGRAM, ARGS...], train: PROJECT.yaml or predict: {}",
		                   s->name);
	if (s->n_code && s->kind != DLK_STAGE_PROGRAM)
		return AT(k, "stage '%s': code: goes with run: (a train stage's code is its project file)", s->name);
	return 0;
}

/* Each input names a stage or a dataset; what flows must be what the stage takes. */
static int resolve_inputs(const struct dlk_pipeline *p, const char *file, struct dlk_err *err)
{
	for (int i = 0; i < p->n_stages; i++) {
		struct dlk_stage *s = &p->stages[i];
		int n_model = 0, n_data = 0;

		for (int j = 0; j < s->n_inputs; j++) {
			struct dlk_stage_input *in = &s->inputs[j];
			enum dlk_value_kind vk = DLK_VALUE_DATASET;
			char why[256];

			if (strchr(in->ref, '@') || !strncmp(in->ref, "sha256:", 7)) {
				struct dlk_dataset_ref r;
				if (dlk_dataset_ref_parse(in->ref, 0, &r, why, sizeof(why)))
					return at(err, file, in->line, in->col, "stages.%s.inputs.%s: '%s' is no dataset reference: %s",
					          s->name, in->name, dlk_visible(in->ref), why);
			} else {
				const char **names = xcalloc((size_t)p->n_stages, sizeof(char *));
				char buf[512];
				for (int m = 0; m < p->n_stages; m++)
					names[m] = p->stages[m].name;
				in->stage = dlk_pipeline_stage(p, in->ref);
				if (in->stage < 0) {
					at(err, file, in->line, in->col,
					   "stages.%s.inputs.%s: '%s' names no stage%s; a dataset is NAME@TAG or sha256:ID", s->name,
					   in->name, dlk_visible(in->ref),
					   dlk_suggest_or_list(buf, sizeof(buf), in->ref, names, (size_t)p->n_stages, "stages are"));
					free(names);
					return -1;
				}
				free(names);
				if (in->stage == i)
					return at(err, file, in->line, in->col, "stages.%s.inputs.%s: a stage cannot read its own output",
					          s->name, in->name);
				vk = dlk_stage_output_kind(&p->stages[in->stage]);
			}
			if (vk == DLK_VALUE_MODEL)
				n_model++;
			else
				n_data++;
			if (s->kind == DLK_STAGE_TRAIN && vk == DLK_VALUE_MODEL)
				return at(err, file, in->line, in->col,
				          "stages.%s.inputs.%s: a model (stage '%s' trains one) where a dataset is expected", s->name,
				          in->name, in->ref);
			if (s->kind == DLK_STAGE_PREDICT) {
				if (!strcmp(in->name, "model") && vk != DLK_VALUE_MODEL)
					return at(err, file, in->line, in->col,
					          "stages.%s.inputs.model: a dataset where a model is expected (name a train stage)",
					          s->name);
				if (!strcmp(in->name, "data") && vk != DLK_VALUE_DATASET)
					return at(err, file, in->line, in->col,
					          "stages.%s.inputs.data: a model where a dataset is expected", s->name);
				if (strcmp(in->name, "model") && strcmp(in->name, "data"))
					return at(err, file, in->line, in->col,
					          "stages.%s.inputs.%s: a predict stage reads 'model' and 'data' only", s->name, in->name);
			}
		}
		if (s->kind == DLK_STAGE_TRAIN && n_data != 1)
			return at(err, file, s->line, s->col, "stage '%s' trains on one dataset: give it one input, not %d",
			          s->name, n_data);
		if (s->kind == DLK_STAGE_PREDICT && (n_model != 1 || n_data != 1))
			return at(err, file, s->line, s->col, "stage '%s' needs the inputs model (a train stage) and data",
			          s->name);
	}
	return 0;
}

/* Kahn's algorithm, inputs first, ties in the file's order; what is left forms a cycle, named
 * from one of its stages around it. */
static int order_stages(struct dlk_pipeline *p, const char *file, struct dlk_err *err)
{
	int n = p->n_stages, done = 0;
	int *indeg = xcalloc((size_t)n + 1, sizeof(int));
	char *placed = xcalloc((size_t)n + 1, 1);

	p->order = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		for (int j = 0; j < p->stages[i].n_inputs; j++)
			if (p->stages[i].inputs[j].stage >= 0)
				indeg[i]++;
	while (done < n) {
		int pick = -1;
		for (int i = 0; i < n && pick < 0; i++)
			if (!placed[i] && !indeg[i])
				pick = i;
		if (pick < 0)
			break;
		placed[pick] = 1;
		p->order[done++] = pick;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < p->stages[i].n_inputs; j++)
				if (p->stages[i].inputs[j].stage == pick)
					indeg[i]--;
	}
	if (done < n) {
		/* walk back along inputs from a stage left over until a stage repeats: that is the cycle */
		struct dlk_buf b = DLK_BUF_INIT;
		char *seen = xcalloc((size_t)n + 1, 1);
		int cur = -1, start;
		const struct dlk_stage *s;

		for (int i = 0; i < n && cur < 0; i++)
			if (!placed[i])
				cur = i;
		while (!seen[cur]) {
			seen[cur] = 1;
			for (int j = 0; j < p->stages[cur].n_inputs; j++) {
				int up = p->stages[cur].inputs[j].stage;
				if (up >= 0 && !placed[up]) {
					cur = up;
					break;
				}
			}
		}
		start = cur;
		do {
			int next = -1;
			dlk_buf_addf(&b, "%s <- ", p->stages[cur].name);
			for (int j = 0; j < p->stages[cur].n_inputs && next < 0; j++) {
				int up = p->stages[cur].inputs[j].stage;
				if (up >= 0 && !placed[up] && seen[up])
					next = up;
			}
			cur = next < 0 ? start : next;
		} while (cur != start && b.len < 2000);
		dlk_buf_addf(&b, "%s", p->stages[start].name);
		s = &p->stages[start];
		at(err, file, s->line, s->col, "the stages form a cycle: %s (each reads the output of the next)", b.data);
		dlk_buf_release(&b);
		free(seen);
		free(indeg);
		free(placed);
		return -1;
	}
	free(indeg);
	free(placed);
	return 0;
}

int dlk_pipeline_parse(const char *text, size_t len, const char *file, const char *dir, struct dlk_pipeline *p,
                       struct dlk_err *err)
{
	struct ytree_error ye;
	struct ynode *root = NULL;
	const struct ynode *stages = NULL;
	char d[128];
	int rc = -1;

	memset(p, 0, sizeof(*p));
	p->file = xstrdup(file);
	p->dir = xstrdup(dir && *dir ? dir : ".");
	if (ytree_parse(text, len, &pipeline_yaml_opts, &root, &ye)) {
		char buf[1200];
		return at(err, file, ye.line, ye.col, "%s", ytree_error_text(&ye, &pipeline_yaml_opts, buf, sizeof(buf)));
	}
	if (!root || root->kind != YN_MAP) {
		at(err, file, root ? root->line : 1, root ? root->col : 1,
		   "a pipeline file is a mapping with name, store and stages");
		goto out;
	}
	for (int i = 0; i < root->n; i++) {
		const struct ynode *k = root->keys[i], *v = root->vals[i];
		if (key_known(file, k, "the pipeline file", top_keys, sizeof(top_keys) / sizeof(*top_keys), err) ||
		    key_once(file, root, i, err))
			goto out;
		if (!strcmp(k->text, "name")) {
			if (scalar_text(file, v, "name", &p->name, err))
				goto out;
			if (!is_label(p->name, 40)) {
				AT(v, "name '%s' is not lowercase letters, digits and '-' (at most 40, starting with a letter)",
				   dlk_visible(p->name));
				goto out;
			}
		} else if (!strcmp(k->text, "store")) {
			if (scalar_text(file, v, "store", &p->store, err))
				goto out;
		} else if (!strcmp(k->text, "store_secret")) {
			if (scalar_text(file, v, "store_secret", &p->store_secret, err))
				goto out;
			if (!is_label(p->store_secret, 63)) {
				AT(v, "store_secret '%s' is not the name of a Secret", dlk_visible(p->store_secret));
				goto out;
			}
		} else if (!strcmp(k->text, "log_claim")) {
			if (scalar_text(file, v, "log_claim", &p->log_claim, err))
				goto out;
			if (!is_label(p->log_claim, 63)) {
				AT(v, "log_claim '%s' is not the name of a PersistentVolumeClaim", dlk_visible(p->log_claim));
				goto out;
			}
		} else if (!strcmp(k->text, "image")) {
			if (scalar_text(file, v, "image", &p->image, err))
				goto out;
		} else if (!strcmp(k->text, "schedule")) {
			if (scalar_text(file, v, "schedule", &p->schedule, err))
				goto out;
			if (strpbrk(p->schedule, "\"\\\n\r\t'") || !*p->schedule) {
				AT(v, "schedule '%s' is not a cron line like '0 3 * * *'", dlk_visible(p->schedule));
				goto out;
			}
		} else if (!strcmp(k->text, "trigger")) {
			char *t = NULL;
			if (scalar_text(file, v, "trigger", &t, err))
				goto out;
			p->data_changed = !strcmp(t, "data-changed");
			if (!p->data_changed) {
				AT(v, "trigger '%s' is not one dlk knows: the one trigger is data-changed", dlk_visible(t));
				free(t);
				goto out;
			}
			free(t);
		} else {
			stages = v;
		}
	}
	if (!p->name) {
		at(err, file, root->line, root->col, "the pipeline has no name: add name: NAME");
		goto out;
	}
	if (!p->store) {
		at(err, file, root->line, root->col, "the pipeline has no store: add store: DIR or s3://BUCKET/PREFIX");
		goto out;
	}
	if (!stages || stages->kind != YN_MAP || !stages->n) {
		if (stages)
			AT(stages, "stages is %s; write STAGE: {inputs: ..., run: ...} lines", ynode_describe(stages, d, sizeof(d)));
		else
			at(err, file, root->line, root->col, "the pipeline has no stages");
		goto out;
	}
	if (stages->n > DLK_PIPELINE_MAX_STAGES) {
		AT(stages, "%d stages, more than %d", stages->n, DLK_PIPELINE_MAX_STAGES);
		goto out;
	}
	p->stages = xcalloc((size_t)stages->n, sizeof(*p->stages));
	for (int i = 0; i < stages->n; i++) {
		struct dlk_stage *s = &p->stages[p->n_stages++];
		if (parse_stage(file, stages->keys[i], stages->vals[i], s, err))
			goto out;
		for (int j = 0; j < i; j++)
			if (!strcmp(p->stages[j].name, s->name)) {
				AT(stages->keys[i], "stage '%s' twice", s->name);
				goto out;
			}
		if (!s->output)
			s->output = xasprintf("%s-%s", p->name, s->name);
	}
	for (int i = 0; i < p->n_stages; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(p->stages[i].output, p->stages[j].output)) {
				at(err, file, p->stages[i].line, p->stages[i].col, "stages '%s' and '%s' both write dataset '%s'",
				   p->stages[j].name, p->stages[i].name, p->stages[i].output);
				goto out;
			}
	if (resolve_inputs(p, file, err) || order_stages(p, file, err))
		goto out;
	rc = 0;
out:
	ynode_free(root);
	return rc;
}

int dlk_pipeline_load(const char *file, struct dlk_pipeline *p, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[512];
	char *dir;
	int rc;

	memset(p, 0, sizeof(*p));
	if (dlk_buf_read_file(&b, file, PIPELINE_FILE_MAX, msg, sizeof(msg))) {
		dlk_buf_release(&b);
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", file, msg);
	}
	dir = dlk_dir_of(file);
	rc = dlk_pipeline_parse(b.data ? b.data : "", b.len, file, dir, p, err);
	free(dir);
	dlk_buf_release(&b);
	return rc;
}

static void mark(const struct dlk_pipeline *p, int i, char *want, int down)
{
	if (want[i])
		return;
	want[i] = 1;
	if (down) {
		for (int k = 0; k < p->n_stages; k++)
			for (int j = 0; j < p->stages[k].n_inputs; j++)
				if (p->stages[k].inputs[j].stage == i)
					mark(p, k, want, down);
	} else {
		for (int j = 0; j < p->stages[i].n_inputs; j++)
			if (p->stages[i].inputs[j].stage >= 0)
				mark(p, p->stages[i].inputs[j].stage, want, down);
	}
}

void dlk_pipeline_descendants(const struct dlk_pipeline *p, int i, char *want)
{
	mark(p, i, want, 1);
}

void dlk_pipeline_ancestors(const struct dlk_pipeline *p, int i, char *want)
{
	mark(p, i, want, 0);
}

void dlk_pipeline_release(struct dlk_pipeline *p)
{
	for (int i = 0; p->stages && i < p->n_stages; i++) {
		struct dlk_stage *s = &p->stages[i];
		for (int j = 0; j < s->n_inputs; j++) {
			free(s->inputs[j].name);
			free(s->inputs[j].ref);
		}
		free(s->inputs);
		for (int j = 0; s->argv && s->argv[j]; j++)
			free(s->argv[j]);
		free(s->argv);
		for (int j = 0; s->code && s->code[j]; j++)
			free(s->code[j]);
		free(s->code);
		for (int j = 0; j < s->n_params; j++) {
			free(s->params[j].key);
			free(s->params[j].value);
		}
		free(s->params);
		for (int j = 0; j < s->n_resources; j++) {
			free(s->resources[j].key);
			free(s->resources[j].value);
		}
		free(s->resources);
		free(s->name);
		free(s->image);
		free(s->project);
		free(s->output);
	}
	free(p->stages);
	free(p->order);
	free(p->file);
	free(p->dir);
	free(p->name);
	free(p->store);
	free(p->store_secret);
	free(p->log_claim);
	free(p->image);
	free(p->schedule);
	free(p->state_root);
	memset(p, 0, sizeof(*p));
}
