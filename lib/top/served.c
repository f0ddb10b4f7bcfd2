/* The model servers this machine runs (`dlk serve --local`), for `dlk top`. A server registers
 * itself as Jupyter's servers do in their runtime directory: one file per process, written when
 * it listens and removed when it ends; a file whose process is gone is stale and is removed by
 * the next reader. dlk top reads each server's own /metrics twice, an interval apart: the
 * requests, errors and rows of each model, and the mean request time over the interval. */
#include "lib/top/top.h"
#include "lib/util/buf.h"
#include "lib/util/curl.h"
#include "lib/util/mem.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SERVED_PREFIX "serve-"
#define METRICS_MAX (4 << 20)

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

char *dlk_top_runtime_dir(void)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	return x && *x == '/' ? xasprintf("%s/dlk", x) : xasprintf("/tmp/dlk-%lu", (unsigned long)getuid());
}

int dlk_serve_register(const char *host, int port, const char *const *models, int n, char **path, struct dlk_err *err)
{
	char *dir = dlk_top_runtime_dir(), *tmp;
	cJSON *doc = cJSON_CreateObject(), *arr;
	char *s, when[32];
	time_t now = time(NULL);
	struct tm tm;
	struct stat st;
	int fd, rc = -1;

	*path = NULL;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	/* another user's directory (a /tmp name taken first) is not ours to write into */
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s is not a directory of this user", dir);
		goto out;
	}
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddNumberToObject(doc, "pid", (double)getpid());
	cJSON_AddStringToObject(doc, "host", host && *host ? host : "127.0.0.1");
	cJSON_AddNumberToObject(doc, "port", port);
	cJSON_AddStringToObject(doc, "since", when);
	arr = cJSON_AddArrayToObject(doc, "models");
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(models[i] ? models[i] : ""));
	s = cJSON_PrintUnformatted(doc);
	*path = xasprintf("%s/" SERVED_PREFIX "%ld.json", dir, (long)getpid());
	tmp = xasprintf("%s.tmp", *path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s) || close(fd) || rename(tmp, *path)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write %s: %s", *path, strerror(errno));
		if (fd >= 0)
			unlink(tmp);
		free(*path);
		*path = NULL;
	} else {
		rc = 0;
	}
	free(tmp);
	free(s);
out:
	cJSON_Delete(doc);
	free(dir);
	return rc;
}

void dlk_serve_unregister(char *path)
{
	if (path)
		unlink(path);
	free(path);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct dlk_buf *b = ud;
	if (b->len + size * n > METRICS_MAX)
		return 0;
	dlk_buf_add(b, p, size * n);
	return size * n;
}

/* GET http://host:port/metrics into b; -1 when it cannot be read */
static int scrape(const char *host, int port, struct dlk_buf *b)
{
	CURL *c;
	char url[300];
	long code = 0;
	CURLcode rc;

	dlk_curl_global_init();
	if (!(c = curl_easy_init()))
		return -1;
	/* an IPv6 address goes in brackets */
	snprintf(url, sizeof(url), strchr(host, ':') ? "http://[%s]:%d/metrics" : "http://%s:%d/metrics",
	         strcmp(host, "0.0.0.0") ? host : "127.0.0.1", port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	dlk_buf_addc(b, 0);
	b->len--;
	return rc == CURLE_OK && code == 200 ? 0 : -1;
}

/* the sum of the samples of family name (exactly: "name{" or "name ") whose label model is
 * model (NULL: all of them); NAN when there is none */
double dlk_top_metric_sum(const char *text, const char *name, const char *model)
{
	size_t nl = strlen(name);
	double sum = NAN;
	char want[300];

	snprintf(want, sizeof(want), "model=\"%s\"", model ? model : "");
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *e = strchr(l, '\n'), *brace, *v;
		size_t len = e ? (size_t)(e - l) : strlen(l);
		char *end;
		double x;
		if (*l == '#' || len <= nl || strncmp(l, name, nl) || (l[nl] != '{' && l[nl] != ' '))
			continue;
		brace = l[nl] == '{' ? l + nl : NULL;
		if (brace) {
			const char *close = memchr(brace, '}', len - nl);
			if (!close)
				continue;
			/* the model label, whole: model="a" is not model="ab" */
			const char *m = brace;
			int found = !model; /* NULL: every model's */
			while (!found && (m = strstr(m, want)) && m < close) {
				if ((m[-1] == '{' || m[-1] == ',') && (m[strlen(want)] == ',' || m[strlen(want)] == '}')) {
					found = 1;
					break;
				}
				m++;
			}
			if (!found)
				continue;
			v = close + 1;
		} else if (model) {
			continue; /* every series of a served model carries its label */
		} else {
			v = l + nl + 1;
		}
		x = strtod(v, &end);
		if (end == v || !isfinite(x))
			continue;
		sum = isnan(sum) ? x : sum + x;
	}
	return sum;
}

