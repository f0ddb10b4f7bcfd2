/* Where the cluster is and who we are: kubeconfig files read exactly as kubectl reads them,
 * or the pod's service account (in-cluster config). */
#ifndef DLK_KUBE_KUBECONFIG_H
#define DLK_KUBE_KUBECONFIG_H

#include <cJSON.h>
#include <stddef.h>
#include <time.h>

#include "lib/util/err.h"

/* Input size bounds: a kubeconfig, a certificate or key, a token file. */
#define KUBE_CONFIG_MAX_BYTES (4u << 20)
#define KUBE_PEM_MAX_BYTES (1u << 20)
#define KUBE_TOKEN_MAX_BYTES (64u << 10)

/* A byte string with its length (PEM data is passed to libcurl as a blob). */
struct kube_blob {
	char *data; /* owned, NUL-terminated for convenience */
	size_t len;
};

enum kube_exec_interactive { KUBE_EXEC_IF_AVAILABLE = 0, KUBE_EXEC_NEVER, KUBE_EXEC_ALWAYS };

/* users[].user.exec: a credential plugin. */
struct kube_exec_config {
	char *api_version;     /* client.authentication.k8s.io/v1 or v1beta1 */
	char *command;         /* run through PATH when it has no '/'; relative paths with '/' resolve
				* against the kubeconfig's directory */
	char **args;           /* NULL-terminated */
	char **env;            /* NULL-terminated "NAME=value" */
	enum kube_exec_interactive interactive;
	int provide_cluster_info;
	char *install_hint;    /* may be NULL */
};

struct kube_config {
	char *source;          /* how the file that named the context is shown ("~/.kube/config"),
				* or "in-cluster" */
	char *context;         /* context name ("" in-cluster) */
	char *cluster_name, *user_name;
	char *namespace;       /* never NULL after a successful load */

	/* cluster */
	char *server;          /* https://host:port, without a trailing '/' */
	struct kube_blob ca;   /* PEM, empty when the system store is used */
	int insecure;          /* insecure-skip-tls-verify */
	char *tls_server_name; /* may be NULL */
	char *proxy_url;       /* may be NULL */

	/* user */
	struct kube_blob client_cert, client_key; /* PEM */
	char *token;           /* may be NULL */
	char *token_file;      /* absolute; re-read when it changes */
	char *username, *password;
	char *as_user;         /* impersonation */
	char **as_groups;      /* NULL-terminated, may be NULL */
	struct kube_exec_config *exec; /* may be NULL */

	char *warning;         /* a warning the caller should show (insecure-skip-tls-verify), or NULL */
};
#define KUBE_CONFIG_INIT { 0 }

struct kube_config_opts {
	const char *kubeconfig;  /* --kubeconfig FILE: this file only, no merge; NULL: $KUBECONFIG
				  * (':'-separated, merged first-wins) or ~/.kube/config */
	const char *context;     /* --context, NULL for current-context */
	const char *namespace;   /* --namespace, NULL for the context's (or "default") */
	const char *sa_dir;      /* service-account directory for in-cluster config; NULL is
				  * /var/run/secrets/kubernetes.io/serviceaccount */
};
#define KUBE_CONFIG_OPTS_INIT { NULL, NULL, NULL, NULL }

/* Loads the configuration kubectl would use for these options. When no kubeconfig file exists
 * (and none was named explicitly) and KUBERNETES_SERVICE_HOST is set, falls back to in-cluster
 * config. Errors name the file and the key, e.g.
 * "~/.kube/config: users[0].user.client-key-data: not valid base64", and suggest a near
 * context name for a missing one. cfg must be KUBE_CONFIG_INIT; release with kube_config_release. */
int kube_config_load(const struct kube_config_opts *opts, struct kube_config *cfg, struct dlk_err *err);

/* In-cluster config from KUBERNETES_SERVICE_HOST/PORT and sa_dir (NULL: the default directory):
 * token (as token_file, so rotation is noticed), ca.crt, namespace (overridden by ns_override). */
int kube_config_in_cluster(const char *sa_dir, const char *ns_override, struct kube_config *cfg,
			   struct dlk_err *err);

void kube_config_release(struct kube_config *cfg);

/* Parses the first YAML document in text[0..len) into a new cJSON tree the caller owns
 * (cJSON_Delete), with lib/util/yamljson's reader (YAML 1.2 core schema, aliases expanded within
 * bounds): kubeconfig files are YAML, the API speaks JSON. An empty file gives an empty object.
 * On error returns NULL and fills err with "NAME:LINE:COLUMN: problem" (name is how the file is
 * shown to the user). */
cJSON *kube_yaml_to_json(const char *text, size_t len, const char *name, struct dlk_err *err);

/* Decodes standard base64 (whitespace ignored, padding optional). Returns a new NUL-terminated
 * buffer the caller frees and its length in *out_len, or NULL when the input is not base64. */
char *kube_base64_decode(const char *in, size_t *out_len);

/* Shows a path as users know it: "$HOME/x" becomes "~/x". Returns a new string the caller frees. */
char *kube_display_path(const char *path);

/* The namespace a command acts in, kubectl's rule with the project between: -n (flag), else the
 * project's (project), else the kubeconfig context's (context), else "default". NULL and "" are
 * not given. Returns one of its arguments or "default" (the one home of that fallback). */
const char *kube_namespace_pick(const char *flag, const char *project, const char *context);

#endif
