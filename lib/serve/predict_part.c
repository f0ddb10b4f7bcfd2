/* The parts of N workers' predictions (see predict.h): their key, tag and part.json. */
#include "lib/serve/predict.h"
#include "lib/util/hash.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dlk_predict_part_key(const char *input_id, const char *bundle_sha, const char *images, const char *labels, int batch,
                          int threads, int workers, char key[17])
{
	struct dlk_sha256 h;
	char hex[DLK_SHA256_HEX_LEN + 1], nums[96];
	const char *fields[] = { "dlk predict part 1", input_id, bundle_sha, images ? images : "", labels ? labels : "" };

	dlk_sha256_begin(&h);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		dlk_sha256_update(&h, fields[i], strlen(fields[i]) + 1); /* with its NUL: no two lists join the same */
	snprintf(nums, sizeof(nums), "%d %d %d", batch, threads, workers);
	dlk_sha256_update(&h, nums, strlen(nums) + 1);
	dlk_sha256_end(&h, hex);
	memcpy(key, hex, 16);
	key[16] = '\0';
}

char *dlk_predict_part_tag(const char *name, int rank, int workers, const char *key)
{
	const char *at = strchr(name, '@');
	int len = at ? (int)(at - name) : (int)strlen(name);

	return xasprintf("%.*s-part-%d-of-%d@%s", len, name, rank, workers, key);
}

char *dlk_predict_part_json(const struct dlk_predict_part *p)
{
	cJSON *o = cJSON_CreateObject();
	char *s;

	cJSON_AddStringToObject(o, "kind", "predictions-part");
	cJSON_AddStringToObject(o, "key", p->key);
	cJSON_AddNumberToObject(o, "rank", p->rank);
	cJSON_AddNumberToObject(o, "workers", p->workers);
	cJSON_AddNumberToObject(o, "first", (double)p->first);
	cJSON_AddNumberToObject(o, "count", (double)p->count);
	cJSON_AddNumberToObject(o, "samples", (double)p->samples);
	cJSON_AddNumberToObject(o, "correct", (double)p->correct);
	s = dlk_json_print(o);
	cJSON_Delete(o);
	return s;
}

/* a whole number in [0, max] */
static int get_count(const cJSON *o, const char *name, double max, size_t *out, struct dlk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > max || v->valuedouble != (double)(size_t)v->valuedouble)
		return dlk_errf(err, DLK_EXIT_CONFIG, "part.json: '%s' is not a whole number from 0 to %.0f", name, max);
	*out = (size_t)v->valuedouble;
	return 0;
}

int dlk_predict_part_parse(const char *text, size_t len, struct dlk_predict_part *p, struct dlk_err *err)
{
	cJSON *o = cJSON_ParseWithLength(text, len);
	const cJSON *kind, *key;
	size_t rank, workers;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (!cJSON_IsObject(o)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "part.json is not a JSON object");
		goto out;
	}
	kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
	key = cJSON_GetObjectItemCaseSensitive(o, "key");
	if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "predictions-part")) {
		dlk_errf(err, DLK_EXIT_CONFIG, "part.json: 'kind' is not \"predictions-part\"");
		goto out;
	}
	if (!cJSON_IsString(key) || strlen(key->valuestring) != 16 || strspn(key->valuestring, "0123456789abcdef") != 16) {
		dlk_errf(err, DLK_EXIT_CONFIG, "part.json: 'key' is not 16 hex digits");
		goto out;
	}
	memcpy(p->key, key->valuestring, 17);
	if (get_count(o, "workers", 100000, &workers, err) || get_count(o, "rank", 100000, &rank, err) ||
	    get_count(o, "first", 1e15, &p->first, err) || get_count(o, "count", 1e15, &p->count, err) ||
	    get_count(o, "samples", 1e15, &p->samples, err) || get_count(o, "correct", 1e15, &p->correct, err))
		goto out;
	p->rank = (int)rank;
	p->workers = (int)workers;
	if (p->workers < 1 || p->rank >= p->workers) {
		dlk_errf(err, DLK_EXIT_CONFIG, "part.json: rank %d of %d workers", p->rank, p->workers);
		goto out;
	}
	if (p->first > p->samples || p->count > p->samples - p->first || p->correct > p->count) {
		dlk_errf(err, DLK_EXIT_CONFIG, "part.json: samples [%zu, %zu) with %zu correct do not fit %zu samples", p->first,
		         p->first + p->count, p->correct, p->samples);
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(o);
	return rc;
}

int dlk_predict_parts_check(const struct dlk_predict_part *parts, int workers, const char *key, struct dlk_err *err)
{
	size_t next = 0;

	for (int i = 0; i < workers; i++) {
		const struct dlk_predict_part *p = &parts[i];
		if (strcmp(p->key, key))
			return dlk_errf(err, DLK_EXIT_CONFIG, "part %d of %d is of run %s, not of this run (%s)", i, workers, p->key,
			                key);
		if (p->rank != i || p->workers != workers)
			return dlk_errf(err, DLK_EXIT_CONFIG, "part %d of %d is rank %d of %d: the parts are out of order", i, workers,
			                p->rank, p->workers);
		if (p->samples != parts[0].samples || p->first != next)
			return dlk_errf(err, DLK_EXIT_CONFIG, "part %d holds samples [%zu, %zu) of %zu, where [%zu, ...) of %zu was due", i,
			                p->first, p->first + p->count, p->samples, next, parts[0].samples);
		next += p->count;
	}
	if (workers > 0 && next != parts[0].samples)
		return dlk_errf(err, DLK_EXIT_CONFIG, "the %d parts hold %zu of the %zu samples", workers, next, parts[0].samples);
	return 0;
}
