/* run.usage (lib/runs/usage.h): GPU- and CPU-seconds added per session of a run, the prices of
 * the environment and the cost they give, sums over a history, and the check of a record's
 * usage read from outside. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/runs/runs.h"
#include "lib/runs/usage.h"

static double unum(const cJSON *rec, const char *k)
{
	return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "usage"), k));
}

static void test_sessions(void)
{
	cJSON *rec = dlk_run_record_new("p", "00000000-0000-4000-8000-000000000001");
	const double cpu1[2] = { 10, 12 }, cpu2[2] = { 5, 6 };
	const cJSON *per;

	/* 100 s at 2 workers of 1 GPU and 4 reserved CPUs, then a resume: 50 s at 4 workers */
	dlk_run_add_usage(rec, 100, 2, 1, 4, cpu1, 2);
	CHECK_NEAR(unum(rec, "gpu_seconds"), 200, 1e-9);
	CHECK_NEAR(unum(rec, "cpu_reserved_seconds"), 800, 1e-9);
	CHECK_NEAR(unum(rec, "cpu_seconds"), 22, 1e-9);
	dlk_run_add_usage(rec, 50, 4, 1, 4, cpu2, 2);
	CHECK_NEAR(unum(rec, "wall_seconds"), 150, 1e-9);
	CHECK_NEAR(unum(rec, "gpu_seconds"), 200 + 200, 1e-9);
	CHECK_NEAR(unum(rec, "cpu_reserved_seconds"), 800 + 800, 1e-9);
	CHECK_NEAR(unum(rec, "workers"), 4, 0);
	per = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "usage"),
	                                       "cpu_seconds_per_rank");
	CHECK(cJSON_GetArraySize(per) == 2);
	CHECK_NEAR(cJSON_GetArrayItem(per, 0)->valuedouble, 15, 1e-9);
	CHECK_NEAR(cJSON_GetArrayItem(per, 1)->valuedouble, 18, 1e-9);
	CHECK_NEAR(unum(rec, "cpu_seconds"), 33, 1e-9);
	{
		struct dlk_err err = DLK_ERR_INIT;
		CHECK(dlk_run_record_check(rec, "r", &err) == 0);
	}
	cJSON_Delete(rec);

	/* a run here: no CPUs reserved, none recorded as such */
	rec = dlk_run_record_new("p", "00000000-0000-4000-8000-000000000002");
	dlk_run_add_usage(rec, 10, 1, 0, 0, NULL, 0);
	CHECK(!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "usage"),
	                                        "cpu_reserved_seconds"));
	CHECK_NEAR(unum(rec, "gpu_seconds"), 0, 0);
	cJSON_Delete(rec);
}

static void test_quantity(void)
{
	CHECK_NEAR(dlk_cpu_quantity("2"), 2, 0);
	CHECK_NEAR(dlk_cpu_quantity("1.5"), 1.5, 0);
	CHECK_NEAR(dlk_cpu_quantity("500m"), 0.5, 1e-12);
	CHECK(dlk_cpu_quantity("2Gi") < 0);
	CHECK(dlk_cpu_quantity("") < 0);
	CHECK(dlk_cpu_quantity(NULL) < 0);
	CHECK(dlk_cpu_quantity("-1") < 0);
}

static void test_prices(void)
{
	struct dlk_prices p;
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *recs = cJSON_CreateArray(), *a = dlk_run_record_new("p", "00000000-0000-4000-8000-000000000003"),
	      *b = dlk_run_record_new("p", "00000000-0000-4000-8000-000000000004"), *sum;
	const double cpu[1] = { 1800 };

	unsetenv(DLK_ENV_PRICE_GPU_HOUR);
	unsetenv(DLK_ENV_PRICE_CPU_HOUR);
	unsetenv(DLK_ENV_PRICE_CURRENCY);
	CHECK(dlk_prices_from_env(&p, &err) == 0);
	CHECK(!dlk_prices_set(&p));
	/* an hour of 2 GPUs (1 worker) with 4 CPUs reserved; a run here that used half an hour of CPU */
	dlk_run_add_usage(a, 3600, 1, 2, 4, NULL, 0);
	dlk_run_add_usage(b, 7200, 1, 0, 0, cpu, 1);
	CHECK(isnan(dlk_usage_cost(cJSON_GetObjectItemCaseSensitive(dlk_run_info(a), "usage"), &p)));

	setenv(DLK_ENV_PRICE_GPU_HOUR, "2.5", 1);
	setenv(DLK_ENV_PRICE_CPU_HOUR, "0.1", 1);
	setenv(DLK_ENV_PRICE_CURRENCY, "EUR", 1);
	CHECK(dlk_prices_from_env(&p, &err) == 0);
	CHECK_STR(p.currency, "EUR");
	/* a cluster bills what was reserved: 2 GPU-h x 2.5 + 4 CPU-h x 0.1 */
	CHECK_NEAR(dlk_usage_cost(cJSON_GetObjectItemCaseSensitive(dlk_run_info(a), "usage"), &p), 5.4, 1e-9);
	/* a run here, the CPU time it used: 0.5 h x 0.1 */
	CHECK_NEAR(dlk_usage_cost(cJSON_GetObjectItemCaseSensitive(dlk_run_info(b), "usage"), &p), 0.05, 1e-9);
	cJSON_AddItemToArray(recs, a);
	cJSON_AddItemToArray(recs, b);
	cJSON_AddItemToArray(recs, dlk_run_record_new("p", "00000000-0000-4000-8000-000000000005")); /* no usage */
	sum = dlk_usage_sum(recs, &p);
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(sum, "runs")), 2, 0);
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(sum, "gpu_seconds")), 7200, 1e-9);
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(sum, "cost")), 5.45, 1e-9);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sum, "currency")), "EUR");
	cJSON_Delete(sum);

	/* only a GPU price: the CPU part counts nothing */
	unsetenv(DLK_ENV_PRICE_CPU_HOUR);
	CHECK(dlk_prices_from_env(&p, &err) == 0);
	CHECK_NEAR(dlk_usage_cost(cJSON_GetObjectItemCaseSensitive(dlk_run_info(a), "usage"), &p), 5, 1e-9);

	setenv(DLK_ENV_PRICE_CPU_HOUR, "cheap", 1);
	CHECK(dlk_prices_from_env(&p, &err) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "DLK_PRICE_CPU_HOUR: 'cheap' is not a price");
	dlk_err_clear(&err);
	setenv(DLK_ENV_PRICE_CPU_HOUR, "-1", 1);
	CHECK(dlk_prices_from_env(&p, &err) == -1);
	unsetenv(DLK_ENV_PRICE_CPU_HOUR);
	unsetenv(DLK_ENV_PRICE_GPU_HOUR);
	cJSON_Delete(recs);
}

