#include "lib/train/progress.h"

#include <cJSON.h>

char *dlk_progress_json(const struct dlk_train_event *ev, double accuracy, int have_accuracy, const char *updated)
{
	cJSON *o = cJSON_CreateObject();
	char *s;

	cJSON_AddNumberToObject(o, "epoch", ev->epoch);
	cJSON_AddNumberToObject(o, "epochs", ev->epochs);
	cJSON_AddNumberToObject(o, "step", (double)ev->global_step);
	cJSON_AddNumberToObject(o, "totalSteps", (double)ev->total_steps);
	cJSON_AddNumberToObject(o, "loss", ev->loss);
	if (have_accuracy)
		cJSON_AddNumberToObject(o, "accuracy", accuracy);
	else
		cJSON_AddNullToObject(o, "accuracy");
	cJSON_AddNumberToObject(o, "samplesPerSec", ev->samples_per_sec);
	cJSON_AddStringToObject(o, "updated", updated);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}
