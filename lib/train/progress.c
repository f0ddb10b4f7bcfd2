#include "lib/train/progress.h"

#include <cJSON.h>
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
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}
