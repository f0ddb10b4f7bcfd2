/* Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1): run the command the
 * kubeconfig names and read the ExecCredential it prints. */
#ifndef DLK_KUBE_EXEC_H
#define DLK_KUBE_EXEC_H

#include <time.h>

#include "lib/kube/kubeconfig.h"

#define KUBE_EXEC_OUTPUT_MAX (1u << 20)

struct kube_exec_cred {
	char *token;                      /* or NULL */
	struct kube_blob cert, key;       /* PEM, or empty */
	time_t expiry;                    /* 0: no expirationTimestamp (valid until a 401) */
};
#define KUBE_EXEC_CRED_INIT { NULL, { NULL, 0 }, { NULL, 0 }, 0 }

/* Runs cfg->exec (fork/exec via posix_spawn, never a shell) with the inherited environment plus
 * the plugin's env and KUBERNETES_EXEC_INFO, and parses its ExecCredential into cred (which must
 * be released with kube_exec_cred_release). Interactive when interactiveMode allows and stdin is
 * a terminal; Always without a terminal is an error. A missing command fails with the
 * installHint as the hint. The plugin's stderr goes to ours (it may prompt the user). */
int kube_exec_run(const struct kube_config *cfg, struct kube_exec_cred *cred, struct dlk_err *err);

void kube_exec_cred_release(struct kube_exec_cred *cred);

#endif
