/* The newest record of project `name` in the local run history next to spec_file (a new tree
 * the test frees), NULL when there is none: what the trainer's tests read back. */
#ifndef DLK_TESTS_NEWEST_RUN_H
#define DLK_TESTS_NEWEST_RUN_H

#include <cJSON.h>
#include <stdlib.h>

#include "lib/runs/runs.h"

static cJSON *newest_run(const char *spec_file, const char *name)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = dlk_runs_local_dir(spec_file, name);
	struct dlk_run_store *st = dlk_runs_open_dir(dir, name);
	cJSON *all = NULL, *rec = NULL;

	if (dlk_runs_list(st, &all, NULL, NULL, &err) == 0)
		rec = cJSON_DetachItemFromArray(all, 0);
	cJSON_Delete(all);
	dlk_runs_close(st);
	free(dir);
	return rec;
}

#endif
