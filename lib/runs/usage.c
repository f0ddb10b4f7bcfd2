/* run.usage: what a run held and used; prices applied when it is shown (see usage.h). */
#include "lib/runs/usage.h"
#include "lib/runs/runs.h"
#include "lib/util/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 4096

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void set_num(cJSON *o, const char *k, double v)
{
	cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	if (it && cJSON_IsNumber(it))
		cJSON_SetNumberValue(it, v);
	else {
		cJSON_DeleteItemFromObjectCaseSensitive(o, k);
		cJSON_AddNumberToObject(o, k, v);
	}
}

void dlk_run_add_usage(cJSON *rec, double wall_s, int workers, double gpus, double cpus, const double *cpu_s, int n)
{
	cJSON *info = dlk_run_info(rec), *u, *per;
	double wall, total = 0;

	if (!info)
		return;
	u = cJSON_GetObjectItemCaseSensitive(info, "usage");
	if (!cJSON_IsObject(u)) {
		cJSON_DeleteItemFromObjectCaseSensitive(info, "usage");
		u = cJSON_AddObjectToObject(info, "usage");
	}
	if (!(wall_s >= 0))
		wall_s = 0;
	if (workers < 1)
		workers = 1;
	if (!(gpus >= 0))
		gpus = 0;
	wall = num(u, "wall_seconds") + wall_s;
	/* GPU- and reserved CPU-seconds accumulate per session: a resized run held other counts */
	set_num(u, "gpu_seconds", num(u, "gpu_seconds") + wall_s * workers * gpus);
	if (cpus > 0)
		set_num(u, "cpu_reserved_seconds", num(u, "cpu_reserved_seconds") + wall_s * workers * cpus);
	set_num(u, "wall_seconds", wall);
	set_num(u, "workers", workers);
	set_num(u, "gpus_per_worker", gpus);
	if (cpus > 0)
		set_num(u, "cpus_per_worker", cpus);
	per = cJSON_GetObjectItemCaseSensitive(u, "cpu_seconds_per_rank");
	if (!cJSON_IsArray(per)) {
		cJSON_DeleteItemFromObjectCaseSensitive(u, "cpu_seconds_per_rank");
		per = cJSON_AddArrayToObject(u, "cpu_seconds_per_rank");
	}
	for (int r = 0; cpu_s && r < n && r < MAX_RANKS; r++) {
		cJSON *it = cJSON_GetArrayItem(per, r);
		double v = cpu_s[r] >= 0 ? cpu_s[r] : 0;
		if (it && cJSON_IsNumber(it))
			cJSON_SetNumberValue(it, it->valuedouble + v);
		else
			cJSON_AddItemToArray(per, cJSON_CreateNumber(v));
	}
	{
		const cJSON *it;
		cJSON_ArrayForEach(it, per)
			if (cJSON_IsNumber(it))
				total += it->valuedouble;
	}
	set_num(u, "cpu_seconds", total);
}

double dlk_cpu_quantity(const char *q)
{
	char *end;
	double v;

	if (!q || !*q)
		return -1;
	errno = 0;
	v = strtod(q, &end);
	if (errno || end == q || !(v >= 0))
		return -1;
	if (!strcmp(end, "m"))
		return v / 1000;
	return *end ? -1 : v;
}

static int price(const char *name, double *out, struct dlk_err *err)
{
	const char *s = getenv(name);
	char *end;

	*out = -1;
	if (!s || !*s)
		return 0;
	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !(*out >= 0) || !isfinite(*out)) {
		*out = -1;
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: '%.40s' is not a price (a number >= 0, per hour)", name, s);
		return dlk_err_hint(err, "e.g. %s=2.5; unset it for no cost", name);
	}
	return 0;
}

int dlk_prices_from_env(struct dlk_prices *p, struct dlk_err *err)
{
	const char *c = getenv(DLK_ENV_PRICE_CURRENCY);

	snprintf(p->currency, sizeof(p->currency), "%s", c ? c : "");
	if (price(DLK_ENV_PRICE_GPU_HOUR, &p->gpu_hour, err) || price(DLK_ENV_PRICE_CPU_HOUR, &p->cpu_hour, err))
		return -1;
	return 0;
}

