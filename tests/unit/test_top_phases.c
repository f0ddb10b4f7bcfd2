/* dlk top's judgement of the step time split (lib/top/phases.c): a rank starved by input among
 * ranks that are not, a lone rank that is input-bound, and what is not such a rank. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#include "lib/top/top.h"

/* the warnings for phases written as JSON */
static cJSON *warn(const char *json)
{
	cJSON *p = cJSON_Parse(json);
	cJSON *w = dlk_top_phase_warnings(p);
	cJSON_Delete(p);
	return w;
}

static const char *nth(const cJSON *w, int i)
{
	return cJSON_GetStringValue(cJSON_GetArrayItem(w, i));
}

/* --sort: the runs by a run key, the ranks of each run by a rank key, the pods of a cluster job */
static void test_sort(void)
{
	cJSON *rows = cJSON_Parse("[{\"project\":\"b\",\"cpu_percent\":50,\"rss_bytes\":9,\"since\":\"2026-11-28T07:00:00Z\","
	                          "\"progress\":{\"phases\":[{\"rank\":0,\"data\":0.1,\"compute\":0.5},{\"rank\":1,\"data\":0.6,\"compute\":0.3},"
	                          "{\"rank\":2,\"data\":0.2,\"compute\":0.7}]}},"
	                          "{\"project\":\"a\",\"cpu_percent\":150,\"rss_bytes\":3,\"since\":\"2026-11-28T06:00:00Z\"}]");
	cJSON *ph, *doc;
	char *s;

	CHECK(dlk_top_sort_key_ok("rss") && dlk_top_sort_key_ok("allreduce") && !dlk_top_sort_key_ok("RSS") &&
	      !dlk_top_sort_key_ok("") && !dlk_top_sort_key_ok(NULL));
	dlk_top_sort(rows, "rss");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "project")), "b");
	dlk_top_sort(rows, "cpu");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "project")), "a");
	dlk_top_sort(rows, "project");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "project")), "a");
	dlk_top_sort(rows, "since");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "project")), "a");
	dlk_top_sort(rows, "data");
	ph = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 1), "progress"), "phases");
	s = cJSON_PrintUnformatted(ph);
	CHECK_STR(s, "[{\"rank\":1,\"data\":0.6,\"compute\":0.3},{\"rank\":2,\"data\":0.2,\"compute\":0.7},"
	             "{\"rank\":0,\"data\":0.1,\"compute\":0.5}]");
	free(s);
	dlk_top_sort(rows, "rank");
	CHECK(cJSON_GetArrayItem(ph, 0)->child->valuedouble == 0 && cJSON_GetArrayItem(ph, 2)->child->valuedouble == 2);
	dlk_top_sort(rows, "compute");
	CHECK(cJSON_GetArrayItem(ph, 0)->child->valuedouble == 2);
	cJSON_Delete(rows);

	doc = cJSON_Parse("{\"jobs\":[{\"job\":\"j\",\"pods\":[{\"rank\":0,\"step_time\":{\"allreduce\":0.1}},"
	                  "{\"rank\":1,\"step_time\":{\"allreduce\":0.5}},{\"rank\":2}]}]}");
	CHECK(dlk_top_sort_cluster(doc, "allreduce") == 0);
	s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "jobs"), 0), "pods"));
	CHECK_STR(s, "[{\"rank\":1,\"step_time\":{\"allreduce\":0.5}},{\"rank\":0,\"step_time\":{\"allreduce\":0.1}},{\"rank\":2}]");
	free(s);
	CHECK(dlk_top_sort_cluster(doc, "cpu") == -1);
	cJSON_Delete(doc);
}