cJSON *dlk_top_served_parse(const char *text, size_t len)
{
	cJSON *doc = cJSON_ParseWithLength(text, len);
	const cJSON *pid = get(doc, "pid"), *port = get(doc, "port"), *host = get(doc, "host"), *models = get(doc, "models"), *m;

	if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > 1e9 || !cJSON_IsNumber(port) ||
	    port->valuedouble < 1 || port->valuedouble > 65535 || !cJSON_IsString(host) || !host->valuestring[0] ||
	    strlen(host->valuestring) > 200 || !cJSON_IsArray(models) || cJSON_GetArraySize(models) > 1024) {
		cJSON_Delete(doc);
		return NULL;
	}
	cJSON_ArrayForEach(m, models)
		if (!cJSON_IsString(m) || strlen(m->valuestring) > 200) {
			cJSON_Delete(doc);
			return NULL;
		}
	return doc;
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const fams[] = { "dlk_inference_request_success_total", "dlk_inference_request_failure_total",
	                            "dlk_inference_count_total", "dlk_inference_request_duration_seconds_sum" };

cJSON *dlk_top_served_begin(void)
{
	char *dir = dlk_top_runtime_dir();
	cJSON *out = cJSON_CreateArray();
	DIR *d = NULL;
	struct dirent *de;
	struct stat st;

	/* only this user's own directory: a /tmp name another user made first is not read */
	if (!lstat(dir, &st) && S_ISDIR(st.st_mode) && st.st_uid == getuid())
		d = opendir(dir);
	while (d && (de = readdir(d))) {
		char *path;
		struct dlk_buf b = DLK_BUF_INIT, m = DLK_BUF_INIT;
		cJSON *doc;
		const cJSON *pid, *port, *host, *models, *mo;
		size_t n = strlen(de->d_name);
		if (strncmp(de->d_name, SERVED_PREFIX, strlen(SERVED_PREFIX)) || n < 6 || strcmp(de->d_name + n - 5, ".json"))
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		{
			char why[128];
			if (dlk_buf_read_file(&b, path, 1 << 16, why, sizeof(why))) {
				free(path);
				continue;
			}
		}
		doc = dlk_top_served_parse(b.data ? b.data : "", b.len);
		dlk_buf_release(&b);
		if (!doc) {
			free(path);
			continue;
		}
		pid = get(doc, "pid"), port = get(doc, "port"), host = get(doc, "host"), models = get(doc, "models");
		/* a server gone without removing its file (killed): the file is stale */
		if (kill((pid_t)pid->valuedouble, 0) && errno == ESRCH) {
			unlink(path);
			cJSON_Delete(doc);
			free(path);
			continue;
		}
		free(path);
		{
			double cpu;
			unsigned long long rss;
			int np;
			cJSON_AddNumberToObject(doc, "cpu0", dlk_top_proc((long)pid->valuedouble, &cpu, &rss, &np) ? -1 : cpu);
		}
		cJSON_AddNumberToObject(doc, "t0", mono());
		cJSON_AddBoolToObject(doc, "up", !scrape(host->valuestring, (int)port->valuedouble, &m));
		/* the first sample of each model, in order, beside the names */
		{
			cJSON *first = cJSON_AddArrayToObject(doc, "first");
			cJSON_ArrayForEach(mo, models) {
				cJSON *f0 = cJSON_CreateArray();
				for (int k = 0; k < 4; k++)
					cJSON_AddItemToArray(f0, cJSON_CreateNumber(cJSON_IsString(mo) && m.data
					                                                 ? dlk_top_metric_sum(m.data, fams[k], mo->valuestring)
					                                                 : NAN));
				cJSON_AddItemToArray(first, f0);
			}
		}
		dlk_buf_release(&m);
		cJSON_AddItemToArray(out, doc);
	}
	if (d)
		closedir(d);
	free(dir);
	return out;
}

