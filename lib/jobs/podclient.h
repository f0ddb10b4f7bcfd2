/* The API client of a dlk worker in its pod: the in-cluster configuration (the service account's
 * files in $DLK_SERVICEACCOUNT_DIR, else the standard mount), in the pod's namespace
 * ($DLK_NAMESPACE, from the downward API). */
#ifndef DLK_JOBS_PODCLIENT_H
#define DLK_JOBS_PODCLIENT_H

#include "lib/kube/client.h"
#include "lib/util/err.h"

/* A client with these limits (milliseconds; retries of a failed request), or NULL with err
 * when the in-cluster configuration cannot be read. The caller frees it (kube_client_free). */
struct kube_client *dlk_pod_client(long connect_timeout_ms, long timeout_ms, int max_retries, struct dlk_err *err);

#endif