int main(void)
{
	cJSON *w;

	test_sort();

	/* two ranks: rank 1 waits half its step for data while rank 0 waits 5% (and for rank 1 in
	 * the all-reduce) */
	w = warn("[{\"rank\":0,\"data\":0.05,\"compute\":0.45,\"allreduce\":0.5},"
	         "{\"rank\":1,\"data\":0.52,\"compute\":0.45,\"allreduce\":0.03}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK_STR(nth(w, 0), "rank 1 waits for its input 52% of its step time, the other ranks 5%: it is starved by input");
	cJSON_Delete(w);

	/* every rank waits about as much: none singled out (30% and 35% are within 2x of each other) */
	w = warn("[{\"rank\":0,\"data\":0.35,\"compute\":0.6,\"allreduce\":0.05},{\"rank\":1,\"data\":0.3,\"compute\":0.6,\"allreduce\":0.1}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);

	/* four ranks, two of them starved: the others' median is what each is compared with */
	w = warn("[{\"rank\":0,\"data\":0.5},{\"rank\":1,\"data\":0.02},{\"rank\":2,\"data\":0.6},{\"rank\":3,\"data\":0.04}]");
	CHECK(cJSON_GetArraySize(w) == 2);
	CHECK(!strncmp(nth(w, 0), "rank 0 waits for its input 50% of its step time, the other ranks 4%", 67));
	CHECK(!strncmp(nth(w, 1), "rank 2 waits for its input 60% of its step time, the other ranks 4%", 67));
	cJSON_Delete(w);

	/* a share below DLK_TOP_STARVED_SHARE is not starvation, however it compares */
	w = warn("[{\"rank\":0,\"data\":0.25},{\"rank\":1,\"data\":0.01}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);

	/* one rank: input-bound from half its step time */
	w = warn("[{\"rank\":0,\"data\":0.6,\"compute\":0.4,\"allreduce\":0}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK_STR(nth(w, 0), "rank 0 waits for its input 60% of its step time: the run is input-bound");
	cJSON_Delete(w);
	w = warn("[{\"rank\":0,\"data\":0.45,\"compute\":0.55,\"allreduce\":0}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);

	/* idle ranks: rank 0 waits in the all-reduce for rank 1, which computes (and is not starved) */
	w = warn("[{\"rank\":0,\"data\":0.02,\"compute\":0.40,\"allreduce\":0.58},"
	         "{\"rank\":1,\"data\":0.03,\"compute\":0.92,\"allreduce\":0.05}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK_STR(nth(w, 0), "the other rank idles 58% of its step time in the all-reduce, waiting for rank 1, which "
	                     "computes 92% of its own: it is the slowest rank (a slower device or node, or one shared "
	                     "with other work)");
	cJSON_Delete(w);
	/* four ranks, the others' median (55%) against rank 2's 2% */
	w = warn("[{\"rank\":0,\"data\":0.05,\"compute\":0.45,\"allreduce\":0.5},"
	         "{\"rank\":1,\"data\":0.05,\"compute\":0.35,\"allreduce\":0.6},"
	         "{\"rank\":2,\"data\":0.05,\"compute\":0.93,\"allreduce\":0.02},"
	         "{\"rank\":3,\"data\":0.05,\"compute\":0.4,\"allreduce\":0.55}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK(!strncmp(nth(w, 0), "the other ranks idle 55% of their step time in the all-reduce, waiting for rank 2, "
	                          "which computes 93% of its own", 108));
	cJSON_Delete(w);
	/* not when the others idle little, nor when the rank waits more than a quarter of what they do */
	w = warn("[{\"rank\":0,\"data\":0,\"compute\":0.75,\"allreduce\":0.25},{\"rank\":1,\"data\":0,\"compute\":0.99,\"allreduce\":0.01}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	w = warn("[{\"rank\":0,\"data\":0,\"compute\":0.4,\"allreduce\":0.6},{\"rank\":1,\"data\":0,\"compute\":0.8,\"allreduce\":0.2}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);

	/* what is not a rank's shares is skipped: no rank, a share out of [0, 1], not an object */
	w = warn("[{\"data\":0.9},{\"rank\":1,\"data\":7},{\"rank\":-1,\"data\":0.9},3,\"x\",{\"rank\":2,\"data\":\"0.9\"},"
	         "{\"rank\":4,\"data\":0.9}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK_STR(nth(w, 0), "rank 4 waits for its input 90% of its step time: the run is input-bound");
	cJSON_Delete(w);
	w = dlk_top_phase_warnings(NULL);
	CHECK(cJSON_IsArray(w) && cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	w = warn("{\"rank\":0,\"data\":0.9}");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	return CHECK_DONE();
}
