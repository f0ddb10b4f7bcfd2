/* Exec credential plugins against the test API server: cached while valid, re-run after expiry,
 * exactly one refresh and retry on a 401, v1 and v1beta1, tokens and client certificates,
 * KUBERNETES_EXEC_INFO, interactiveMode, installHint, and no plugin output in the verbose log. */
#include "tests/unit/check.h"
#include "tests/unit/test_kube_server.h"
#include "lib/kube/client_impl.h"
#include "lib/kube/api.h"
#include "lib/kube/client.h"
#include "lib/util/buf.h"

static struct kt_server srv;

static struct kube_client *exec_client(const char *api, const char *mode, const char *env, const char *extra,
				       struct dlk_err *err)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
	static int n;
	char name[64];

	snprintf(name, sizeof(name), "kc%d", n++);
	kt_write(kt_path(name),
		 "clusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority: certs/ca.crt\n"
		 "users:\n- name: sso\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/%s\n"
		 "      command: ./bin/cred\n      interactiveMode: %s\n      env:\n%s\n%s\n"
		 "contexts:\n- name: c\n  context: {cluster: c, user: sso}\ncurrent-context: c\n",
		 srv.url, api, mode, env, extra ? extra : "");
	o.kubeconfig = kt_path(name);
	dlk_err_clear(err);
	if (kube_config_load(&o, &cfg, err) < 0) {
		printf("# %s\n", err->msg);
		return NULL;
	}
	return kube_client_new(&cfg, NULL, err);
}

static long get(struct kube_client *c, struct dlk_err *err)
{
	struct kube_response r = KUBE_RESPONSE_INIT;
	struct kube_request req = { .method = "GET", .path = "/api/v1/namespaces/default/configmaps/hello", .retry_safe = 1 };
	dlk_err_clear(err);
	long st = kube_send(c, &req, &r, err) < 0 ? -1 : r.status;
	kube_response_release(&r);
	return st;
}

static int count(const char *file)
{
	const char *s = kt_read(kt_path(file));
	return s ? atoi(s) : 0;
}

