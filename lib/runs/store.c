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

	if (!dlk_buf_read_file(&b, path, 64, msg, sizeof(msg)))
		n = strtol(b.data ? b.data : "0", NULL, 10);
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
	text = cJSON_Print(rec);
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
	const char *slash = strrchr(spec_file, '/');

	if (!slash)
		return xasprintf(".dlk/runs/%s", name);
	return xasprintf("%.*s/.dlk/runs/%s", (int)(slash - spec_file), spec_file, name);
}
