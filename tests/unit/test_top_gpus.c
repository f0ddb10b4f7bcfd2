/* The ranks' GPU samples in the progress: what rank 0 writes of them (lib/train/progress.c,
 * bounded at DLK_PROGRESS_MAX_RANKS ranks) and how dlk top judges them (lib/top/phases.c): a
 * rank's GPU idle while the others' compute, in place of the step split's idle-rank judgement. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#include "lib/top/top.h"
#include "lib/train/progress.h"

static cJSON *warn(const char *phases, const char *gpus)
{
	cJSON *p = phases ? cJSON_Parse(phases) : NULL, *g = gpus ? cJSON_Parse(gpus) : NULL;
	cJSON *w = dlk_top_warnings(p, g);
	cJSON_Delete(p);
	cJSON_Delete(g);
	return w;
}

static const char *nth(const cJSON *w, int i)
{
	return cJSON_GetStringValue(cJSON_GetArrayItem(w, i));
}

static void test_progress(void)
{
	struct dlk_train_event ev;
	struct dlk_rank_gpu g[100];
	cJSON *p, *gpus;
	char *s;

	memset(&ev, 0, sizeof(ev));
	ev.kind = DLK_TRAIN_STEP;
	ev.epoch = 1;
	ev.epochs = 2;
	g[0] = (struct dlk_rank_gpu){ 0, 3, 87, 1048576.0 * 61000, 1048576.0 * 81920, 412.345, 1755 };
	g[1] = (struct dlk_rank_gpu){ 2, 0, 4, 1048576.0, 1048576.0 * 81920, -1, 0 };
	ev.rank_gpu = g;
	ev.n_rank_gpu = 2;
	s = dlk_progress_json(&ev, 0, 0, "2026-01-01T00:00:00Z");
	p = cJSON_Parse(s);
	free(s);
	s = cJSON_PrintUnformatted(cJSON_GetObjectItem(p, DLK_PROGRESS_GPUS));
	/* power to a tenth of a watt; what a GPU does not report is left out; the ranks without a
	 * GPU (rank 1) are not listed */
	CHECK_STR(s, "[{\"rank\":0,\"gpu\":3,\"utilization\":87,\"memoryUsed\":63963136000,\"memoryTotal\":85899345920,"
	             "\"powerWatts\":412.3,\"smClockMhz\":1755},"
	             "{\"rank\":2,\"gpu\":0,\"utilization\":4,\"memoryUsed\":1048576,\"memoryTotal\":85899345920}]");
	free(s);
	cJSON_Delete(p);

	/* none sampled: no "gpus" */
	ev.n_rank_gpu = 0;
	s = dlk_progress_json(&ev, 0, 0, "2026-01-01T00:00:00Z");
	CHECK(!strstr(s, "gpus"));
	free(s);

	/* bounded: at most DLK_PROGRESS_MAX_RANKS entries however many ranks */
	for (int i = 0; i < 100; i++)
		g[i] = (struct dlk_rank_gpu){ i, i % 8, 50, 1e9, 8e10, 300, 1500 };
	ev.n_rank_gpu = 100;
	s = dlk_progress_json(&ev, 0, 0, "2026-01-01T00:00:00Z");
	p = cJSON_Parse(s);
	gpus = cJSON_GetObjectItem(p, DLK_PROGRESS_GPUS);
	CHECK(cJSON_GetArraySize(gpus) == DLK_PROGRESS_MAX_RANKS);
	CHECK(strlen(s) < 10000);
	free(s);
	cJSON_Delete(p);
}

