/* Run stores: listing, finding, writing with a bound; and the directory store (a file per run). */
#include "lib/runs/store_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/jsonprint.h"

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

int dlk_runs_cmp_newest(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	int c = strcmp(str_or_empty(dlk_run_started_at(y)), str_or_empty(dlk_run_started_at(x)));

	return c ? c : strcmp(str_or_empty(dlk_run_id(y)), str_or_empty(dlk_run_id(x)));
}

const char *dlk_runs_store_kind(const struct dlk_run_store *s)
{
	return s->ops->kind;
}

void dlk_runs_close(struct dlk_run_store *s)
{
	if (!s)
		return;
	if (s->ops->close)
		s->ops->close(s);
	free(s->project);
	free(s->dir);
	free(s->ns);
	free(s->cm);
	free(s);
}

/* the stored records that check, newest first, in a new array */
static int load_sorted(struct dlk_run_store *s, cJSON **out, long *dropped, int *nbad, struct dlk_err *err)
{
	cJSON *all = NULL, *it, *sorted;
	const cJSON **v;
	long d = 0;
	int n = 0, bad = 0;

	*out = NULL;
	if (s->ops->load(s, &all, &d, err))
		return -1;
	v = xcalloc((size_t)cJSON_GetArraySize(all) + 1, sizeof(*v));
	cJSON_ArrayForEach(it, all) {
		struct dlk_err e = DLK_ERR_INIT;
		const char *p = dlk_run_project(it);
		if (dlk_run_record_check(it, "record", &e) || (p && strcmp(p, s->project))) {
			bad++;
			continue;
		}
		v[n++] = it;
	}
	qsort(v, (size_t)n, sizeof(*v), dlk_runs_cmp_newest);
	sorted = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(sorted, cJSON_Duplicate(v[i], 1));
	free(v);
	cJSON_Delete(all);
	*out = sorted;
	if (dropped)
		*dropped = d;
	if (nbad)
		*nbad = bad;
	return 0;
}

int dlk_runs_list(struct dlk_run_store *s, cJSON **records, long *dropped, int *bad, struct dlk_err *err)
{
	return load_sorted(s, records, dropped, bad, err);
}

int dlk_runs_get(struct dlk_run_store *s, const char *id, cJSON **record, struct dlk_err *err)
{
	cJSON *all, *it;
	const cJSON *exact = NULL, *first = NULL;
	struct dlk_buf cands = DLK_BUF_INIT;
	size_t len = strlen(id);
	int matches = 0, rc = -1;

	*record = NULL;
	if (load_sorted(s, &all, NULL, NULL, err))
		return -1;
	cJSON_ArrayForEach(it, all) {
		const char *rid = dlk_run_id(it);
		if (!strcmp(rid, id))
			exact = it;
		else if (len >= 4 && !strncmp(rid, id, len)) {
			if (!matches++)
				first = it;
			if (matches <= 5)
				dlk_buf_addf(&cands, "%s%s", matches > 1 ? ", " : "", rid);
		}
	}
	if (exact || matches == 1) {
		*record = cJSON_Duplicate(exact ? exact : first, 1);
		rc = 0;
	} else if (matches > 1) {
		dlk_errf(err, DLK_EXIT_USAGE, "run '%s' is ambiguous: %d runs of '%s' start so (%s%s)", id, matches,
		         s->project, cands.data, matches > 5 ? ", ..." : "");
		dlk_err_hint(err, "give more of the id");
	} else {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "no run '%s' in the %s history of '%s'", id, s->ops->kind, s->project);
		if (len < 4)
			dlk_err_hint(err, "give at least 4 characters of the id");
	}
	dlk_buf_release(&cands);
	cJSON_Delete(all);
	return rc;
}

int dlk_runs_find_data(struct dlk_run_store *s, const char *sha256, cJSON **records, struct dlk_err *err)
{
	cJSON *all, *it, *out;

	*records = NULL;
	if (load_sorted(s, &all, NULL, NULL, err))
		return -1;
	out = cJSON_CreateArray();
	cJSON_ArrayForEach(it, all)
		if (dlk_run_uses_data(it, sha256))
			cJSON_AddItemToArray(out, cJSON_Duplicate(it, 1));
	cJSON_Delete(all);
	*records = out;
	return 0;
}

int dlk_runs_newest(struct dlk_run_store *s, enum dlk_run_outcome o, cJSON **record, struct dlk_err *err)
{
	cJSON *all, *it;

	*record = NULL;
	if (load_sorted(s, &all, NULL, NULL, err))
		return -1;
	cJSON_ArrayForEach(it, all) {
		if (dlk_run_outcome(it) == (int)o) {
			*record = cJSON_Duplicate(it, 1);
			break;
		}
	}
	cJSON_Delete(all);
	return 0;
}

