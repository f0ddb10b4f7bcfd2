/* dlk top's figures for the runs here. A run is going on while its project's run lock is held
 * (lib/runs/lock.h): the holder wrote its pid and run id into the lock file. Its CPU use is the
 * growth of utime + stime (/proc/PID/stat) of it and its children over the interval; its memory
 * the sum of their resident pages. */
#include "lib/top/top.h"
#include "lib/runs/lock.h"
#include "lib/runs/runs.h"
#include "lib/train/progress.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* utime + stime (ticks), the parent and the resident pages of /proc/PID/stat; -1 when gone */
static int proc_stat(long pid, unsigned long long *ticks, long *ppid, long long *rss_pages)
{
	char path[64], buf[2048], *p;
	FILE *f;
	size_t n;
	unsigned long long ut, st;
	long long rss;
	long pp;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* the command name may hold spaces and parentheses: the fields start after the last ')' */
	if (!(p = strrchr(buf, ')')))
		return -1;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
	 * cstime priority nice threads itrealvalue starttime vsize rss */
	if (sscanf(p + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %*u %*u %lld",
	           &pp, &ut, &st, &rss) != 4)
		return -1;
	*ticks = ut + st;
	*ppid = pp;
	*rss_pages = rss;
	return 0;
}

int dlk_top_proc(long pid, double *cpu_seconds, unsigned long long *rss_bytes, int *n_procs)
{
	unsigned long long ticks, total = 0;
	long long rss, pages = 0;
	long ppid, hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	DIR *d;
	struct dirent *de;
	int n = 1;

	if (proc_stat(pid, &ticks, &ppid, &rss))
		return -1;
	total = ticks;
	pages = rss;
	/* its children: a local gang's workers */
	if ((d = opendir("/proc"))) {
		while ((de = readdir(d))) {
			long c;
			if (!isdigit((unsigned char)de->d_name[0]))
				continue;
			c = strtol(de->d_name, NULL, 10);
			if (c != pid && !proc_stat(c, &ticks, &ppid, &rss) && ppid == pid) {
				total += ticks;
				pages += rss;
				n++;
			}
		}
		closedir(d);
	}
	*cpu_seconds = (double)total / (double)(hz > 0 ? hz : 100);
	*rss_bytes = (unsigned long long)(pages > 0 ? pages : 0) * (unsigned long long)(page > 0 ? page : 4096);
	*n_procs = n;
	return 0;
}

struct collect {
	cJSON *rows;
};

/* Whether the lock in dir is held, asked without taking it (F_OFD_GETLK): taking it, even for
 * an instant, could refuse a run that starts at that moment. 1 with *h when held. */
static int lock_held(const char *dir, struct dlk_run_holder *h)
{
	char *path = xasprintf("%s/lock", dir), text[1024];
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), held = 0;
	ssize_t n;

	free(path);
	if (fd < 0)
		return 0;
	if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
		held = 1;
		n = read(fd, text, sizeof(text) - 1);
		if (n < 0 || dlk_run_holder_parse(text, (size_t)n, h))
			memset(h, 0, sizeof(*h));
	}
	close(fd);
	return held;
}

/* The progress the run's rank 0 wrote in dir (DLK_PROGRESS_FILE), when it is this run's: as
 * "progress", with the warnings its step time split calls for. A file that is missing, too large,
 * not JSON or another run's is no progress yet. */
static void add_progress(cJSON *row, const char *dir, const char *run)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char *path = xasprintf("%s/%s", dir, DLK_PROGRESS_FILE), msg[256];
	cJSON *p = NULL;
	const cJSON *id;

	if (!dlk_buf_read_file(&b, path, 64u << 10, msg, sizeof(msg)) && b.len)
		p = cJSON_ParseWithLength(b.data, b.len);
	free(path);
	dlk_buf_release(&b);
	id = cJSON_GetObjectItemCaseSensitive(p, DLK_PROGRESS_RUN);
	if (!cJSON_IsObject(p) || !cJSON_IsString(id) || strcmp(id->valuestring, run)) {
		cJSON_Delete(p);
		return;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(p, DLK_PROGRESS_RUN);
	cJSON_AddItemToObject(row, "warnings", dlk_top_warnings(cJSON_GetObjectItemCaseSensitive(p, DLK_PROGRESS_PHASES),
	                                                                cJSON_GetObjectItemCaseSensitive(p, DLK_PROGRESS_GPUS)));
	cJSON_AddItemToObject(row, "progress", p);
}

static int each_project(const char *dir, const char *project, void *ud)
{
	struct collect *c = ud;
	struct dlk_run_holder h;
	char host[256] = "";
	cJSON *row;

	memset(&h, 0, sizeof(h));
	if (!lock_held(dir, &h))
		return 0;
	gethostname(host, sizeof(host) - 1);
	if (h.pid <= 0 || (h.host[0] && strcmp(h.host, host)))
		return 0;
	row = cJSON_CreateObject();
	cJSON_AddStringToObject(row, "project", project);
	cJSON_AddStringToObject(row, "run", h.run);
	cJSON_AddNumberToObject(row, "pid", (double)h.pid);
	cJSON_AddStringToObject(row, "host", h.host);
	cJSON_AddStringToObject(row, "since", h.since);
	add_progress(row, dir, h.run);
	cJSON_AddItemToArray(c->rows, row);
	return 0;
}

