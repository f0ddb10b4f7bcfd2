/* A scheduled training: the CronJob `schedule:` renders (templates/cronjob.yaml) and the Jobs it
 * starts, its runs. A run is named by whoever starts it (the CronJob controller: NAME-<minutes>;
 * `kubectl create job --from=cronjob/NAME X`: X) and carries the job template's labels
 * (dlk.dev/job=NAME) and an ownerReference to the CronJob: that reference (its uid) is what makes
 * a Job a run of this CronJob. `dlk status`, `dlk logs` and `dlk train --wait` read them here. */
#ifndef DLK_JOBS_CRONJOB_H
#define DLK_JOBS_CRONJOB_H

#include <cJSON.h>

struct dlk_cron_summary {
	char name[254];
	char ns[64];
	char uid[64];
	char schedule[128];
	char time_zone[64];      /* spec.timeZone, "" when unset (the controller's zone) */
	int suspended;
	int active;              /* runs the controller counts as active (status.active) */
	char last_schedule[40];  /* status.lastScheduleTime, "" when it never ran on schedule */
	char last_success[40];   /* status.lastSuccessfulTime, "" when none */
};

/* Reads a CronJob object (any JSON: missing or ill-typed fields read as unset). */
void dlk_cron_summarize(const cJSON *cronjob, struct dlk_cron_summary *s);
/* The summary as a JSON object (for -o json/yaml); the caller owns it. */
cJSON *dlk_cron_summary_json(const struct dlk_cron_summary *s);
/* The name of the CronJob that owns job (its ownerReference of kind CronJob), or NULL. */
const char *dlk_job_cronjob(const cJSON *job);
/* The runs of cronjob among jobs (an array of Jobs, or an object of them as a watch keeps them): those with an ownerReference of kind CronJob
 * whose uid is the CronJob's (its name when either has no uid), newest first (creationTimestamp,
 * then name). A new array of borrowed items: free it with cJSON_Delete. */
cJSON *dlk_cron_runs(const cJSON *jobs, const cJSON *cronjob);

#endif