int dlk_runs_put(struct dlk_run_store *s, const cJSON *rec, struct dlk_err *err)
{
	struct dlk_err e = DLK_ERR_INIT;
	const char *id = dlk_run_id(rec);
	const char **drop = NULL;
	cJSON *all = NULL, *it;
	size_t n_drop = 0;
	int n = 0, rc;

	if (dlk_run_record_check(rec, "the run record", &e)) {
		/* a bug here, not the user's input: say so rather than store it */
		return dlk_errf(err, DLK_EXIT_FAIL, "not writing a bad run record: %s", e.msg);
	}
	if (strcmp(dlk_run_project(rec), s->project))
		return dlk_errf(err, DLK_EXIT_FAIL, "run '%s' is of project '%s', not '%s'", id, dlk_run_project(rec),
		                s->project);
	if (load_sorted(s, &all, NULL, NULL, err))
		return -1;
	/* keep the newest DLK_RUNS_KEEP, this one among them */
	drop = xcalloc((size_t)cJSON_GetArraySize(all) + 1, sizeof(*drop));
	cJSON_ArrayForEach(it, all) {
		if (!strcmp(dlk_run_id(it), id))
			continue;
		if (++n >= DLK_RUNS_KEEP)
			drop[n_drop++] = dlk_run_id(it);
	}
	rc = s->ops->save(s, rec, drop, n_drop, err);
	free(drop);
	cJSON_Delete(all);
	return rc;
}

/* ---- a directory: <dir>/<id>.json, and <dir>/dropped holding the count ---- */

static long dir_dropped(const struct dlk_run_store *s)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char *path = xasprintf("%s/dropped", s->dir), msg[256];
	long n = 0;

	if (!dlk_buf_read_file(&b, path, 64, msg, sizeof(msg))) {
		char *end;
		n = strtol(b.data, &end, 10);
		/* the count and a newline, or nothing: a damaged file counts none */
		if (end == b.data || (*end && strcmp(end, "\n")) || n > 2147483647L)
			n = 0;
	}
	dlk_buf_release(&b);
	free(path);
	return n > 0 ? n : 0;
}

static int dir_load(struct dlk_run_store *s, cJSON **records, long *dropped, struct dlk_err *err)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	cJSON *arr = cJSON_CreateArray();
	char msg[256];

	*records = arr;
	*dropped = 0;
	if (!d) {
		if (errno == ENOENT)
			return 0;
		cJSON_Delete(arr);
		*records = NULL;
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot read the run history '%s': %s", s->dir, strerror(errno));
	}
	*dropped = dir_dropped(s);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct dlk_buf b = DLK_BUF_INIT;
		char *path;
		cJSON *rec;

		if (l < 6 || de->d_name[0] == '.' || strcmp(de->d_name + l - 5, ".json"))
			continue;
		path = xasprintf("%s/%s", s->dir, de->d_name);
		/* a file that cannot be read or is not JSON stays in the list as a null, which the
		 * check refuses: counted as a bad record, not silently gone */
		rec = dlk_buf_read_file(&b, path, DLK_RUNS_FILE_BYTES, msg, sizeof(msg)) == 0
		              ? cJSON_ParseWithLength(b.data ? b.data : "", b.len)
		              : NULL;
		cJSON_AddItemToArray(arr, rec ? rec : cJSON_CreateNull());
		dlk_buf_release(&b);
		free(path);
	}
	closedir(d);
	return 0;
}

static int dir_save(struct dlk_run_store *s, const cJSON *rec, const char *const *drop, size_t n_drop,
                    struct dlk_err *err)
{
	char *text, *path;
	int rc;

	if (dlk_mkdir_p(s->dir, err))
		return dlk_err_prefix(err, "cannot keep the run history");
	text = dlk_json_print(rec);
	path = xasprintf("%s/%s.json", s->dir, dlk_run_id(rec));
	rc = dlk_write_file_atomic(path, text, strlen(text), 0644, err);
	free(path);
	free(text);
	if (rc)
		return -1;
	if (n_drop) {
		char num[32];
		snprintf(num, sizeof(num), "%ld\n", dir_dropped(s) + (long)n_drop);
		path = xasprintf("%s/dropped", s->dir);
		rc = dlk_write_file_atomic(path, num, strlen(num), 0644, err);
		free(path);
		if (rc)
			return -1;
		for (size_t i = 0; i < n_drop; i++) {
			path = xasprintf("%s/%s.json", s->dir, drop[i]);
			unlink(path);
			free(path);
			/* the run's own bundle goes with its record: nothing names it any more */
			path = xasprintf("%s/%s.dlk", s->dir, drop[i]);
			unlink(path);
			free(path);
		}
	}
	return 0;
}

