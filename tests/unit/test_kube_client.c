/* The HTTP layer against the test API server: every way to authenticate, TLS checks, retries,
 * Warning headers, Status errors and exit codes, and a verbose log that never shows secrets. */
#include "tests/unit/check.h"
#include "tests/unit/test_kube_server.h"
#include "lib/kube/client_impl.h"
#include "lib/kube/api.h"
#include "lib/kube/client.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

static struct kt_server srv;
static char cadata[8192], certdata[8192], keydata[8192];

/* Writes a kubeconfig with the given cluster and user bodies (YAML, indented 4) and loads it. */
static struct kube_client *client_for(const char *cluster, const char *user, struct dlk_err *err)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
	static int n;
	char name[64];

	snprintf(name, sizeof(name), "kc%d", n++);
	kt_write(kt_path(name), "clusters:\n- name: c\n  cluster:\n%s\nusers:\n- name: u\n  user:\n%s\n"
		 "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", cluster, user);
	o.kubeconfig = kt_path(name);
	dlk_err_clear(err);
	if (kube_config_load(&o, &cfg, err) < 0)
		return NULL;
	struct kube_client *c = kube_client_new(&cfg, NULL, err);
	if (c) {
		c->o.backoff_ms = 50;
		c->o.max_retries = 3;
	}
	return c;
}

static char *cluster_ca_file(void)
{
	static char b[2048];
	snprintf(b, sizeof(b), "    server: %s\n    certificate-authority: certs/ca.crt", srv.url);
	return b;
}

/* GET a path; returns the HTTP status or -1. */
static long get(struct kube_client *c, const char *path, struct dlk_err *err)
{
	struct kube_response r = KUBE_RESPONSE_INIT;
	struct kube_request req = { .method = "GET", .path = path, .retry_safe = 1 };
	long st = kube_send(c, &req, &r, err) < 0 ? -1 : r.status;
	kube_response_release(&r);
	return st;
}

static void logline(void *ud, const char *line)
{
	dlk_buf_addf(ud, "%s\n", line);
}