int dlk_prices_set(const struct dlk_prices *p) { return p && (p->gpu_hour >= 0 || p->cpu_hour >= 0); }

double dlk_usage_cost(const cJSON *usage, const struct dlk_prices *p)
{
	double c = 0, cpu;

	if (!cJSON_IsObject(usage) || !dlk_prices_set(p))
		return NAN;
	if (p->gpu_hour >= 0)
		c += num(usage, "gpu_seconds") / 3600 * p->gpu_hour;
	cpu = get(usage, "cpu_reserved_seconds") ? num(usage, "cpu_reserved_seconds") : num(usage, "cpu_seconds");
	if (p->cpu_hour >= 0)
		c += cpu / 3600 * p->cpu_hour;
	return c;
}

cJSON *dlk_usage_sum(const cJSON *records, const struct dlk_prices *p)
{
	static const char *const keys[] = { "wall_seconds", "gpu_seconds", "cpu_seconds", "cpu_reserved_seconds" };
	double sums[4] = { 0 }, cost = 0;
	const cJSON *rec;
	cJSON *o = cJSON_CreateObject();
	int n = 0;

	cJSON_ArrayForEach(rec, records) {
		const cJSON *u = get(dlk_run_info(rec), "usage");
		double c;
		if (!cJSON_IsObject(u))
			continue;
		n++;
		for (int i = 0; i < 4; i++)
			sums[i] += num(u, keys[i]);
		c = dlk_usage_cost(u, p);
		if (isfinite(c))
			cost += c;
	}
	cJSON_AddNumberToObject(o, "runs", n);
	for (int i = 0; i < 4; i++)
		cJSON_AddNumberToObject(o, keys[i], sums[i]);
	if (dlk_prices_set(p)) {
		cJSON_AddNumberToObject(o, "cost", cost);
		cJSON_AddStringToObject(o, "currency", p->currency);
	}
	return o;
}

void dlk_usage_seconds_text(double s, char *out, size_t n)
{
	if (s < 60)
		snprintf(out, n, "%.1f s", s);
	else if (s < 3600)
		snprintf(out, n, "%.1f min", s / 60);
	else
		snprintf(out, n, "%.2f h", s / 3600);
}

void dlk_usage_cost_text(double c, const struct dlk_prices *p, char *out, size_t n)
{
	snprintf(out, n, "%.*f%s%s", c < 1 ? 4 : 2, c, p->currency[0] ? " " : "", p->currency);
}

void dlk_usage_total_text(const cJSON *sum, const struct dlk_prices *p, char *out, size_t n)
{
	char g[32], c[32], r[48] = "", cost[64] = "";
	int runs = (int)num(sum, "runs");

	out[0] = 0;
	if (runs <= 0)
		return;
	dlk_usage_seconds_text(num(sum, "gpu_seconds"), g, sizeof(g));
	dlk_usage_seconds_text(num(sum, "cpu_seconds"), c, sizeof(c));
	if (num(sum, "cpu_reserved_seconds") > 0) {
		char t[32];
		dlk_usage_seconds_text(num(sum, "cpu_reserved_seconds"), t, sizeof(t));
		snprintf(r, sizeof(r), ", %s reserved", t);
	}
	if (cJSON_IsNumber(get(sum, "cost"))) {
		char t[40];
		dlk_usage_cost_text(num(sum, "cost"), p, t, sizeof(t));
		snprintf(cost, sizeof(cost), "; cost %s", t);
	}
	snprintf(out, n, "total of %d run%s: GPU time %s; CPU time %s used%s%s", runs, runs == 1 ? "" : "s", g, c, r, cost);
}