static const struct dlk_run_store_ops dir_ops = { "local", dir_load, dir_save, NULL };

struct dlk_run_store *dlk_runs_open_dir(const char *dir, const char *project)
{
	struct dlk_run_store *s = xcalloc(1, sizeof(*s));

	s->ops = &dir_ops;
	s->dir = xstrdup(dir);
	s->project = xstrdup(project);
	return s;
}

char *dlk_runs_local_dir(const char *spec_file, const char *name)
{
	char *dir = dlk_dir_of(spec_file), *p;

	/* a bare name keeps the path relative without "./", as it always was */
	p = strcmp(dir, ".") ? xasprintf("%s/.dlk/runs/%s", dir, name) : xasprintf(".dlk/runs/%s", name);
	free(dir);
	return p;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the project histories in runs (a .dlk/runs directory), sorted; 0 when there is none */
static int each_in(const char *runs, int (*fn)(const char *dir, const char *project, void *ud), void *ud)
{
	DIR *d = opendir(runs);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap)
			names = xrealloc(names, (cap = cap ? 2 * cap : 8) * sizeof(*names));
		names[n++] = xstrdup(de->d_name);
	}
	if (d)
		closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char *dir = xasprintf("%s/%s", runs, names[i]);
		struct stat st;
		if (!rc && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			rc = fn(dir, names[i], ud);
		free(dir);
		free(names[i]);
	}
	free(names);
	return rc;
}

int dlk_runs_local_each(const char *spec_file, int (*fn)(const char *dir, const char *project, void *ud), void *ud)
{
	char *pdir = dlk_dir_of(spec_file), *runs = xasprintf("%s/.dlk/runs", pdir), *here = NULL, *rp = NULL;
	DIR *d = NULL;
	struct dirent *de;
	char **subs = NULL;
	size_t n = 0, cap = 0;
	int rc;

	rc = each_in(runs, fn, ud);
	/* the project beside -f may also be one of the directories below: read it once (by its
	 * real path, so "./p" and "p" are the same) */
	rp = realpath(pdir, NULL);
	d = rc ? NULL : opendir(".");
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap)
			subs = xrealloc(subs, (cap = cap ? 2 * cap : 8) * sizeof(*subs));
		subs[n++] = xstrdup(de->d_name);
	}
	if (d)
		closedir(d);
	if (n)
		qsort(subs, n, sizeof(*subs), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char *sr = realpath(subs[i], NULL);
		if (!rc && sr && (!rp || strcmp(sr, rp))) {
			here = xasprintf("%s/.dlk/runs", subs[i]);
			rc = each_in(here, fn, ud);
			free(here);
		}
		free(sr);
		free(subs[i]);
	}
	free(subs);
	free(rp);
	free(runs);
	free(pdir);
	return rc;
}

struct local_find {
	const char *id;
	cJSON *found;
	struct dlk_err *err;
};

static int find_one(const char *dir, const char *project, void *ud)
{
	struct local_find *f = ud;
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_run_store *s = dlk_runs_open_dir(dir, project);
	cJSON *rec = NULL;
	int rc = 0;

	if (dlk_runs_get(s, f->id, &rec, &e) == 0) {
		if (f->found) {
			dlk_errf(f->err, DLK_EXIT_USAGE, "run '%s' is ambiguous: runs of '%s' and '%s' start so", f->id,
			         dlk_run_project(f->found), project);
			dlk_err_hint(f->err, "give more of the id");
			cJSON_Delete(rec);
			rc = -1;
		} else {
			f->found = rec;
		}
	} else if (e.code != DLK_EXIT_NOTFOUND) {
		*f->err = e;
		rc = -1;
	}
	dlk_runs_close(s);
	return rc;
}

cJSON *dlk_runs_local_find(const char *spec_file, const char *id, struct dlk_err *err)
{
	struct local_find f = { id, NULL, err };

	if (dlk_runs_local_each(spec_file, find_one, &f)) {
		cJSON_Delete(f.found);
		return NULL;
	}
	if (!f.found)
		dlk_errf(err, DLK_EXIT_NOTFOUND, "no run '%s' in the local histories here (.dlk/runs beside the project "
		         "file and in the directories below this one)", id);
	return f.found;
}
