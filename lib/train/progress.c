#include "lib/train/progress.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>

char *dlk_progress_json(const struct dlk_train_event *ev, double accuracy, int have_accuracy, const char *updated)
{
	cJSON *o = cJSON_CreateObject();
	char *s;

	cJSON_AddNumberToObject(o, DLK_PROGRESS_EPOCH, ev->epoch);
	cJSON_AddNumberToObject(o, DLK_PROGRESS_EPOCHS, ev->epochs);
	cJSON_AddNumberToObject(o, DLK_PROGRESS_STEP, (double)ev->global_step);
	cJSON_AddNumberToObject(o, DLK_PROGRESS_TOTAL_STEPS, (double)ev->total_steps);
	cJSON_AddNumberToObject(o, DLK_PROGRESS_LOSS, ev->loss);
	if (have_accuracy)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_ACCURACY, accuracy);
	else
		cJSON_AddNullToObject(o, DLK_PROGRESS_ACCURACY);
	if (ev->eval && ev->eval->n && ev->eval->task != DLK_TASK_CLASSIFICATION && ev->eval->n_metrics > 0) {
		char m[64];
		snprintf(m, sizeof(m), "%s %.4f", ev->eval->metrics[0].name, ev->eval->metrics[0].value);
		cJSON_AddStringToObject(o, DLK_PROGRESS_TEST_METRIC, m);
	}
	cJSON_AddNumberToObject(o, DLK_PROGRESS_SAMPLES_PER_SEC, ev->samples_per_sec);
	cJSON_AddStringToObject(o, DLK_PROGRESS_UPDATED, updated);
	if (ev->world > 0)
		cJSON_AddNumberToObject(o, DLK_PROGRESS_WORKERS, ev->world);
	if (ev->flops_per_sample > 0 && ev->flops > 0) {
		cJSON_AddNumberToObject(o, DLK_PROGRESS_FLOPS_PER_SAMPLE, ev->flops_per_sample);
		cJSON_AddNumberToObject(o, DLK_PROGRESS_FLOPS, round(ev->flops));
		if (ev->peak_flops > 0) {
			cJSON_AddNumberToObject(o, DLK_PROGRESS_PEAK_FLOPS, ev->peak_flops);
			cJSON_AddNumberToObject(o, DLK_PROGRESS_MFU, round(ev->flops / ev->peak_flops * 1e5) / 1e5);
		}
	}
	const double *ph = ev->rank_phase_sec ? ev->rank_phase_sec : ev->phase_sec;
	int nr = ev->rank_phase_sec ? ev->n_rank_phases : 1;
	if (nr > DLK_PROGRESS_MAX_RANKS)
		nr = DLK_PROGRESS_MAX_RANKS;
	cJSON *phases = cJSON_CreateArray();
	for (int r = 0; r < nr; r++) {
		const double *p = ph + (size_t)r * DLK_PHASES;
		double sum = 0;
		for (int k = 0; k < DLK_PHASES; k++)
			sum += p[k] > 0 ? p[k] : 0;
		if (!(sum > 0))
			continue; /* no step timed on that rank yet */
		cJSON *one = cJSON_CreateObject();
		cJSON_AddNumberToObject(one, "rank", r);
		for (int k = 0; k < DLK_PHASES; k++)
			/* three decimals: the annotation stays small, and a share is no more precise */
			cJSON_AddNumberToObject(one, dlk_step_phase_name(k), round((p[k] > 0 ? p[k] : 0) / sum * 1000) / 1000);
		cJSON_AddItemToArray(phases, one);
	}
	if (cJSON_GetArraySize(phases))
		cJSON_AddItemToObject(o, DLK_PROGRESS_PHASES, phases);
	else
		cJSON_Delete(phases);
	if (ev->rank_gpu && ev->n_rank_gpu > 0)
		cJSON_AddItemToObject(o, DLK_PROGRESS_GPUS, dlk_progress_gpus(ev->rank_gpu, ev->n_rank_gpu));
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

cJSON *dlk_progress_gpus(const struct dlk_rank_gpu *gpus, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n && i < DLK_PROGRESS_MAX_RANKS; i++) {
		const struct dlk_rank_gpu *g = &gpus[i];
		cJSON *one = cJSON_CreateObject();
		cJSON_AddNumberToObject(one, "rank", g->rank);
		cJSON_AddNumberToObject(one, "gpu", g->gpu);
		cJSON_AddNumberToObject(one, DLK_PROGRESS_GPU_UTIL, round(g->util_percent));
		cJSON_AddNumberToObject(one, DLK_PROGRESS_GPU_MEM_USED, round(g->mem_used));
		cJSON_AddNumberToObject(one, DLK_PROGRESS_GPU_MEM_TOTAL, round(g->mem_total));
		if (g->power_w >= 0)
			cJSON_AddNumberToObject(one, DLK_PROGRESS_GPU_POWER, round(g->power_w * 10) / 10);
		if (g->sm_clock_mhz > 0)
			cJSON_AddNumberToObject(one, DLK_PROGRESS_GPU_SM_CLOCK, round(g->sm_clock_mhz));
		cJSON_AddItemToArray(a, one);
	}
	return a;
}
