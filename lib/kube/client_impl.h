/* What a kube client is made of: for lib/kube and its white-box tests only. Everyone else holds a
 * struct kube_client through the functions of lib/kube/client.h. */
#ifndef DLK_KUBE_CLIENT_IMPL_H
#define DLK_KUBE_CLIENT_IMPL_H

#include "lib/kube/client.h"

struct kube_client {
	struct kube_config cfg;       /* owned */
	void *curl;                   /* CURL *, reused across requests */
	struct kube_client_opts o;
	char **warnings;              /* collected Warning header texts, unique, NULL-terminated */
	size_t nwarnings;
	struct kube_exec_cred cred;   /* cached exec credential */
	int have_cred;
	int exec_runs;                /* how many times the exec plugin ran */
	char *file_token;             /* token read from cfg.token_file */
	long long file_token_stamp[3];/* mtime ns, inode, size when it was read */
};

#endif
