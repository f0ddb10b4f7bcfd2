#include "lib/kube/yamljson.h"

#include <string.h>
#include <yaml.h>

/* Bounds for alias expansion ("billion laughs"): a kubeconfig has a few hundred nodes. */
#define YJ_MAX_NODES 200000
#define YJ_MAX_DEPTH 64

struct yj {
	yaml_document_t *doc;
	size_t nodes;
	const char *name;
	struct dlk_err *err;
};

static cJSON *yj_scalar(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;

	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
			return cJSON_CreateTrue();
		if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
			return cJSON_CreateFalse();
		if (len == 0 || !strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") || !strcmp(v, "NULL"))
			return cJSON_CreateNull();
	}
	if (strlen(v) != len)
		return NULL; /* embedded NUL: not representable, reject */
	return cJSON_CreateString(v);
}

static cJSON *yj_node(struct yj *y, yaml_node_t *n, int depth)
{
	cJSON *out = NULL;

	if (!n)
		return cJSON_CreateNull();
	if (++y->nodes > YJ_MAX_NODES || depth > YJ_MAX_DEPTH) {
		dlk_errf(y->err, DLK_EXIT_CONFIG, "%s: line %zu: document too large or too deeply nested",
			 y->name, n->start_mark.line + 1);
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		out = yj_scalar(n);
		if (!out)
			dlk_errf(y->err, DLK_EXIT_CONFIG, "%s: line %zu, column %zu: NUL byte in a value",
				 y->name, n->start_mark.line + 1, n->start_mark.column + 1);
		return out;
	case YAML_SEQUENCE_NODE:
		out = cJSON_CreateArray();
		for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
			cJSON *c = yj_node(y, yaml_document_get_node(y->doc, *it), depth + 1);
			if (!c)
				goto fail;
			cJSON_AddItemToArray(out, c);
		}
		return out;
	case YAML_MAPPING_NODE:
		out = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
			if (!k || k->type != YAML_SCALAR_NODE) {
				dlk_errf(y->err, DLK_EXIT_CONFIG, "%s: line %zu: mapping keys must be scalars",
					 y->name, n->start_mark.line + 1);
				goto fail;
			}
			const char *key = (const char *)k->data.scalar.value;
			cJSON *c = yj_node(y, yaml_document_get_node(y->doc, p->value), depth + 1);
			if (!c)
				goto fail;
			/* YAML says keys are unique; the Go decoder kubectl uses rejects duplicates too. */
			if (cJSON_GetObjectItemCaseSensitive(out, key)) {
				cJSON_Delete(c);
				dlk_errf(y->err, DLK_EXIT_CONFIG, "%s: line %zu, column %zu: duplicate key '%s'",
					 y->name, k->start_mark.line + 1, k->start_mark.column + 1, key);
				goto fail;
			}
			cJSON_AddItemToObject(out, key, c);
		}
		return out;
	default:
		return cJSON_CreateNull();
	}
fail:
	cJSON_Delete(out);
	return NULL;
}

cJSON *kube_yaml_to_json(const char *text, size_t len, const char *name, struct dlk_err *err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	cJSON *out = NULL;

	if (!yaml_parser_initialize(&parser)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: cannot start the YAML parser", name);
		return NULL;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu, column %zu: %s", name,
			 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			 parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		return NULL;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root) {
		out = cJSON_CreateObject();
	} else {
		struct yj y = { &doc, 0, name, err };
		out = yj_node(&y, root, 0);
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return out;
}