static double delta(double a, double b)
{
	/* a counter that fell (a restart between the samples) counts from 0 */
	if (isnan(b))
		return NAN;
	if (isnan(a) || b < a)
		return b;
	return b - a;
}

cJSON *dlk_top_served_end(cJSON *begun, double interval_s)
{
	cJSON *out = cJSON_CreateArray(), *doc;
	double wait = 0;

	if (cJSON_GetArraySize(begun) > 0) {
		/* at least the interval since the first server's sample */
		wait = interval_s - (mono() - get(begun->child, "t0")->valuedouble);
		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
	}
	cJSON_ArrayForEach(doc, begun) {
		const cJSON *host = get(doc, "host"), *models = get(doc, "models"), *mo, *first = get(doc, "first");
		long pid = (long)get(doc, "pid")->valuedouble;
		struct dlk_buf m = DLK_BUF_INIT;
		double cpu, secs, cpu0 = get(doc, "cpu0")->valuedouble;
		unsigned long long rss = 0;
		int np, i = 0, up;
		cJSON *row = cJSON_CreateObject(), *arr;
		char addr[300];

		up = !scrape(host->valuestring, (int)get(doc, "port")->valuedouble, &m);
		secs = mono() - get(doc, "t0")->valuedouble;
		cJSON_AddNumberToObject(row, "pid", (double)pid);
		snprintf(addr, sizeof(addr), strchr(host->valuestring, ':') ? "http://[%s]:%d" : "http://%s:%d", host->valuestring,
		         (int)get(doc, "port")->valuedouble);
		cJSON_AddStringToObject(row, "address", addr);
		cJSON_AddStringToObject(row, "since", cJSON_IsString(get(doc, "since")) ? get(doc, "since")->valuestring : "");
		cJSON_AddBoolToObject(row, "up", up);
		if (!dlk_top_proc(pid, &cpu, &rss, &np) && cpu0 >= 0 && secs > 0)
			cJSON_AddNumberToObject(row, "cpu_percent", round((cpu - cpu0) / secs * 1000) / 10);
		else
			cJSON_AddNullToObject(row, "cpu_percent");
		cJSON_AddNumberToObject(row, "rss_bytes", (double)rss);
		arr = cJSON_AddArrayToObject(row, "models");
		cJSON_ArrayForEach(mo, models) {
			const cJSON *f0 = cJSON_GetArrayItem(first, i++);
			cJSON *one;
			double d[4];
			if (!cJSON_IsString(mo))
				continue;
			for (int k = 0; k < 4; k++)
				d[k] = delta(cJSON_GetArrayItem(f0, k) ? cJSON_GetArrayItem(f0, k)->valuedouble : NAN,
				             up ? dlk_top_metric_sum(m.data, fams[k], mo->valuestring) : NAN);
			one = cJSON_CreateObject();
			cJSON_AddStringToObject(one, "model", mo->valuestring);
			if (!up || !(secs > 0)) {
				cJSON_AddItemToArray(arr, one);
				continue;
			}
			cJSON_AddNumberToObject(one, "requests_per_s", isnan(d[0]) ? 0 : round(d[0] / secs * 10) / 10);
			cJSON_AddNumberToObject(one, "errors_per_s", isnan(d[1]) ? 0 : round(d[1] / secs * 10) / 10);
			cJSON_AddNumberToObject(one, "rows_per_s", isnan(d[2]) ? 0 : round(d[2] / secs * 10) / 10);
			/* the mean time of the requests answered in the interval (success or not) */
			double nreq = (isnan(d[0]) ? 0 : d[0]) + (isnan(d[1]) ? 0 : d[1]);
			if (nreq > 0 && !isnan(d[3]))
				cJSON_AddNumberToObject(one, "latency_ms", round(d[3] / nreq * 1e6) / 1e3);
			else
				cJSON_AddNullToObject(one, "latency_ms");
			cJSON_AddItemToArray(arr, one);
		}
		dlk_buf_release(&m);
		cJSON_AddItemToArray(out, row);
	}
	cJSON_Delete(begun);
	return out;
}
