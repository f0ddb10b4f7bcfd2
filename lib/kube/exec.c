#include "lib/kube/exec.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* An interactive plugin may wait for the user to log in; a non-interactive one should not hang. */
#define EXEC_TIMEOUT_MS 60000
#define EXEC_TIMEOUT_INTERACTIVE_MS (10 * 60000)

void kube_exec_cred_release(struct kube_exec_cred *c)
{
	if (c->token)
		memset(c->token, 0, strlen(c->token));
	free(c->token);
	if (c->key.data)
		memset(c->key.data, 0, c->key.len);
	free(c->cert.data);
	free(c->key.data);
	memset(c, 0, sizeof(*c));
}

static char *exec_info(const struct kube_config *cfg, int interactive)
{
	cJSON *root = cJSON_CreateObject(), *spec;
	char *s;

	cJSON_AddStringToObject(root, "kind", "ExecCredential");
	cJSON_AddStringToObject(root, "apiVersion", cfg->exec->api_version);
	spec = cJSON_AddObjectToObject(root, "spec");
	cJSON_AddBoolToObject(spec, "interactive", interactive);
	if (cfg->exec->provide_cluster_info) {
		cJSON *cl = cJSON_AddObjectToObject(spec, "cluster");
		cJSON_AddStringToObject(cl, "server", cfg->server);
		if (cfg->tls_server_name)
			cJSON_AddStringToObject(cl, "tls-server-name", cfg->tls_server_name);
		if (cfg->insecure)
			cJSON_AddBoolToObject(cl, "insecure-skip-tls-verify", 1);
		if (cfg->ca.data) {
			struct dlk_buf b = DLK_BUF_INIT;
			dlk_buf_add_base64(&b, cfg->ca.data, cfg->ca.len);
			cJSON_AddStringToObject(cl, "certificate-authority-data", b.data);
			dlk_buf_release(&b);
		}
		if (cfg->proxy_url)
			cJSON_AddStringToObject(cl, "proxy-url", cfg->proxy_url);
	}
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return s;
}

/* environ, minus names the plugin's env overrides, plus the plugin's env and the exec info. */
static char **exec_env(const struct kube_exec_config *x, const char *info)
{
	size_t n = 0, cap = 16;
	char **env = xmalloc(cap * sizeof(*env));

	for (char **e = environ; e && *e; e++) {
		size_t klen = strcspn(*e, "=");
		int overridden = !strncmp(*e, "KUBERNETES_EXEC_INFO=", 21);
		for (char **p = x->env; p && *p && !overridden; p++)
			overridden = !strncmp(*p, *e, klen + 1);
		if (overridden)
			continue;
		if (n + 2 >= cap)
			env = xrealloc(env, (cap *= 2) * sizeof(*env));
		env[n++] = xstrdup(*e);
	}
	for (char **p = x->env; p && *p; p++) {
		if (n + 2 >= cap)
			env = xrealloc(env, (cap *= 2) * sizeof(*env));
		env[n++] = xstrdup(*p);
	}
	if (n + 2 >= cap)
		env = xrealloc(env, (cap += 2) * sizeof(*env));
	env[n++] = xasprintf("KUBERNETES_EXEC_INFO=%s", info);
	env[n] = NULL;
	return env;
}

static int exec_parse(const struct kube_config *cfg, const char *out, struct kube_exec_cred *cred, struct dlk_err *err)
{
	const char *cmd = cfg->exec->command;
	cJSON *root = cJSON_Parse(out), *st, *v;
	int rc = -1;

	if (!cJSON_IsObject(root)) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': output is not an ExecCredential JSON object", cmd);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "kind");
	if (!cJSON_IsString(v) || strcmp(v->valuestring, "ExecCredential")) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': output has kind '%s', wanted 'ExecCredential'", cmd,
			 cJSON_IsString(v) ? v->valuestring : "");
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "apiVersion");
	if (!cJSON_IsString(v) || strcmp(v->valuestring, cfg->exec->api_version)) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': output has apiVersion '%s', wanted '%s'", cmd,
			 cJSON_IsString(v) ? v->valuestring : "", cfg->exec->api_version);
		goto out;
	}
	st = cJSON_GetObjectItemCaseSensitive(root, "status");
	if (!cJSON_IsObject(st)) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': output has no status", cmd);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(st, "token");
	if (cJSON_IsString(v) && v->valuestring[0])
		cred->token = xstrdup(v->valuestring);
	cJSON *cd = cJSON_GetObjectItemCaseSensitive(st, "clientCertificateData");
	cJSON *kd = cJSON_GetObjectItemCaseSensitive(st, "clientKeyData");
	if (cJSON_IsString(cd) && cd->valuestring[0] && cJSON_IsString(kd) && kd->valuestring[0]) {
		cred->cert.data = xstrdup(cd->valuestring);
		cred->cert.len = strlen(cd->valuestring);
		cred->key.data = xstrdup(kd->valuestring);
		cred->key.len = strlen(kd->valuestring);
	} else if ((cJSON_IsString(cd) && cd->valuestring[0]) != (cJSON_IsString(kd) && kd->valuestring[0])) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': status has only one of clientCertificateData and clientKeyData", cmd);
		goto out;
	}
	if (!cred->token && !cred->cert.data) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': status has neither token nor clientCertificateData", cmd);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(st, "expirationTimestamp");
	if (v && !cJSON_IsNull(v)) {
		double t;
		if (!cJSON_IsString(v) || dlk_rfc3339_parse(v->valuestring, &t) < 0) {
			dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': status.expirationTimestamp is not an RFC 3339 time", cmd);
			goto out;
		}
		cred->expiry = (time_t)t;
	}
	rc = 0;
