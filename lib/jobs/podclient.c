#include "lib/jobs/podclient.h"
#include "lib/jobs/podenv.h"

#include <stdlib.h>

struct kube_client *dlk_pod_client(long connect_timeout_ms, long timeout_ms, int max_retries, struct dlk_err *err)
{
	struct kube_open_opts o = KUBE_OPEN_OPTS_INIT;
	const char *ns = getenv(DLK_ENV_NAMESPACE);

	o.in_cluster = 1;
	o.config.sa_dir = getenv(DLK_ENV_SERVICEACCOUNT_DIR);
	o.config.namespace = ns && *ns ? ns : NULL;
	o.client.connect_timeout_ms = connect_timeout_ms;
	o.client.timeout_ms = timeout_ms;
	o.client.max_retries = max_retries;
	return kube_client_open(&o, err);
}
