/* Which ranks of a run are starved by input, from the step time split rank 0 publishes with the
 * progress (lib/train/progress.h "phases"). */
#include "lib/top/top.h"
#include "lib/train/progress.h"
#include "lib/train/train.h"
#include "lib/util/mem.h"

#include <stdlib.h>

static void add_warning(cJSON *out, char *s)
{
	cJSON_AddItemToArray(out, cJSON_CreateString(s));
	free(s);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the share of phase k of a "phases" entry, -1 when it is not a number in [0, 1] */
static double share(const cJSON *e, int k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, dlk_step_phase_name(k));
	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1 ? v->valuedouble : -1;
}

/* the GPU utilisation of each rank in gpus (valid entries), into rank[] and util[]; their count */
static int gpu_utils(const cJSON *gpus, int *rank, int *gpu, double *util, int cap)
{
	const cJSON *e;
	int n = 0;

	cJSON_ArrayForEach(e, gpus) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "rank"), *g = cJSON_GetObjectItemCaseSensitive(e, "gpu");
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, DLK_PROGRESS_GPU_UTIL);
		if (n >= cap || !cJSON_IsObject(e) || !cJSON_IsNumber(r) || r->valuedouble < 0 || r->valuedouble > 1e6 ||
		    !cJSON_IsNumber(g) || g->valuedouble < 0 || g->valuedouble > 1e6 || !cJSON_IsNumber(u) ||
		    !(u->valuedouble >= 0 && u->valuedouble <= 100))
			continue;
		rank[n] = (int)r->valuedouble;
		gpu[n] = (int)g->valuedouble;
		util[n++] = u->valuedouble;
	}
	return n;
}

/* ranks whose GPU is idle while the others' compute */
static void gpu_warnings(cJSON *out, const int *rank, const int *gpu, const double *util, int n, double *others)
{
	for (int i = 0; n > 1 && i < n; i++) {
		int m = 0;
		double med;
		if (util[i] > DLK_TOP_GPU_IDLE_PERCENT)
			continue;
		for (int j = 0; j < n; j++)
			if (j != i)
				others[m++] = util[j];
		qsort(others, (size_t)m, sizeof(double), cmp_double);
		med = m % 2 ? others[m / 2] : (others[m / 2 - 1] + others[m / 2]) / 2;
		if (med >= DLK_TOP_GPU_BUSY_PERCENT)
			add_warning(out, xasprintf("rank %d's GPU %d is idle (%.0f%% used) while %s %.0f%% used: the rank "
			                           "does not compute on it, or waits for the others", rank[i], gpu[i], util[i],
			                           n > 2 ? "the other ranks' GPUs are (their median)" : "the other rank's is",
			                           med));
	}
}

cJSON *dlk_top_phase_warnings(const cJSON *phases)
{
	return dlk_top_warnings(phases, NULL);
}