void dlk_run_dataset_key(const cJSON *rec, char key[80], char label[160])
{
	const cJSON *ds = get(get(rec, "provenance"), "dataset"), *id, *tag;
	char fp[65];

	id = cJSON_IsObject(ds) ? get(ds, "id") : ds;
	tag = cJSON_IsObject(ds) ? get(ds, "tag") : NULL;
	if (cJSON_IsString(id) && id->valuestring[0]) {
		const char *h = id->valuestring, *vis;
		if (!strncmp(h, "sha256:", 7))
			h += 7;
		vis = dlk_visible(h);
		snprintf(key, 80, "sha256:%.64s", vis);
		if (cJSON_IsString(tag) && tag->valuestring[0])
			snprintf(label, 160, "%s", dlk_visible(tag->valuestring));
		else
			snprintf(label, 160, "sha256:%.12s", vis);
		return;
	}
	dlk_run_data_fingerprint(rec, fp);
	if (fp[0]) {
		snprintf(key, 80, "files:%s", fp);
		snprintf(label, 160, "files %.12s", fp);
		return;
	}
	key[0] = 0;
	snprintf(label, 160, "not recorded");
}

static int by_usage(const void *pa, const void *pb)
{
	const cJSON *a = get(*(cJSON *const *)pa, "usage"), *b = get(*(cJSON *const *)pb, "usage");
	static const char *const keys[] = { "gpu_seconds", "cpu_seconds", "runs" };
	for (int i = 0; i < 3; i++) {
		double x = num(a, keys[i]), y = num(b, keys[i]);
		if (x != y)
			return x > y ? -1 : 1;
	}
	return strcmp(get(*(cJSON *const *)pa, "dataset")->valuestring, get(*(cJSON *const *)pb, "dataset")->valuestring);
}

cJSON *dlk_usage_by_dataset(const cJSON *records, const struct dlk_prices *p)
{
	cJSON *groups = cJSON_CreateObject(), *out = cJSON_CreateArray(), *g, **v;
	const cJSON *rec;
	int n = 0, i = 0;

	/* records of each key, by reference (the records stay the caller's) */
	cJSON_ArrayForEach(rec, records) {
		char key[80], label[160];
		cJSON *arr;
		dlk_run_dataset_key(rec, key, label);
		g = cJSON_GetObjectItemCaseSensitive(groups, key);
		if (!g) {
			g = cJSON_AddObjectToObject(groups, key);
			cJSON_AddStringToObject(g, "name", label);
			cJSON_AddArrayToObject(g, "records");
			n++;
		}
		arr = cJSON_GetObjectItemCaseSensitive(g, "records");
		cJSON_AddItemReferenceToArray(arr, (cJSON *)rec);
	}
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		abort();
	cJSON_ArrayForEach(g, groups) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "dataset", g->string);
		cJSON_AddStringToObject(o, "name", get(g, "name")->valuestring);
		cJSON_AddItemToObject(o, "usage", dlk_usage_sum(get(g, "records"), p));
		v[i++] = o;
	}
	qsort(v, (size_t)n, sizeof(*v), by_usage);
	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(out, v[i]);
	free(v);
	cJSON_Delete(groups);
	return out;
}

static int bad(struct dlk_err *err, const char *who, const char *field, const char *what)
{
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s: run.usage.%s %s", who, field, what);
}

int dlk_usage_check(const cJSON *u, const char *who, struct dlk_err *err)
{
	static const char *const keys[] = { "wall_seconds", "workers", "gpus_per_worker", "cpus_per_worker",
		                            "gpu_seconds", "cpu_reserved_seconds", "cpu_seconds" };
	const cJSON *v, *it;
	int n = 0;

	if (!cJSON_IsObject(u))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: run.usage is not an object", who);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((v = get(u, keys[i])) && (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 1e15))
			return bad(err, who, keys[i], "is not a number of 0 or more");
	if ((v = get(u, "cpu_seconds_per_rank"))) {
		if (!cJSON_IsArray(v))
			return bad(err, who, "cpu_seconds_per_rank", "is not an array");
		cJSON_ArrayForEach(it, v)
			if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0) || ++n > MAX_RANKS)
				return bad(err, who, "cpu_seconds_per_rank", "is not a list of at most 4096 numbers of 0 or more");
	}
	return 0;
}
