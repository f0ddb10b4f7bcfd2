/* Helpers for the lib/kube tests: scratch directories, files, certificates made with the openssl
 * CLI, and the test API server (tests/apiserver/server.js) started on an ephemeral port. The
 * server is started with --watch-stdin and keeps our pipe as its stdin, so it exits when the
 * test process does, however that ends. */
#ifndef DLK_TESTS_KUBE_SERVER_H
#define DLK_TESTS_KUBE_SERVER_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char kt_dir[512];

static __attribute__((unused)) void kt_rm_dir(void)
{
	char cmd[600];
	if (kt_dir[0] && !getenv("KT_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", kt_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", kt_dir);
	}
}

/* A scratch directory, removed at exit. */
static __attribute__((unused)) const char *kt_tmpdir(void)
{
	if (!kt_dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(kt_dir, sizeof(kt_dir), "%s/dlk-kube-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(kt_dir)) {
			perror("mkdtemp");
			exit(2);
		}
		atexit(kt_rm_dir);
	}
	return kt_dir;
}

static __attribute__((unused)) char *kt_path(const char *name)
{
	static char bufs[8][1024];
	static int i;
	char *b = bufs[i++ % 8];
	snprintf(b, 1024, "%s/%s", kt_tmpdir(), name);
	return b;
}

static __attribute__((unused)) void kt_write(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static __attribute__((unused)) void kt_write(const char *path, const char *fmt, ...)
{
	FILE *f = fopen(path, "w");
	va_list ap;
	if (!f) {
		perror(path);
		exit(2);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static __attribute__((unused)) char *kt_read(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 16];
	size_t n;
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static __attribute__((unused)) char *kt_b64(const char *path)
{
	static char out[1 << 16];
	const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *in = kt_read(path);
	size_t n = in ? strlen(in) : 0, o = 0;
	for (size_t i = 0; i < n && o + 5 < sizeof(out); i += 3) {
		unsigned v = (unsigned char)in[i] << 16;
		if (i + 1 < n) v |= (unsigned char)in[i + 1] << 8;
		if (i + 2 < n) v |= (unsigned char)in[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

static __attribute__((unused)) int kt_have(const char *prog)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

/* Certificates in DIR/certs (made once per test program). */
static __attribute__((unused)) const char *kt_certs(void)
{
	static char dir[1024];
	if (!dir[0]) {
		char cmd[2048];
		snprintf(dir, sizeof(dir), "%s/certs", kt_tmpdir());
		snprintf(cmd, sizeof(cmd), "sh tests/apiserver/gen-certs.sh '%s'", dir);
		if (system(cmd) != 0) {
			fprintf(stderr, "gen-certs.sh failed\n");
			exit(2);
		}
	}
	return dir;
}

struct kt_server {
	pid_t pid;
	int in_fd;
	char url[256];
	char log[1024];
};

/* Runs node with argv (after "node"), reads the URL it prints first. */
static __attribute__((unused)) int kt_node_start(struct kt_server *s, char **argv)
{
	int out[2], in[2];
	posix_spawn_file_actions_t fa;

	if (pipe(out) < 0 || pipe(in) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_addclose(&fa, out[0]);
	posix_spawn_file_actions_addclose(&fa, in[1]);
	int rc = posix_spawnp(&s->pid, "node", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	close(in[0]);
	s->in_fd = in[1];
	fcntl(s->in_fd, F_SETFD, FD_CLOEXEC);
	if (rc) {
		close(out[0]);
		return -1;
	}
	size_t len = 0;
	for (int waited = 0; waited < 15000 && !strchr(s->url, '\n');) {
		struct pollfd p = { out[0], POLLIN, 0 };
		if (poll(&p, 1, 100) <= 0) {
			waited += 100;
			continue;
		}
		ssize_t r = read(out[0], s->url + len, sizeof(s->url) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		s->url[len] = '\0';
	}
	close(out[0]);
	char *nl = strchr(s->url, '\n');
	if (!nl)
		return -1;
	*nl = '\0';
	return 0;
}

/* Starts the server with a scenario file (name under tests/apiserver/scenarios, or NULL).
 * Returns 0, or -1 when node is missing or it did not start. */
static __attribute__((unused)) int kt_server_start(struct kt_server *s, const char *scenario)
{
	static int n;
	char scen[512];

	memset(s, 0, sizeof(*s));
	snprintf(s->log, sizeof(s->log), "%s/requests-%d.log", kt_tmpdir(), n++);
	snprintf(scen, sizeof(scen), "tests/apiserver/scenarios/%s", scenario ? scenario : "basic.json");
	char *argv[] = { "node", "tests/apiserver/server.js", "--certs", (char *)kt_certs(), "--scenario", scen,
			 "--log", s->log, "--watch-stdin", NULL };
	return kt_node_start(s, argv);
}

/* Starts tests/apiserver/proxy.js (an HTTP CONNECT proxy); its tunnels are logged in s->log. */
static __attribute__((unused)) int kt_proxy_start(struct kt_server *s)
{
	static int n;

	memset(s, 0, sizeof(*s));
	snprintf(s->log, sizeof(s->log), "%s/proxy-%d.log", kt_tmpdir(), n++);
	char *argv[] = { "node", "tests/apiserver/proxy.js", "--log", s->log, "--watch-stdin", NULL };
	return kt_node_start(s, argv);
}

static __attribute__((unused)) void kt_server_stop(struct kt_server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
	if (s->in_fd > 0)
		close(s->in_fd);
	s->in_fd = 0;
}

/* How many lines of the server's request log contain needle. */
static __attribute__((unused)) int kt_log_count(const struct kt_server *s, const char *needle)
{
	FILE *f = fopen(s->log, "r");
	char line[8192];
	int n = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static __attribute__((unused)) void kt_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}


#endif