cJSON *dlk_top_warnings(const cJSON *phases, const cJSON *gpus)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *e;
	double *data, *others;
	int *rank, n = 0, n_gpu = 0;

	/* the GPUs' utilisation says which rank is idle, when they were sampled */
	if (cJSON_IsArray(gpus) && cJSON_GetArraySize(gpus) > 1) {
		int cap = cJSON_GetArraySize(gpus), *gr = xcalloc((size_t)cap, sizeof(int)), *gg = xcalloc((size_t)cap, sizeof(int));
		double *gu = xcalloc((size_t)cap, sizeof(double)), *go = xcalloc((size_t)cap, sizeof(double));
		n_gpu = gpu_utils(gpus, gr, gg, gu, cap);
		gpu_warnings(out, gr, gg, gu, n_gpu, go);
		free(gr);
		free(gg);
		free(gu);
		free(go);
	}
	if (!cJSON_IsArray(phases))
		return out;
	data = xcalloc((size_t)cJSON_GetArraySize(phases) + 1, sizeof(double));
	others = xcalloc((size_t)cJSON_GetArraySize(phases) + 1, sizeof(double));
	rank = xcalloc((size_t)cJSON_GetArraySize(phases) + 1, sizeof(int));
	cJSON_ArrayForEach(e, phases) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "rank");
		if (!cJSON_IsObject(e) || !cJSON_IsNumber(r) || r->valuedouble < 0 || r->valuedouble > 1e6 ||
		    share(e, DLK_PHASE_DATA) < 0)
			continue;
		rank[n] = (int)r->valuedouble;
		data[n++] = share(e, DLK_PHASE_DATA);
	}
	if (n == 1 && data[0] >= DLK_TOP_INPUT_BOUND_SHARE) {
		add_warning(out, xasprintf("rank %d waits for its input %.0f%% of its step time: "
		                                                "the run is input-bound", rank[0], 100 * data[0]));
	}
	for (int i = 0; n > 1 && i < n; i++) {
		int m = 0;
		double med;
		if (data[i] < DLK_TOP_STARVED_SHARE)
			continue;
		for (int j = 0; j < n; j++)
			if (j != i)
				others[m++] = data[j];
		qsort(others, (size_t)m, sizeof(double), cmp_double);
		med = m % 2 ? others[m / 2] : (others[m / 2 - 1] + others[m / 2]) / 2;
		if (data[i] >= DLK_TOP_STARVED_RATIO * med)
			add_warning(out, xasprintf("rank %d waits for its input %.0f%% of its step time, "
			                                                "the other ranks %.0f%%: it is starved by input",
			                                                rank[i], 100 * data[i], 100 * med));
	}
	/* idle ranks: the others wait in the all-reduce for one rank that computes (not starved);
	 * from the step split only when the GPUs' utilisation does not say it */
	if (n_gpu < 2) {
		double *ar = xcalloc((size_t)n + 1, sizeof(double)), *cp = xcalloc((size_t)n + 1, sizeof(double));
		int m = 0;
		cJSON_ArrayForEach(e, phases) {
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "rank");
			if (!cJSON_IsObject(e) || !cJSON_IsNumber(r) || r->valuedouble < 0 || r->valuedouble > 1e6 ||
			    share(e, DLK_PHASE_DATA) < 0)
				continue;
			ar[m] = share(e, DLK_PHASE_ALLREDUCE);
			cp[m++] = share(e, DLK_PHASE_COMPUTE);
		}
		for (int i = 0; n > 1 && i < n; i++) {
			int k = 0;
			double med;
			if (ar[i] < 0 || data[i] >= DLK_TOP_STARVED_SHARE)
				continue;
			for (int j = 0; j < n; j++)
				if (j != i && ar[j] >= 0)
					others[k++] = ar[j];
			if (!k)
				continue;
			qsort(others, (size_t)k, sizeof(double), cmp_double);
			med = k % 2 ? others[k / 2] : (others[k / 2 - 1] + others[k / 2]) / 2;
			if (med < DLK_TOP_IDLE_SHARE || ar[i] > DLK_TOP_SLOWEST_RATIO * med)
				continue;
			if (cp[i] >= 0)
				add_warning(out, xasprintf("the other rank%s idle%s %.0f%% of %s step time in the all-reduce, waiting for "
				                           "rank %d, which computes %.0f%% of its own: it is the slowest rank (a "
				                           "slower device or node, or one shared with other work)",
				                           n > 2 ? "s" : "", n > 2 ? "" : "s", 100 * med, n > 2 ? "their" : "its",
				                           rank[i], 100 * cp[i]));
			else
				add_warning(out, xasprintf("the other rank%s idle%s %.0f%% of %s step time in the all-reduce, waiting for "
				                           "rank %d: it is the slowest rank", n > 2 ? "s" : "", n > 2 ? "" : "s",
				                           100 * med, n > 2 ? "their" : "its", rank[i]));
		}
		free(ar);
		free(cp);
	}
	free(data);
	free(others);
	free(rank);
	return out;
}