int main(void)
{
	cJSON *w;

	test_progress();

	/* two ranks: rank 1's GPU near 0 while rank 0's computes */
	w = warn(NULL, "[{\"rank\":0,\"gpu\":1,\"utilization\":91},{\"rank\":1,\"gpu\":0,\"utilization\":2}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK_STR(nth(w, 0), "rank 1's GPU 0 is idle (2% used) while the other rank's is 91% used: the rank does not "
	                     "compute on it, or waits for the others");
	cJSON_Delete(w);

	/* four ranks: the others' median (80%) against rank 3's 0%; rank 2 at 40% is not idle */
	w = warn(NULL, "[{\"rank\":0,\"gpu\":0,\"utilization\":90},{\"rank\":1,\"gpu\":1,\"utilization\":80},"
	               "{\"rank\":2,\"gpu\":2,\"utilization\":40},{\"rank\":3,\"gpu\":3,\"utilization\":0}]");
	CHECK(cJSON_GetArraySize(w) == 1);
	CHECK_STR(nth(w, 0), "rank 3's GPU 3 is idle (0% used) while the other ranks' GPUs are (their median) 80% used: "
	                     "the rank does not compute on it, or waits for the others");
	cJSON_Delete(w);

	/* every GPU idle, or the others busy below DLK_TOP_GPU_BUSY_PERCENT: no rank singled out;
	 * a rank alone is never idle for the others */
	w = warn(NULL, "[{\"rank\":0,\"gpu\":0,\"utilization\":1},{\"rank\":1,\"gpu\":1,\"utilization\":3}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	w = warn(NULL, "[{\"rank\":0,\"gpu\":0,\"utilization\":25},{\"rank\":1,\"gpu\":1,\"utilization\":0}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	w = warn(NULL, "[{\"rank\":0,\"gpu\":0,\"utilization\":0}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	/* 6% is not idle */
	w = warn(NULL, "[{\"rank\":0,\"gpu\":0,\"utilization\":90},{\"rank\":1,\"gpu\":1,\"utilization\":6}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);

	/* with GPU samples the idle rank comes from them, not from the step split (which would name
	 * rank 1 the slowest); starvation by input is still judged from the split */
	w = warn("[{\"rank\":0,\"data\":0.02,\"compute\":0.40,\"allreduce\":0.58},"
	         "{\"rank\":1,\"data\":0.03,\"compute\":0.92,\"allreduce\":0.05}]",
	         "[{\"rank\":0,\"gpu\":0,\"utilization\":60},{\"rank\":1,\"gpu\":1,\"utilization\":95}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	w = warn("[{\"rank\":0,\"data\":0.02,\"compute\":0.40,\"allreduce\":0.58},"
	         "{\"rank\":1,\"data\":0.03,\"compute\":0.92,\"allreduce\":0.05}]", NULL);
	CHECK(cJSON_GetArraySize(w) == 1 && !strncmp(nth(w, 0), "the other rank idles 58%", 24));
	cJSON_Delete(w);
	w = warn("[{\"rank\":0,\"data\":0.05,\"compute\":0.45,\"allreduce\":0.5},{\"rank\":1,\"data\":0.6,\"compute\":0.35,\"allreduce\":0.05}]",
	         "[{\"rank\":0,\"gpu\":0,\"utilization\":70},{\"rank\":1,\"gpu\":1,\"utilization\":3}]");
	CHECK(cJSON_GetArraySize(w) == 2);
	CHECK(!strncmp(nth(w, 0), "rank 1's GPU 1 is idle (3% used)", 32));
	CHECK(!strncmp(nth(w, 1), "rank 1 waits for its input 60%", 30));
	cJSON_Delete(w);

	/* what is not a rank's GPU sample is skipped: no rank or gpu, a utilisation out of [0, 100],
	 * not an object; what is left of one rank judges nothing */
	w = warn(NULL, "[{\"gpu\":0,\"utilization\":0},{\"rank\":1,\"utilization\":0},{\"rank\":2,\"gpu\":2,\"utilization\":101},"
	               "{\"rank\":3,\"gpu\":-1,\"utilization\":0},{\"rank\":4,\"gpu\":4,\"utilization\":\"0\"},7,\"x\","
	               "{\"rank\":5,\"gpu\":5,\"utilization\":99}]");
	CHECK(cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	w = warn(NULL, "{\"rank\":0,\"gpu\":0,\"utilization\":0}");
	CHECK(cJSON_IsArray(w) && cJSON_GetArraySize(w) == 0);
	cJSON_Delete(w);
	return CHECK_DONE();
}