static int cmp_cpu(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	double u = cJSON_GetObjectItemCaseSensitive(x, "cpu_percent")->valuedouble;
	double v = cJSON_GetObjectItemCaseSensitive(y, "cpu_percent")->valuedouble;
	return (u < v) - (u > v);
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

cJSON *dlk_top_local(const char *spec_file, double interval_s, struct dlk_err *err)
{
	struct collect c = { cJSON_CreateArray() };
	cJSON *row, **rows, *out;
	int n, i = 0;
	double *before, t0, t1;

	(void)err;
	dlk_runs_local_each(spec_file, each_project, &c);
	n = cJSON_GetArraySize(c.rows);
	before = xcalloc((size_t)n + 1, sizeof(double));
	cJSON_ArrayForEach(row, c.rows) {
		unsigned long long rss;
		int np;
		if (dlk_top_proc((long)cJSON_GetObjectItemCaseSensitive(row, "pid")->valuedouble, &before[i], &rss, &np))
			before[i] = -1;
		i++;
	}
	t0 = mono();
	if (n && interval_s > 0)
		usleep((useconds_t)(interval_s * 1e6));
	t1 = mono();
	out = cJSON_CreateArray();
	rows = xcalloc((size_t)n + 1, sizeof(*rows));
	i = 0;
	int k = 0;
	while (c.rows->child) {
		double cpu;
		unsigned long long rss;
		int np;
		row = cJSON_DetachItemViaPointer(c.rows, c.rows->child);
		if (before[i] < 0 ||
		    dlk_top_proc((long)cJSON_GetObjectItemCaseSensitive(row, "pid")->valuedouble, &cpu, &rss, &np)) {
			cJSON_Delete(row); /* it ended meanwhile */
		} else {
			cJSON_AddNumberToObject(row, "processes", np);
			cJSON_AddNumberToObject(row, "cpu_percent", t1 > t0 ? 100.0 * (cpu - before[i]) / (t1 - t0) : 0);
			cJSON_AddNumberToObject(row, "rss_bytes", (double)rss);
			rows[k++] = row;
		}
		i++;
	}
	qsort(rows, (size_t)k, sizeof(*rows), cmp_cpu);
	for (i = 0; i < k; i++)
		cJSON_AddItemToArray(out, rows[i]);
	free(rows);
	free(before);
	cJSON_Delete(c.rows);
	return out;
}

static const char *const run_keys[] = { "cpu", "rss", "project", "since" };
static const char *const rank_keys[] = { "rank", "data", "compute", "allreduce" };

int dlk_top_sort_key_ok(const char *key)
{
	for (int i = 0; key && i < 4; i++)
		if (!strcmp(key, run_keys[i]) || !strcmp(key, rank_keys[i]))
			return 1;
	return 0;
}

static const char *sort_key;
struct sort_item {
	cJSON *v;
	int i; /* the order before: ties keep it */
};

static double knum(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *kstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static int cmp_items(const void *pa, const void *pb)
{
	const struct sort_item *a = pa, *b = pb;
	int c = 0;

	if (!strcmp(sort_key, "cpu") || !strcmp(sort_key, "rss")) {
		const char *k = !strcmp(sort_key, "cpu") ? "cpu_percent" : "rss_bytes";
		double x = knum(a->v, k), y = knum(b->v, k);
		c = (x < y) - (x > y);
	} else if (!strcmp(sort_key, "project") || !strcmp(sort_key, "since")) {
		c = strcmp(kstr(a->v, sort_key), kstr(b->v, sort_key));
	} else if (!strcmp(sort_key, "rank")) {
		double x = knum(a->v, "rank"), y = knum(b->v, "rank");
		c = (x > y) - (x < y);
	} else {
		/* a rank's shares: in a progress's "phases" entry, or a cluster pod's "step_time" */
		const cJSON *sa = cJSON_GetObjectItemCaseSensitive(a->v, "step_time"), *sb = cJSON_GetObjectItemCaseSensitive(b->v, "step_time");
		double x = knum(sa ? sa : a->v, sort_key), y = knum(sb ? sb : b->v, sort_key);
		c = (x < y) - (x > y);
	}
	return c ? c : a->i - b->i;
}

static void sort_array(cJSON *arr)
{
	int n = cJSON_GetArraySize(arr), i = 0;
	struct sort_item *v;

	if (!cJSON_IsArray(arr) || n < 2)
		return;
	v = xcalloc((size_t)n, sizeof(*v));
	while (arr->child) {
		v[i].v = cJSON_DetachItemViaPointer(arr, arr->child);
		v[i].i = i;
		i++;
	}
	qsort(v, (size_t)n, sizeof(*v), cmp_items);
	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, v[i].v);
	free(v);
}

void dlk_top_sort(cJSON *rows, const char *key)
{
	cJSON *r;

	if (!dlk_top_sort_key_ok(key))
		return;
	sort_key = key;
	for (int i = 0; i < 4; i++)
		if (!strcmp(key, run_keys[i])) {
			sort_array(rows);
			return;
		}
	cJSON_ArrayForEach(r, rows)
		sort_array(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "progress"), "phases"));
}

int dlk_top_sort_cluster(cJSON *doc, const char *key)
{
	cJSON *j;

	for (int i = 0; i < 4; i++)
		if (key && !strcmp(key, rank_keys[i])) {
			sort_key = key;
			cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(doc, "jobs"))
				sort_array(cJSON_GetObjectItemCaseSensitive(j, "pods"));
			return 0;
		}
	return -1;
}