static const char *CM = "/api/v1/namespaces/default/configmaps/hello";

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c;
	char user[20000], cluster[20000];

	if (!kt_have("node") || !kt_have("openssl")) {
		CHECK_MISSING("node or openssl");
		return CHECK_DONE();
	}
	kt_certs();
	snprintf(cadata, sizeof(cadata), "%s", kt_b64(kt_path("certs/ca.crt")));
	snprintf(certdata, sizeof(certdata), "%s", kt_b64(kt_path("certs/client.crt")));
	snprintf(keydata, sizeof(keydata), "%s", kt_b64(kt_path("certs/client.key")));
	if (kt_server_start(&srv, "auth.json") < 0) {
		printf("not ok 1 - the test API server starts\n1..1\n");
		return 1;
	}

	/* certificate-authority file + token */
	c = client_for(cluster_ca_file(), "    token: test-token", &err);
	CHECK(c != NULL);
	CHECK(get(c, CM, &err) == 200);
	CHECK(get(c, CM, &err) == 200);
	CHECK(kt_log_count(&srv, "\"user\":\"tester\"") == 2);
	{
		/* one connection for both requests: the handle is reused */
		const char *log = kt_read(srv.log);
		const char *p1 = strstr(log, "\"port\":"), *p2 = p1 ? strstr(p1 + 1, "\"port\":") : NULL;
		CHECK(p1 && p2 && atoi(p1 + 7) == atoi(p2 + 7) && atoi(p1 + 7) > 0);
	}
	kube_client_free(c);

	/* certificate-authority-data + client certificate/key data */
	snprintf(cluster, sizeof(cluster), "    server: %s\n    certificate-authority-data: %s", srv.url, cadata);
	snprintf(user, sizeof(user), "    client-certificate-data: %s\n    client-key-data: %s", certdata, keydata);
	c = client_for(cluster, user, &err);
	CHECK(c && get(c, CM, &err) == 200);
	CHECK(kt_log_count(&srv, "\"user\":\"alice\"") == 1);
	kube_client_free(c);

	/* client certificate/key files, relative to the kubeconfig */
	c = client_for(cluster_ca_file(), "    client-certificate: certs/client.crt\n    client-key: certs/client.key", &err);
	CHECK(c && get(c, CM, &err) == 200);
	CHECK(kt_log_count(&srv, "\"user\":\"alice\"") == 2);
	kube_client_free(c);

	/* a client certificate from a CA the server does not trust is a 401 Status */
	c = client_for(cluster_ca_file(), "    client-certificate: certs/rogue.crt\n    client-key: certs/rogue.key", &err);
	CHECK(c && get(c, CM, &err) == 401);
	kube_client_free(c);

	/* tokenFile, relative */
	kt_write(kt_path("token"), "sa-token-1\n");
	c = client_for(cluster_ca_file(), "    tokenFile: token", &err);
	CHECK(c && get(c, CM, &err) == 200);
	CHECK(kt_log_count(&srv, "\"user\":\"sa-1\"") == 1);
	kube_client_free(c);

	/* basic auth */
	c = client_for(cluster_ca_file(), "    username: bob\n    password: s3cret-pass", &err);
	CHECK(c && get(c, CM, &err) == 200);
	CHECK(kt_log_count(&srv, "\"user\":\"bob\"") == 1);
	kube_client_free(c);

	/* a rejected token: the Status becomes a message, a hint naming the user, exit code AUTH */
	c = client_for(cluster_ca_file(), "    token: wrong-token", &err);
	{
		cJSON *o = NULL;
		CHECK(kube_get(c, "ConfigMap", "default", "hello", &o, &err) == -1 && o == NULL);
		CHECK(err.code == DLK_EXIT_AUTH);
		CHECK_CONTAINS(err.msg, "get configmaps 'hello' in namespace 'default': Unauthorized");
		CHECK_CONTAINS(err.hint, "user 'u'");
		CHECK_CONTAINS(err.hint, "re-authenticate");
	}
	kube_client_free(c);

	/* a token with a line break would inject a header: refused before sending */
	c = client_for(cluster_ca_file(), "    token: \"abc\\r\\nImpersonate-User: admin\"", &err);
	CHECK(c && get(c, CM, &err) == -1);
	CHECK_CONTAINS(err.msg, "contains a line break");
	kube_client_free(c);

	/* 403 names user and verb/resource */
	c = client_for(cluster_ca_file(), "    token: test-token", &err);
	CHECK(kube_delete(c, "ConfigMap", "default", "hello", &err) == -1);
	CHECK(err.code == DLK_EXIT_AUTH);
	CHECK_CONTAINS(err.msg, "Forbidden: configmaps \"hello\" is forbidden: User \"tester\" cannot delete");
	CHECK_CONTAINS(err.hint, "user 'u' may not delete configmaps in namespace default");
	/* 404 names the namespace searched */
	cJSON *o = NULL;
	CHECK(kube_get(c, "ConfigMap", "ml", "hello", &o, &err) == -1);
	CHECK(err.code == DLK_EXIT_NOTFOUND);
	CHECK_CONTAINS(err.msg, "NotFound: configmaps \"hello\" not found");
	CHECK_CONTAINS(err.hint, "namespace 'ml'");

	/* verbose log like kubectl -v=6/-v=8, with no secret in it */
	struct dlk_buf vlog = DLK_BUF_INIT;
	c->o.verbosity = 8;
	c->o.log = logline;
	c->o.log_ud = &vlog;
	CHECK(get(c, CM, &err) == 200);
	char want[512];
	snprintf(want, sizeof(want), "GET %s%s 200 OK in ", srv.url, CM);
	CHECK_CONTAINS(vlog.data, want);
	CHECK_CONTAINS(vlog.data, " milliseconds");
	CHECK_CONTAINS(vlog.data, "Authorization: Bearer <masked>");
	CHECK(!strstr(vlog.data, "test-token"));
	kube_client_free(c);
	dlk_buf_reset(&vlog);
	c = client_for(cluster_ca_file(), "    username: bob\n    password: s3cret-pass", &err);
	c->o.verbosity = 8;
	c->o.log = logline;
	c->o.log_ud = &vlog;
	CHECK(get(c, CM, &err) == 200);
	CHECK_CONTAINS(vlog.data, "Authorization: Basic <masked>");
	CHECK(!strstr(vlog.data, "s3cret-pass") && !strstr(vlog.data, "Ym9iOnMzY3JldC1wYXNz"));
	kube_client_free(c);
	dlk_buf_reset(&vlog);
	snprintf(user, sizeof(user), "    client-certificate-data: %s\n    client-key-data: %s", certdata, keydata);
	c = client_for(cluster_ca_file(), user, &err);
	c->o.verbosity = 9;
	c->o.log = logline;
	c->o.log_ud = &vlog;
	CHECK(get(c, CM, &err) == 200);
	{
		char keyline[40];
		const char *k = kt_read(kt_path("certs/client.key"));
		const char *body = strchr(k, '\n') + 1;
		snprintf(keyline, sizeof(keyline), "%.32s", body);
		CHECK(vlog.data && !strstr(vlog.data, keyline) && !strstr(vlog.data, "PRIVATE KEY") &&
		      !strstr(vlog.data, keydata));
	}
	kube_client_free(c);
	dlk_buf_release(&vlog);

	/* insecure-skip-tls-verify works, and warns */
	snprintf(cluster, sizeof(cluster), "    server: %s\n    insecure-skip-tls-verify: true", srv.url);
	c = client_for(cluster, "    token: test-token", &err);
	CHECK(c && get(c, CM, &err) == 200);
	CHECK(c && c->cfg.warning != NULL);
	kube_client_free(c);

	/* without the CA the server's certificate is refused: a connection error with a hint */
	snprintf(cluster, sizeof(cluster), "    server: %s", srv.url);
	c = client_for(cluster, "    token: test-token", &err);
	c->o.max_retries = 0;
	CHECK(get(c, CM, &err) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT);
	CHECK_CONTAINS(err.msg, "cannot reach the API server");
	CHECK_CONTAINS(err.hint, "certificate-authority");
	kube_client_free(c);

	/* tls-server-name: the certificate is checked against that name, not the URL's host */
	snprintf(cluster, sizeof(cluster), "%s\n    tls-server-name: kube.test", cluster_ca_file());
	c = client_for(cluster, "    token: test-token", &err);
	CHECK(c && get(c, CM, &err) == 200);
	kube_client_free(c);
	snprintf(cluster, sizeof(cluster), "%s\n    tls-server-name: wrong.test", cluster_ca_file());
	c = client_for(cluster, "    token: test-token", &err);
	c->o.max_retries = 0;
	CHECK(get(c, CM, &err) == -1 && err.code == DLK_EXIT_CONNECT);
	kube_client_free(c);

	/* proxy-url: the connection is tunnelled through the proxy */
	{
		struct kt_server proxy;
		CHECK(kt_proxy_start(&proxy) == 0);
		snprintf(cluster, sizeof(cluster), "%s\n    proxy-url: %s", cluster_ca_file(), proxy.url);
		c = client_for(cluster, "    token: test-token", &err);
		CHECK(c && get(c, CM, &err) == 200);
		char want_tunnel[1400];
		snprintf(want_tunnel, sizeof(want_tunnel), "CONNECT %s", srv.url + strlen("https://"));
		CHECK(kt_log_count(&proxy, want_tunnel) == 1);
		kube_client_free(c);
		kt_server_stop(&proxy);
	}

	/* in-cluster config; the token file is re-read when it rotates */
	{
		struct kube_config cfg = KUBE_CONFIG_INIT;
		char host[64];
		int port = 0;
		sscanf(srv.url, "https://%63[^:]:%d", host, &port);
		char portstr[16];
		snprintf(portstr, sizeof(portstr), "%d", port);
		setenv("KUBERNETES_SERVICE_HOST", host, 1);
		setenv("KUBERNETES_SERVICE_PORT", portstr, 1);
		mkdir(kt_path("sa"), 0700);
		kt_write(kt_path("sa/ca.crt"), "%s", kt_read(kt_path("certs/ca.crt")));
		kt_write(kt_path("sa/token"), "sa-token-1");
		CHECK(kube_config_in_cluster(kt_path("sa"), NULL, &cfg, &err) == 0);
		CHECK_STR(cfg.namespace, "default");
		c = kube_client_new(&cfg, NULL, &err);
		int before2 = kt_log_count(&srv, "\"user\":\"sa-2\"");
		CHECK(get(c, CM, &err) == 200);
		kt_write(kt_path("sa/token.new"), "sa-token-2");
		rename(kt_path("sa/token.new"), kt_path("sa/token"));
		CHECK(get(c, CM, &err) == 200);
		CHECK(kt_log_count(&srv, "\"user\":\"sa-2\"") == before2 + 1);
		kube_client_free(c);
		unsetenv("KUBERNETES_SERVICE_HOST");
	}

	/* Status error mapping, without a server */
	{
		struct kube_what w = { "create", "jobs", "ml", "train" };
		kube_status_error(NULL, &w, 409,
				  "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"message\":\"jobs.batch \\\"train\\\" already exists\",\"code\":409}",
				  &err);
		CHECK(err.code == DLK_EXIT_EXISTS);
		CHECK_STR(err.msg, "create jobs 'train' in namespace 'ml': AlreadyExists: jobs.batch \"train\" already exists");
		CHECK_CONTAINS(err.hint, "--replace");
		kube_status_error(NULL, &w, 409, "{\"reason\":\"Conflict\",\"message\":\"the object has been modified\"}", &err);
		CHECK(err.code == DLK_EXIT_FAIL);
		kube_status_error(NULL, &w, 422,
				  "{\"reason\":\"Invalid\",\"message\":\"Job \\\"train\\\" is invalid\",\"details\":{\"causes\":"
				  "[{\"reason\":\"FieldValueRequired\",\"field\":\"spec.template.spec.containers\",\"message\":\"Required value\"}]}}",
				  &err);
		CHECK(err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "(spec.template.spec.containers: Required value)");
		CHECK_CONTAINS(err.hint, "'spec.template.spec.containers'");
		kube_status_error(NULL, &w, 502, "<html>\001bad gateway</html>", &err);
		CHECK(err.code == DLK_EXIT_CONNECT);
		CHECK_STR(err.msg, "create jobs 'train' in namespace 'ml': HTTP 502 Bad Gateway: <html> bad gateway</html>");
	}
	kt_server_stop(&srv);

	/* impersonation headers */
	CHECK(kt_server_start(&srv, "impersonate.json") == 0);
	c = client_for(cluster_ca_file(), "    token: test-token\n    as: jane\n    as-groups: [devs, ops]", &err);
	CHECK(c && get(c, CM, &err) == 404); /* authorised as jane: the configmap just does not exist */
	CHECK(kt_log_count(&srv, "\"impersonate-user\":\"jane\"") == 1);
	CHECK(kt_log_count(&srv, "\"impersonate-group\":[\"devs\",\"ops\"]") == 1);
	kube_client_free(c);
	c = client_for(cluster_ca_file(), "    token: test-token", &err);
	CHECK(c && get(c, CM, &err) == 403);
	kube_client_free(c);
	kt_server_stop(&srv);

	/* retries: 429 with Retry-After, 500s with backoff, broken connections; never for POST */
	CHECK(kt_server_start(&srv, "faults.json") == 0);
	c = client_for(cluster_ca_file(), "    token: test-token", &err);
	double t0 = dlk_now();
	CHECK(get(c, "/api/v1/namespaces/default/configmaps/flaky429", &err) == 200);
	CHECK(dlk_now() - t0 >= 0.95); /* waited for Retry-After: 1 */
	CHECK(kt_log_count(&srv, "flaky429\",\"query\":\"\",\"code\":429") == 1);
	CHECK(kt_log_count(&srv, "flaky429\",\"query\":\"\",\"code\":200") == 1);
	CHECK(get(c, "/api/v1/namespaces/default/configmaps/flaky500", &err) == 200);
	CHECK(kt_log_count(&srv, "flaky500\",\"query\":\"\",\"code\":500") == 2);
	CHECK(kube_get(c, "ConfigMap", "default", "always500", &o, &err) == -1);
	CHECK(kt_log_count(&srv, "always500") == 4); /* first try + max_retries (3) */
	CHECK_CONTAINS(err.msg, "InternalError: etcdserver: request timed out");
	CHECK(get(c, "/api/v1/namespaces/default/configmaps/trunc", &err) == 200);
	CHECK(get(c, "/api/v1/namespaces/default/configmaps/reset", &err) == 200);
	{
		cJSON *cm = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p\",\"namespace\":\"posts\"}}");
		CHECK(kube_create(c, cm, NULL, &err) == -1);
		CHECK(kt_log_count(&srv, "\"method\":\"POST\"") == 1);
		CHECK(kube_create(c, cm, NULL, &err) == 0);
		cJSON_Delete(cm);
	}
	c->o.timeout_ms = 300;
	c->o.max_retries = 0;
	t0 = dlk_now();
	CHECK(get(c, "/api/v1/namespaces/default/configmaps/slow", &err) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT && dlk_now() - t0 < 1.2);
	c->o.timeout_ms = 60000;

	/* Warning headers reach the caller */
	{
		struct kube_response r = KUBE_RESPONSE_INIT;
		struct kube_request req = { .method = "DELETE", .path = "/apis/batch/v1/namespaces/default/jobs/orphan-me" };
		CHECK(kube_send(c, &req, &r, &err) == 0 && r.status == 200);
		kube_response_release(&r);
		char **w = kube_client_take_warnings(c);
		CHECK(w && w[0] && strstr(w[0], "child pods are preserved by default") && !w[1]);
		for (size_t i = 0; w && w[i]; i++)
			free(w[i]);
		free(w);
		CHECK(kube_client_take_warnings(c) == NULL);
	}
	kube_client_free(c);
	kt_server_stop(&srv);
	return CHECK_DONE();
}