out:
	cJSON_Delete(root);
	if (rc < 0)
		kube_exec_cred_release(cred);
	return rc;
}

int kube_exec_run(const struct kube_config *cfg, struct kube_exec_cred *cred, struct dlk_err *err)
{
	const struct kube_exec_config *x = cfg->exec;
	posix_spawn_file_actions_t fa;
	int pfd[2] = { -1, -1 }, rc = -1, status = 0, interactive, fa_init = 0;
	pid_t pid = -1;
	char *info = NULL, **env = NULL;
	struct dlk_buf out = DLK_BUF_INIT;

	if (!x)
		return dlk_errf(err, DLK_EXIT_CONFIG, "user '%s' has no exec plugin", cfg->user_name);
	interactive = x->interactive != KUBE_EXEC_NEVER && isatty(STDIN_FILENO);
	if (x->interactive == KUBE_EXEC_ALWAYS && !interactive) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s' needs a terminal (interactiveMode: Always) and stdin is not one",
			 x->command);
		return dlk_err_hint(err, "run the command from a terminal, or log in first so the plugin need not ask");
	}
	info = exec_info(cfg, interactive);
	env = exec_env(x, info);
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': pipe: %s", x->command, strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	fa_init = 1;
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	if (!interactive)
		posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	int e = posix_spawnp(&pid, x->command, &fa, NULL, x->args, env);
	if (e) {
		pid = -1;
		if (e == ENOENT) {
			dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s' not found (user '%s' in %s)", x->command,
				 cfg->user_name, cfg->source);
			if (x->install_hint)
				dlk_err_hint(err, "%s", x->install_hint);
			else
				dlk_err_hint(err, "install '%s' or fix users[].user.exec.command", x->command);
		} else {
			dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': cannot run: %s", x->command, strerror(e));
		}
		goto out;
	}
	close(pfd[1]);
	pfd[1] = -1;
	int waited = 0, limit = interactive ? EXEC_TIMEOUT_INTERACTIVE_MS : EXEC_TIMEOUT_MS;
	for (;;) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		int pr = poll(&p, 1, 200);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr <= 0) {
			if ((waited += 200) >= limit) {
				dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': no answer after %d seconds", x->command, limit / 1000);
				goto out;
			}
			continue;
		}
		char chunk[4096];
		ssize_t n = read(pfd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out.len + (size_t)n > KUBE_EXEC_OUTPUT_MAX) {
			dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s': output larger than 1 MiB", x->command);
			goto out;
		}
		dlk_buf_add(&out, chunk, (size_t)n);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFEXITED(status))
			dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s' failed: exit status %d", x->command, WEXITSTATUS(status));
		else
			dlk_errf(err, DLK_EXIT_AUTH, "exec plugin '%s' failed: killed by signal %d", x->command, WTERMSIG(status));
		if (x->install_hint)
			dlk_err_hint(err, "%s", x->install_hint);
		goto out;
	}
	rc = exec_parse(cfg, out.data, cred, err);
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (fa_init)
		posix_spawn_file_actions_destroy(&fa);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	memset(out.data, 0, out.len); /* it held a credential */
	dlk_buf_release(&out);
	for (char **p = env; p && *p; p++)
		free(*p);
	free(env);
	free(info);
	return rc;
}
