/* Links between the datasets of a store, read from their manifests and provenance. */
#include "lib/store/graph.h"
#include "lib/store/dataset.h"
#include "lib/store/manifest.h"
#include "lib/store/provenance.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

const char *dlk_provenance_made_by(const cJSON *prov, char *buf, size_t n)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(prov, "kind");
	const char *kind = cJSON_IsString(k) ? k->valuestring : NULL;

	if (!prov)
		snprintf(buf, n, "pushed from files");
	else if (kind && !strncmp(kind, "pipeline-", 9)) {
		const cJSON *pl = cJSON_GetObjectItemCaseSensitive(prov, "pipeline");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(pl, "name"), *stage = cJSON_GetObjectItemCaseSensitive(pl, "stage");
		snprintf(buf, n, "dlk pipeline %s, stage %s", cJSON_IsString(name) ? name->valuestring : "?",
		         cJSON_IsString(stage) ? stage->valuestring : "?");
	} else if (kind && !strcmp(kind, "predictions"))
		snprintf(buf, n, "dlk predict");
	else
		snprintf(buf, n, "%s", kind ? kind : "dlk (no kind recorded)");
	return buf;
}

/* One dataset: its id, its files' digests, the digests its provenance names. */
struct node {
	char id[65];
	char (*files)[65];
	size_t n_files;
	char (*refs)[65];
	size_t n_refs, cap_refs;
	cJSON *prov;
	int depth;    /* 0: not reached; the start is 0 too, marked by start */
	int from;     /* the node of the walk it names */
};

/* every "sha256:<hex>" or bare 64-hex string anywhere in j */
static void collect_refs(const cJSON *j, struct node *nd)
{
	const cJSON *c;

	if (cJSON_IsString(j)) {
		const char *s = j->valuestring;
		if (!strncmp(s, "sha256:", 7))
			s += 7;
		if (is_hex64(s)) {
			if (nd->n_refs == nd->cap_refs) {
				nd->cap_refs = nd->cap_refs ? 2 * nd->cap_refs : 8;
				nd->refs = xrealloc(nd->refs, nd->cap_refs * sizeof(*nd->refs));
			}
			memcpy(nd->refs[nd->n_refs++], s, 65);
		}
		return;
	}
	cJSON_ArrayForEach(c, j)
		collect_refs(c, nd);
}

static void nodes_free(struct node *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].files);
		free(v[i].refs);
		cJSON_Delete(v[i].prov);
	}
	free(v);
}

/* Every dataset of s with its files and, when with_prov, its provenance's references. */
static int load_nodes(struct dlk_store *s, int with_prov, struct node **out, size_t *n_out, struct dlk_err *err)
{
	char **ids = NULL;
	size_t n = 0;
	struct node *v;
	int rc = 0;

	if (dlk_dataset_list(s, &ids, &n, err))
		return -1;
	v = xcalloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		struct dlk_manifest m = DLK_MANIFEST_INIT;
		memcpy(v[i].id, ids[i], 65);
		v[i].from = -1;
		if (!rc && dlk_dataset_manifest(s, ids[i], &m, err))
			rc = -1;
		if (!rc) {
			v[i].files = xcalloc(m.n + 1, sizeof(*v[i].files));
			for (size_t k = 0; k < m.n; k++)
				memcpy(v[i].files[k], m.e[k].sha256, 65);
			v[i].n_files = m.n;
			if (with_prov && dlk_dataset_provenance(s, &m, &v[i].prov, err))
				rc = -1;
			if (v[i].prov)
				collect_refs(v[i].prov, &v[i]);
		}
		dlk_manifest_release(&m);
		free(ids[i]);
	}
	free(ids);
	if (rc) {
		nodes_free(v, n);
		return -1;
	}
	*out = v;
	*n_out = n;
	return 0;
}

int dlk_dataset_holding(struct dlk_store *s, const char *file_sha, char id[65], struct dlk_err *err)
{
	struct node *v;
	size_t n;
	int found = 0;

	if (load_nodes(s, 0, &v, &n, err))
		return -1;
	for (size_t i = 0; i < n && !found; i++)
		for (size_t k = 0; k < v[i].n_files && !found; k++)
			if (!strcmp(v[i].files[k], file_sha)) {
				memcpy(id, v[i].id, 65);
				found = 1;
			}
	nodes_free(v, n);
	return found;
}

/* whether node b's provenance names node a (its id or one of its files) */
static int names(const struct node *b, const struct node *a)
{
	for (size_t r = 0; r < b->n_refs; r++) {
		if (!strcmp(b->refs[r], a->id))
			return 1;
		for (size_t k = 0; k < a->n_files; k++)
			if (!strcmp(b->refs[r], a->files[k]))
				return 1;
	}
	return 0;
}

int dlk_dataset_downstream(struct dlk_store *s, const char *id, cJSON **out, struct dlk_err *err)
{
	struct node *v;
	struct dlk_tag *tags = NULL;
	size_t n, n_tags = 0, *order, n_order = 0;
	char *reached;
	int start = -1;

	if (load_nodes(s, 1, &v, &n, err))
		return -1;
	if (dlk_dataset_tags(s, &tags, &n_tags, err)) {
		nodes_free(v, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			start = (int)i;
	*out = cJSON_CreateArray();
	if (start < 0)
		goto done; /* not in this store: nothing here was made from it */
	reached = xcalloc(n + 1, 1);
	order = xcalloc(n + 1, sizeof(*order));
	reached[start] = 1;
	order[n_order++] = (size_t)start;
	/* breadth first: each round adds the datasets that name one reached in the round before */
	for (size_t head = 0; head < n_order; head++) {
		const struct node *a = &v[order[head]];
		for (size_t i = 0; i < n; i++) {
			if (reached[i] || !names(&v[i], a))
				continue;
			reached[i] = 1;
			v[i].depth = a->depth + 1;
			v[i].from = (int)order[head];
			order[n_order++] = i;
		}
	}
	for (size_t k = 1; k < n_order; k++) {
		const struct node *d = &v[order[k]];
		cJSON *o = cJSON_CreateObject(), *t = cJSON_CreateArray();
		char buf[400];
		snprintf(buf, sizeof(buf), "sha256:%s", d->id);
		cJSON_AddStringToObject(o, "id", buf);
		for (size_t j = 0; j < n_tags; j++)
			if (!strcmp(tags[j].id, d->id) && !strstr(tags[j].name, "@key-"))
				cJSON_AddItemToArray(t, cJSON_CreateString(tags[j].name));
		cJSON_AddItemToObject(o, "tags", t);
		cJSON_AddStringToObject(o, "made_by", dlk_provenance_made_by(d->prov, buf, sizeof(buf)));
		snprintf(buf, sizeof(buf), "sha256:%s", v[d->from].id);
		cJSON_AddStringToObject(o, "from", buf);
		cJSON_AddNumberToObject(o, "depth", d->depth);
		{
			/* a training stage's model: the weights a served model names (lib/pipeline's provenance) */
			const cJSON *w = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d->prov, "model"),
			                                                  "weights_sha256");
			if (cJSON_IsString(w) && is_hex64(!strncmp(w->valuestring, "sha256:", 7) ? w->valuestring + 7 : w->valuestring))
				cJSON_AddStringToObject(o, "weights_sha256", w->valuestring);
		}
		cJSON_AddItemToArray(*out, o);
	}
	free(order);
	free(reached);
done:
	dlk_tags_free(tags, n_tags);
	nodes_free(v, n);
	return 0;
}