static void test_check(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *bad[] = {
		"{\"gpu_seconds\": -1}",
		"{\"cpu_seconds\": \"1\"}",
		"{\"cpu_seconds_per_rank\": [1, -2]}",
		"{\"cpu_seconds_per_rank\": {}}",
		"[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *u = cJSON_Parse(bad[i]);
		dlk_err_clear(&err);
		CHECK_MSG(dlk_usage_check(u, "rec", &err) == -1, "%s is refused", bad[i]);
		CHECK_CONTAINS(err.msg, "rec: run.usage");
		cJSON_Delete(u);
	}
	{
		cJSON *u = cJSON_Parse("{\"wall_seconds\": 3, \"workers\": 2, \"gpu_seconds\": 0, "
		                       "\"cpu_seconds\": 1.5, \"cpu_seconds_per_rank\": [1, 0.5]}");
		CHECK(dlk_usage_check(u, "rec", &err) == 0);
		cJSON_Delete(u);
	}
}

/* usage per dataset: a versioned dataset by its id (its tag, control characters escaped, as
 * the name), plain files by their fingerprint, none as "", the largest GPU time first */
static void test_by_dataset(void)
{
	struct dlk_prices p = { .gpu_hour = 2, .cpu_hour = -1, .currency = "" };
	cJSON *recs = cJSON_CreateArray(), *g;
	const char *ids[] = { "00000000-0000-4000-8000-000000000011", "00000000-0000-4000-8000-000000000012",
		              "00000000-0000-4000-8000-000000000013", "00000000-0000-4000-8000-000000000014" };
	char key[80], label[160];
	double cpu[1] = { 1 };

	for (int i = 0; i < 4; i++) {
		cJSON *r = dlk_run_record_new("p", ids[i]), *prov = cJSON_AddObjectToObject(r, "provenance");
		if (i < 2) {
			cJSON *ds = cJSON_AddObjectToObject(prov, "dataset");
			cJSON_AddStringToObject(ds, "id", "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
			cJSON_AddStringToObject(ds, "tag", "set@v1\x1b[2J");
		} else if (i == 2) {
			cJSON *d = cJSON_AddArrayToObject(prov, "data"), *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "split", "train");
			cJSON_AddStringToObject(o, "url", "file:///x");
			cJSON_AddStringToObject(o, "sha256", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
			cJSON_AddItemToArray(d, o);
		}
		/* 1, 1, 3 and 0 hours of one GPU */
		dlk_run_add_usage(r, i == 2 ? 3 * 3600 : i == 3 ? 0 : 3600, 1, 1, -1, cpu, 1);
		cJSON_AddItemToArray(recs, r);
	}
	dlk_run_dataset_key(cJSON_GetArrayItem(recs, 0), key, label);
	CHECK_STR(key, "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	CHECK_STR(label, "set@v1\\e[2J");
	dlk_run_dataset_key(cJSON_GetArrayItem(recs, 3), key, label);
	CHECK_STR(key, "");
	CHECK_STR(label, "not recorded");
	g = dlk_usage_by_dataset(recs, &p);
	CHECK(cJSON_GetArraySize(g) == 3);
	/* files (3 h), the dataset (2 runs, 2 h), then none (0 h) */
	CHECK(!strncmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(g, 0), "dataset")), "files:", 6));
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(g, 1), "name")), "set@v1\\e[2J");
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
	                   cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(g, 1), "usage"), "runs")), 2, 0);
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
	                   cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(g, 1), "usage"), "cost")), 4, 1e-9);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(g, 2), "dataset")), "");
	cJSON_Delete(g);
	/* the records are still whole (the groups held references) */
	CHECK(cJSON_GetArraySize(recs) == 4);
	cJSON_Delete(recs);
	{
		cJSON *sum = cJSON_Parse("{\"runs\": 2, \"gpu_seconds\": 7200, \"cpu_seconds\": 30, "
		                         "\"cpu_reserved_seconds\": 90, \"cost\": 4}");
		char t[256];
		dlk_usage_total_text(sum, &p, t, sizeof(t));
		CHECK_STR(t, "total of 2 runs: GPU time 2.00 h; CPU time 30.0 s used, 1.5 min reserved; cost 4.00");
		cJSON_Delete(sum);
		sum = cJSON_Parse("{\"runs\": 0}");
		dlk_usage_total_text(sum, &p, t, sizeof(t));
		CHECK_STR(t, "");
		cJSON_Delete(sum);
	}
}

int main(void)
{
	test_by_dataset();
	test_sessions();
	test_quantity();
	test_prices();
	test_check();
	return CHECK_DONE();
}
