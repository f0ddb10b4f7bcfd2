/* kubeconfig as kubectl reads it: every cluster/user form, merging, precedence, errors. */
#include "tests/unit/check.h"
#include "tests/unit/test_kube_server.h"
#include "lib/kube/exec.h"
#include "lib/kube/kubeconfig.h"

#include <stdlib.h>

static int load(struct kube_config *cfg, struct dlk_err *err, const char *file, const char *ctx, const char *ns)
{
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
	o.kubeconfig = file;
	o.context = ctx;
	o.namespace = ns;
	kube_config_release(cfg);
	dlk_err_clear(err);
	return kube_config_load(&o, cfg, err);
}

int main(void)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	const char *certs = kt_certs();
	char *ca = strdup(kt_read(kt_path("certs/ca.crt")));
	char *key = strdup(kt_read(kt_path("certs/client.key")));
	char cadata[8192], keydata[8192], certdata[8192];

	snprintf(cadata, sizeof(cadata), "%s", kt_b64(kt_path("certs/ca.crt")));
	snprintf(keydata, sizeof(keydata), "%s", kt_b64(kt_path("certs/client.key")));
	snprintf(certdata, sizeof(certdata), "%s", kt_b64(kt_path("certs/client.crt")));
	(void)certs;

	/* file paths relative to the kubeconfig's directory; token */
	kt_write(kt_path("kc-files"),
		 "apiVersion: v1\nkind: Config\n"
		 "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
		 "    certificate-authority: certs/ca.crt\n    tls-server-name: kube.test\n    proxy-url: http://proxy:3128\n"
		 "users:\n- name: u1\n  user:\n    client-certificate: certs/client.crt\n    client-key: certs/client.key\n"
		 "    tokenFile: tok\n"
		 "contexts:\n- name: ctx1\n  context: {cluster: c1, user: u1, namespace: ml}\n"
		 "current-context: ctx1\n");
	CHECK(load(&cfg, &err, kt_path("kc-files"), NULL, NULL) == 0);
	CHECK_STR(cfg.server, "https://127.0.0.1:6443");
	CHECK(cfg.ca.data && cfg.ca.len == strlen(ca) && !memcmp(cfg.ca.data, ca, cfg.ca.len));
	CHECK(cfg.client_key.data && !strcmp(cfg.client_key.data, key));
	CHECK_CONTAINS(cfg.client_cert.data, "BEGIN CERTIFICATE");
	CHECK_STR(cfg.tls_server_name, "kube.test");
	CHECK_STR(cfg.proxy_url, "http://proxy:3128");
	CHECK_STR(cfg.token_file, kt_path("tok"));
	CHECK_STR(cfg.namespace, "ml");
	CHECK_STR(cfg.context, "ctx1");
	CHECK(cfg.warning == NULL);

	/* -data forms, token, basic auth, impersonation */
	kt_write(kt_path("kc-data"),
		 "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: %s\n"
		 "users:\n- name: tok\n  user:\n    token: abc.def\n    tokenFile: ignored\n"
		 "- name: certs\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n"
		 "- name: basic\n  user: {username: bob, password: s3cret}\n"
		 "- name: imp\n  user:\n    token: t\n    as: jane\n    as-groups: [devs, ops]\n"
		 "contexts:\n- name: tok\n  context: {cluster: c1, user: tok}\n"
		 "- name: certs\n  context: {cluster: c1, user: certs}\n"
		 "- name: basic\n  context: {cluster: c1, user: basic}\n"
		 "- name: imp\n  context: {cluster: c1, user: imp}\n"
		 "- name: prod\n  context: {cluster: c1, user: tok}\n"
		 "current-context: tok\n", cadata, certdata, keydata);
	CHECK(load(&cfg, &err, kt_path("kc-data"), NULL, NULL) == 0);
	CHECK(cfg.ca.data && !strcmp(cfg.ca.data, ca));
	CHECK_STR(cfg.token, "abc.def");
	CHECK(cfg.token_file == NULL); /* token wins over tokenFile */
	CHECK_STR(cfg.namespace, "default");
	CHECK(load(&cfg, &err, kt_path("kc-data"), "certs", NULL) == 0);
	CHECK(cfg.client_key.data && !strcmp(cfg.client_key.data, key));
	CHECK_CONTAINS(cfg.client_cert.data, "BEGIN CERTIFICATE");
	CHECK(load(&cfg, &err, kt_path("kc-data"), "basic", "other") == 0);
	CHECK_STR(cfg.username, "bob");
	CHECK_STR(cfg.password, "s3cret");
	CHECK_STR(cfg.namespace, "other");
	CHECK(load(&cfg, &err, kt_path("kc-data"), "imp", NULL) == 0);
	CHECK_STR(cfg.as_user, "jane");
	CHECK(cfg.as_groups && cfg.as_groups[0] && !strcmp(cfg.as_groups[0], "devs") && !strcmp(cfg.as_groups[1], "ops") &&
	      !cfg.as_groups[2]);

	/* a missing context suggests the nearest */
	CHECK(load(&cfg, &err, kt_path("kc-data"), "prd", NULL) == -1);
	CHECK_STR(err.msg, "context 'prd' not found (did you mean 'prod'?)");
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.hint, "certs");

	/* insecure-skip-tls-verify: allowed, with a warning for the caller */
	kt_write(kt_path("kc-insecure"),
		 "clusters:\n- name: lab\n  cluster: {server: 'https://10.0.0.1', insecure-skip-tls-verify: true}\n"
		 "contexts:\n- name: lab\n  context: {cluster: lab}\ncurrent-context: lab\n");
	CHECK(load(&cfg, &err, kt_path("kc-insecure"), NULL, NULL) == 0);
	CHECK(cfg.insecure == 1);
	CHECK_CONTAINS(cfg.warning, "insecure-skip-tls-verify");
	CHECK_CONTAINS(cfg.warning, "'lab'");

	/* errors name the file and the key, shown relative to ~ */
	setenv("HOME", kt_tmpdir(), 1);
	unsetenv("KUBECONFIG");
	mkdir(kt_path(".kube"), 0700);
	kt_write(kt_path(".kube/config"),
		 "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
		 "users:\n- name: u\n  user:\n    client-certificate-data: %s\n    client-key-data: 'not*base64!'\n"
		 "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", certdata);
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_STR(err.msg, "~/.kube/config: users[0].user.client-key-data: not valid base64");
	kt_write(kt_path(".kube/config"),
		 "clusters:\n- name: c\n  cluster: {server: 'https://h', certificate-authority: nope.crt}\n"
		 "contexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n");
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "~/.kube/config: clusters[0].cluster.certificate-authority: ");
	CHECK_CONTAINS(err.msg, "nope.crt");
	kt_write(kt_path(".kube/config"), "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
		 "contexts:\n- name: c\n  context: {cluster: c, user: ghost}\ncurrent-context: c\n");
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_STR(err.msg, "~/.kube/config: contexts[0].context.user: user 'ghost' not found");
	kt_write(kt_path(".kube/config"), "clusters:\n- name: c\n  cluster: {server: 'h:1'}\n"
		 "contexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n");
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "clusters[0].cluster.server: 'h:1' is not an http(s):// URL");
	kt_write(kt_path(".kube/config"), "clusters:\n- name: c\n  cluster: {server: [x]\n");
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "~/.kube/config:4:1: ");
	kt_write(kt_path(".kube/config"), "clusters: []\ncontexts: []\n");
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "no current-context");

	/* KUBECONFIG merges first-wins per name; current-context from the first file setting it */
	kt_write(kt_path("m1"), "clusters:\n- name: shared\n  cluster: {server: 'https://first'}\n"
		 "contexts:\n- name: a\n  context: {cluster: shared, user: u, namespace: from-a}\n"
		 "current-context: a\n");
	kt_write(kt_path("m2"), "clusters:\n- name: shared\n  cluster: {server: 'https://second'}\n"
		 "- name: only2\n  cluster: {server: 'https://only2'}\n"
		 "users:\n- name: u\n  user: {token: from-m2}\n"
		 "contexts:\n- name: a\n  context: {cluster: only2, user: u}\n"
		 "- name: b\n  context: {cluster: only2, user: u}\ncurrent-context: b\n");
	char list[3200];
	snprintf(list, sizeof(list), "%s:%s:%s", kt_path("does-not-exist"), kt_path("m1"), kt_path("m2"));
	setenv("KUBECONFIG", list, 1);
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == 0);
	CHECK_STR(cfg.context, "a");
	CHECK_STR(cfg.server, "https://first");
	CHECK_STR(cfg.token, "from-m2");
	CHECK_STR(cfg.namespace, "from-a");
	CHECK(load(&cfg, &err, NULL, "b", NULL) == 0);
	CHECK_STR(cfg.server, "https://only2");
	/* --kubeconfig: one file, no merge, even with KUBECONFIG set */
	CHECK(load(&cfg, &err, kt_path("m2"), NULL, NULL) == 0);
	CHECK_STR(cfg.context, "b");
	CHECK(load(&cfg, &err, kt_path("m1"), NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "user 'u' not found");
	/* an explicit file that is missing is an error */
	CHECK(load(&cfg, &err, kt_path("does-not-exist"), NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "does-not-exist");
	unsetenv("KUBECONFIG");

	/* exec plugin configuration */
	kt_write(kt_path("kc-exec"),
		 "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
		 "users:\n- name: v1\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: ./bin/cred\n      args: [get-token, --x]\n      env: [{name: A, value: b}]\n"
		 "      interactiveMode: Never\n      provideClusterInfo: true\n      installHint: install cred\n"
		 "- name: nomode\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: cred}\n"
		 "- name: beta\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: cred, env: null}\n"
		 "contexts:\n- name: v1\n  context: {cluster: c, user: v1}\n"
		 "- name: nomode\n  context: {cluster: c, user: nomode}\n"
		 "- name: beta\n  context: {cluster: c, user: beta}\ncurrent-context: v1\n");
	CHECK(load(&cfg, &err, kt_path("kc-exec"), NULL, NULL) == 0);
	CHECK(cfg.exec && cfg.exec->interactive == KUBE_EXEC_NEVER && cfg.exec->provide_cluster_info);
	CHECK_STR(cfg.exec->command, kt_path("./bin/cred"));
	CHECK_STR(cfg.exec->args[1], "get-token");
	CHECK_STR(cfg.exec->env[0], "A=b");
	CHECK_STR(cfg.exec->install_hint, "install cred");
	CHECK(load(&cfg, &err, kt_path("kc-exec"), "nomode", NULL) == -1);
	CHECK_CONTAINS(err.msg, "users[1].user.exec.interactiveMode: required");
	CHECK(load(&cfg, &err, kt_path("kc-exec"), "beta", NULL) == 0);
	CHECK(cfg.exec && cfg.exec->interactive == KUBE_EXEC_IF_AVAILABLE && !cfg.exec->env[0]);

	/* in-cluster: used when there is no kubeconfig at all */
	mkdir(kt_path("sa"), 0700);
	kt_write(kt_path("sa/token"), "sa-token-1\n");
	kt_write(kt_path("sa/namespace"), "training\n");
	kt_write(kt_path("sa/ca.crt"), "%s", ca);
	unlink(kt_path(".kube/config"));
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	{
		struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
		o.sa_dir = kt_path("sa");
		kube_config_release(&cfg);
		CHECK(kube_config_load(&o, &cfg, &err) == 0);
		CHECK_STR(cfg.server, "https://10.96.0.1:443");
		CHECK_STR(cfg.namespace, "training");
		CHECK_STR(cfg.token_file, kt_path("sa/token"));
		CHECK(cfg.ca.data && !strcmp(cfg.ca.data, ca));
		o.namespace = "override";
		kube_config_release(&cfg);
		CHECK(kube_config_load(&o, &cfg, &err) == 0);
		CHECK_STR(cfg.namespace, "override");
		o.sa_dir = kt_path("no-sa");
		kube_config_release(&cfg);
		CHECK(kube_config_load(&o, &cfg, &err) == -1);
		CHECK_CONTAINS(err.msg, "in-cluster config: ");
	}
	unsetenv("KUBERNETES_SERVICE_HOST");
	kube_config_release(&cfg);
	CHECK(load(&cfg, &err, NULL, NULL, NULL) == -1);
	CHECK_CONTAINS(err.msg, "no kubeconfig");

	/* helpers */
	size_t n;
	char *d = kube_base64_decode("aGVs\nbG8=", &n);
	CHECK(d && n == 5 && !strcmp(d, "hello"));
	free(d);
	CHECK(kube_base64_decode("aGVsbG8=x", &n) == NULL);
	CHECK(kube_base64_decode("a", &n) == NULL);
	/* the namespace: -n, else the project's, else the context's, else "default"; "" is not given */
	CHECK_STR(kube_namespace_pick("ns", "proj", "ctx"), "ns");
	CHECK_STR(kube_namespace_pick("", "proj", "ctx"), "proj");
	CHECK_STR(kube_namespace_pick(NULL, NULL, "ctx"), "ctx");
	CHECK_STR(kube_namespace_pick(NULL, "", ""), "default");
	CHECK_STR(kube_namespace_pick(NULL, NULL, NULL), "default");
	const char *y = "a: &x [1, 2]\nb: *x\nc: ~\nd: true\n";
	cJSON *j = kube_yaml_to_json(y, strlen(y), "t", &err);
	CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "b")) == 2 && cJSON_IsNull(cJSON_GetObjectItem(j, "c")) &&
	      cJSON_IsTrue(cJSON_GetObjectItem(j, "d")));
	cJSON_Delete(j);
	/* alias bombs are bounded, not expanded without limit */
	const char *bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
			   "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
			   "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n";
	j = kube_yaml_to_json(bomb, strlen(bomb), "bomb", &err);
	CHECK(j == NULL);
	CHECK_CONTAINS(err.msg, "expands to more than");
	j = kube_yaml_to_json("a: 1\na: 2\n", 10, "dup", &err);
	CHECK(j == NULL);
	CHECK_CONTAINS(err.msg, "duplicate key 'a'");

	kube_config_release(&cfg);
	free(ca);
	free(key);
	return CHECK_DONE();
}
