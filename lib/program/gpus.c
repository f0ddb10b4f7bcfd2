/* A program's processes' GPUs, sampled by the supervisor (lib/program/gpus.h). */
#include "lib/program/gpus.h"
#include "lib/top/nvml.h"
#include "lib/train/progress.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct program_gpus {
	int n;                        /* ranks probed */
	int *rank;
	struct dlk_gpu_probe **probe;
	struct dlk_rank_gpu *last;
	int n_last;
	double sampled;               /* dlk_now() of the last sample; 0: none yet */
};

struct program_gpus *program_gpus_open(const struct dlk_program *p, int first_rank, int n, int per_node,
                                       void (*info)(void *ud, int rank, int gpu, const char *bus), void *ud,
                                       char *why, size_t why_len)
{
	struct program_gpus *g;

	for (int i = 0; i < p->n_env; i++)
		if (!strcmp(p->env[i].key, "CUDA_VISIBLE_DEVICES") || !strcmp(p->env[i].key, "CUDA_DEVICE_ORDER")) {
			snprintf(why, why_len, "program.env sets %s: its processes see other devices than dlk does, "
			         "so no GPU is known to be a rank's", p->env[i].key);
			return NULL;
		}
	if (n > DLK_PROGRESS_MAX_RANKS)
		n = DLK_PROGRESS_MAX_RANKS;
	if (per_node < 1)
		per_node = 1;
	g = xcalloc(1, sizeof(*g));
	g->rank = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*g->rank));
	g->probe = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*g->probe));
	g->last = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*g->last));
	for (int i = 0; i < n; i++) {
		struct dlk_gpu_probe *pr = dlk_gpu_probe_open(-1, i % per_node, why, why_len);
		if (!pr)
			continue; /* the next rank's why, or this one's, is told */
		if (info)
			info(ud, first_rank + i, dlk_gpu_probe_index(pr), dlk_gpu_probe_bus_id(pr));
		g->rank[g->n] = first_rank + i;
		g->probe[g->n++] = pr;
	}
	if (!g->n) {
		program_gpus_close(g);
		return NULL;
	}
	return g;
}

int program_gpus_sample(struct program_gpus *g, int now_anyway)
{
	double now = dlk_now();

	if (!g || (!now_anyway && g->sampled > 0 && now - g->sampled < DLK_PROGRESS_FILE_INTERVAL_SEC))
		return 0;
	g->sampled = now;
	g->n_last = 0;
	for (int i = 0; i < g->n; i++) {
		struct dlk_gpu_sample s;
		struct dlk_rank_gpu *k = &g->last[g->n_last];
		if (dlk_gpu_probe_sample(g->probe[i], &s))
			continue; /* NVML cannot read it now: left out of this sample */
		k->rank = g->rank[i];
		k->gpu = s.index;
		k->util_percent = s.util_percent;
		/* to the MiB, as dlk's own ranks gather them */
		k->mem_used = round((double)s.mem_used / 1048576.0) * 1048576.0;
		k->mem_total = round((double)s.mem_total / 1048576.0) * 1048576.0;
		k->power_w = s.power_w;
		k->sm_clock_mhz = s.sm_clock_mhz;
		g->n_last++;
	}
	return 1;
}

const struct dlk_rank_gpu *program_gpus_last(const struct program_gpus *g, int *n)
{
	*n = g ? g->n_last : 0;
	return g ? g->last : NULL;
}

void program_gpus_close(struct program_gpus *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n; i++)
		dlk_gpu_probe_close(g->probe[i]);
	free(g->probe);
	free(g->rank);
	free(g->last);
	free(g);
}
