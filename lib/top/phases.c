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

cJSON *dlk_top_phase_warnings(const cJSON *phases)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *e;
	double *data, *others;
	int *rank, n = 0;

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
	free(data);
	free(others);
	free(rank);
	return out;
}
