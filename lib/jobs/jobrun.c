/* The run a training job published on itself (see jobrun.h). */
#include "lib/jobs/jobrun.h"
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/report/report.h"
#include "lib/train/progress.h"

#include <stdio.h>
#include <string.h>

cJSON *dlk_job_run_doc(struct kube_client *c, const char *ns, const char *name, const char *ns_flag,
                       struct dlk_err *err)
{
	struct dlk_job_summary s;
	cJSON *job = NULL, *pods = NULL, *run = NULL, *src;
	char who[400];
	const cJSON *ann;
	int have_summary = 0, restarts = 0;

	if (kube_get(c, "Job", ns, name, &job, err) < 0) {
		if (err->code == DLK_EXIT_NOTFOUND) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "no file and no job named '%s' (namespace '%s')", name, ns);
			dlk_err_hint(err, "name a bundle (NAME.dlk), a run document (.json) or a job of 'dlk status%s'",
			             ns_flag ? ns_flag : "");
		}
		goto out;
	}
	if (dlk_job_list_pods(c, ns, name, &pods, err) < 0)
		goto out;
	ann = cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
	        DLK_METRICS_ANNOTATION);
	snprintf(who, sizeof(who), "job '%.200s': annotation %s", name, DLK_METRICS_ANNOTATION);
	if (!cJSON_IsString(ann)) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "job '%s' has published no metrics yet", name);
		dlk_err_hint(err, "its rank 0 publishes them after every epoch; see 'dlk status %s%s'", name,
		             ns_flag ? ns_flag : "");
		goto out;
	}
	run = report_run_parse(ann->valuestring, strlen(ann->valuestring), who, err);
	if (!run)
		goto out;
	dlk_job_summarize(job, cJSON_GetObjectItemCaseSensitive(pods, "items"), NULL, &s);
	have_summary = 1;
	for (int i = 0; i < s.total; i++)
		restarts += s.ranks[i].restarts;
	src = cJSON_CreateObject();
	cJSON_AddStringToObject(src, "kind", "job");
	cJSON_AddStringToObject(src, "name", name);
	cJSON_AddStringToObject(src, "namespace", ns);
	cJSON_AddStringToObject(src, "state", dlk_job_state_name(s.state));
	cJSON_AddNumberToObject(src, "workers", s.total);
	cJSON_AddNumberToObject(src, "pod_restarts", restarts);
	report_run_set_source(run, src);
out:
	if (have_summary)
		dlk_job_summary_release(&s);
	cJSON_Delete(job);
	cJSON_Delete(pods);
	return run;
}