static void logline(void *ud, const char *line)
{
	dlk_buf_addf(ud, "%s\n", line);
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c;
	char env[2048];
	char *script;

	if (!kt_have("node") || !kt_have("openssl")) {
		CHECK_MISSING("node or openssl");
		return CHECK_DONE();
	}
	/* no terminal on stdin, whatever ran us: interactiveMode decisions must not depend on it */
	if (!freopen("/dev/null", "r", stdin))
		return 2;
	kt_certs();
	mkdir(kt_path("bin"), 0700);
	script = kt_read("tests/apiserver/exec-credential.sh");
	kt_write(kt_path("bin/cred"), "%s", script);
	chmod(kt_path("bin/cred"), 0755);
	if (kt_server_start(&srv, "auth.json") < 0) {
		printf("not ok 1 - the test API server starts\n1..1\n");
		return 1;
	}

	/* v1: the first token is revoked (401): one refresh, one retry; then cached until expiry */
	snprintf(env, sizeof(env),
		 "      - {name: COUNT_FILE, value: %s}\n      - {name: EXPIRE_SECONDS, value: '3'}\n"
		 "      - {name: INFO_FILE, value: %s}", kt_path("count-v1"), kt_path("info-v1"));
	c = exec_client("v1", "Never", env, "      provideClusterInfo: true", &err);
	struct dlk_buf vlog = DLK_BUF_INIT;
	c->o.verbosity = 8;
	c->o.log = logline;
	c->o.log_ud = &vlog;
	CHECK(get(c, &err) == 200);
	CHECK(count("count-v1") == 2);
	CHECK(kt_log_count(&srv, "\"code\":401") == 1);
	CHECK(kt_log_count(&srv, "\"user\":\"exec-2\"") == 1);
	CHECK(get(c, &err) == 200);
	CHECK(count("count-v1") == 2); /* cached while valid */
	CHECK(kt_log_count(&srv, "\"user\":\"exec-2\"") == 2);
	kt_sleep_ms(3050); /* expiry is whole seconds: 3 s leaves at least 2 s for the cached request */
	CHECK(get(c, &err) == 200);
	CHECK(count("count-v1") == 3); /* expired: run again */
	CHECK(kt_log_count(&srv, "\"user\":\"exec-3\"") == 1);
	CHECK(c->exec_runs == 3);
	/* the plugin saw the ExecCredential spec, with the cluster because provideClusterInfo */
	const char *info = kt_read(kt_path("info-v1"));
	CHECK_CONTAINS(info, "\"apiVersion\":\"client.authentication.k8s.io/v1\"");
	CHECK_CONTAINS(info, "\"interactive\":false");
	CHECK_CONTAINS(info, "\"server\":\"https://127.0.0.1:");
	CHECK_CONTAINS(info, "\"certificate-authority-data\":\"");
	/* exec output never reaches the verbose log */
	CHECK(vlog.data && !strstr(vlog.data, "exec-token"));
	CHECK_CONTAINS(vlog.data, "401 Unauthorized");
	dlk_buf_release(&vlog);
	kube_client_free(c);

	/* a credential the server keeps rejecting: exactly one refresh, then the 401 error */
	snprintf(env, sizeof(env), "      - {name: COUNT_FILE, value: %s}\n      - {name: TOKEN_PREFIX, value: bad}",
		 kt_path("count-bad"));
	c = exec_client("v1", "IfAvailable", env, NULL, &err);
	cJSON *o = NULL;
	CHECK(kube_get(c, "ConfigMap", "default", "hello", &o, &err) == -1);
	CHECK(err.code == DLK_EXIT_AUTH);
	CHECK_CONTAINS(err.hint, "user 'sso'");
	CHECK(count("count-bad") == 2);
	kube_client_free(c);

	/* v1beta1, no interactiveMode needed */
	snprintf(env, sizeof(env),
		 "      - {name: COUNT_FILE, value: %s}\n      - {name: CRED_API_VERSION, value: client.authentication.k8s.io/v1beta1}",
		 kt_path("count-beta"));
	c = exec_client("v1beta1", "IfAvailable", env, NULL, &err);
	CHECK(c && get(c, &err) == 200);
	CHECK(count("count-beta") == 2);
	kube_client_free(c);

	/* a plugin answering with the wrong apiVersion */
	snprintf(env, sizeof(env),
		 "      - {name: COUNT_FILE, value: %s}\n      - {name: CRED_API_VERSION, value: client.authentication.k8s.io/v1beta1}",
		 kt_path("count-mismatch"));
	c = exec_client("v1", "Never", env, NULL, &err);
	CHECK(get(c, &err) == -1);
	CHECK_CONTAINS(err.msg, "output has apiVersion 'client.authentication.k8s.io/v1beta1', wanted 'client.authentication.k8s.io/v1'");
	kube_client_free(c);

	/* client certificate from the plugin */
	snprintf(env, sizeof(env),
		 "      - {name: COUNT_FILE, value: %s}\n      - {name: CRED_MODE, value: cert}\n"
		 "      - {name: CERT_FILE, value: %s}\n      - {name: KEY_FILE, value: %s}",
		 kt_path("count-cert"), kt_path("certs/client.crt"), kt_path("certs/client.key"));
	c = exec_client("v1", "Never", env, NULL, &err);
	CHECK(c && get(c, &err) == 200);
	CHECK(kt_log_count(&srv, "\"user\":\"alice\"") == 1);
	CHECK(count("count-cert") == 1);
	kube_client_free(c);

	/* a failing plugin */
	snprintf(env, sizeof(env), "      - {name: COUNT_FILE, value: %s}\n      - {name: FAIL, value: '3'}", kt_path("count-fail"));
	c = exec_client("v1", "Never", env, "      installHint: run 'sso login' first", &err);
	CHECK(get(c, &err) == -1);
	CHECK_CONTAINS(err.msg, "failed: exit status 3");
	CHECK(err.code == DLK_EXIT_AUTH);
	kube_client_free(c);

	/* Always needs a terminal: a clear error, and the plugin does not run */
	snprintf(env, sizeof(env), "      - {name: COUNT_FILE, value: %s}", kt_path("count-always"));
	c = exec_client("v1", "Always", env, NULL, &err);
	CHECK(get(c, &err) == -1);
	CHECK_CONTAINS(err.msg, "needs a terminal (interactiveMode: Always)");
	CHECK(count("count-always") == 0);
	kube_client_free(c);

	/* a missing command shows the installHint */
	{
		struct kube_config cfg = KUBE_CONFIG_INIT;
		struct kube_config_opts opts = KUBE_CONFIG_OPTS_INIT;
		kt_write(kt_path("kc-missing"),
			 "clusters:\n- name: c\n  cluster: {server: '%s', certificate-authority: certs/ca.crt}\n"
			 "users:\n- name: sso\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
			 "      command: dlk-test-no-such-plugin\n      interactiveMode: Never\n"
			 "      installHint: 'install it: apt install dlk-test-sso'\n"
			 "contexts:\n- name: c\n  context: {cluster: c, user: sso}\ncurrent-context: c\n", srv.url);
		opts.kubeconfig = kt_path("kc-missing");
		CHECK(kube_config_load(&opts, &cfg, &err) == 0);
		c = kube_client_new(&cfg, NULL, &err);
		CHECK(get(c, &err) == -1);
		CHECK_CONTAINS(err.msg, "exec plugin 'dlk-test-no-such-plugin' not found");
		CHECK_STR(err.hint, "install it: apt install dlk-test-sso");
		kube_client_free(c);
	}
	kt_server_stop(&srv);
	return CHECK_DONE();
}
