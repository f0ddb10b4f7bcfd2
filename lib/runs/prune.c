/* Pruning a project's local runs: what resume needs stays, what nothing names any more goes. */
#include "lib/runs/prune.h"
#include "lib/runs/runs.h"
#include "lib/util/mem.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* seconds since the epoch of a record's RFC 3339 UTC time; -1 when it is not one */
static double parse_time(const char *s)
{
	struct tm tm;
	int ms = 0;

	memset(&tm, 0, sizeof(tm));
	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
	                 &tm.tm_sec) != 6)
		return -1;
	if (s[19] == '.')
		sscanf(s + 20, "%3d", &ms);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (double)timegm(&tm) + ms / 1000.0;
}

/* The bytes under path (a file or a folder a few levels deep, as checkpoints are). */
static unsigned long long tree_bytes(const char *path, int depth)
{
	struct stat st;
	unsigned long long n = 0;
	DIR *d;
	struct dirent *e;

	if (lstat(path, &st))
		return 0;
	if (!S_ISDIR(st.st_mode))
		return (unsigned long long)st.st_size;
	if (depth > 4 || !(d = opendir(path)))
		return 0;
	while ((e = readdir(d))) {
		char *p;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", path, e->d_name);
		n += tree_bytes(p, depth + 1);
		free(p);
	}
	closedir(d);
	return n;
}

/* Removes path (a file, or a checkpoint-shaped folder: files and folders a few levels deep,
 * never following a link). 0 when it is gone. */
static int rm_tree(const char *path, int depth)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) && errno != ENOENT ? -1 : 0;
	if (depth > 4 || !(d = opendir(path)))
		return -1;
	while ((e = readdir(d))) {
		char *p;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", path, e->d_name);
		rc |= rm_tree(p, depth + 1);
		free(p);
	}
	closedir(d);
	if (rmdir(path) && errno != ENOENT)
		rc = -1;
	return rc;
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* an id that names a file of its own in a folder: nothing that climbs out of it */
static int safe_id(const char *id)
{
	return id && *id && !strchr(id, '/') && strcmp(id, ".") && strcmp(id, "..");
}

static void add_item(struct dlk_prune *out, const char *id, int whole, char *record, char *bundle, char *ckpt)
{
	struct dlk_prune_item *it;

	out->items = xrealloc(out->items, (out->n + 1) * sizeof(*out->items));
	it = &out->items[out->n++];
	it->id = xstrdup(id);
	it->whole = whole;
	it->record = record;
	it->bundle = bundle;
	it->checkpoints = ckpt;
	it->bytes = (record ? tree_bytes(record, 0) : 0) + (bundle ? tree_bytes(bundle, 0) : 0) +
	            (ckpt ? tree_bytes(ckpt, 0) : 0);
	out->bytes += it->bytes;
}

static int remove_item(const struct dlk_prune_item *it, struct dlk_err *err)
{
	/* the record first: what remains is never a record naming a bundle that is gone */
	const char *paths[3] = { it->record, it->bundle, it->checkpoints };

	for (int i = 0; i < 3; i++)
		if (paths[i] && rm_tree(paths[i], 0)) {
			if (!err->code)
				dlk_errf(err, DLK_EXIT_FAIL, "cannot remove '%s': %s", paths[i], strerror(errno));
			return -1;
		}
	return 0;
}

int dlk_runs_prune(const struct dlk_prune_opts *o, struct dlk_prune *out, struct dlk_err *err)
{
	struct dlk_run_store *s = dlk_runs_open_dir(o->runs_dir, o->project);
	cJSON *recs = NULL, *rec;
	int i = 0, rc = -1;

	if (dlk_runs_list(s, &recs, NULL, NULL, err))
		goto out;
	cJSON_ArrayForEach(rec, recs) {
		const char *id = dlk_run_id(rec);
		int outcome = dlk_run_outcome(rec), idx = i++;
		double started = parse_time(dlk_run_started_at(rec));
		char *ckpt = NULL, *bundle = NULL;

		if (!safe_id(id))
			continue;
		/* what resume needs: the newest run, which the next `dlk train` continues when it was
		 * interrupted, and any run still going */
		if (outcome == DLK_RUN_RUNNING || (idx == 0 && outcome != DLK_RUN_SUCCEEDED))
			continue;
		if (o->ckpt_base) {
			ckpt = xasprintf("%s/%s", o->ckpt_base, id);
			if (!exists(ckpt)) {
				free(ckpt);
				ckpt = NULL;
			}
		}
		if (idx > 0 && ((o->keep >= 0 && idx >= o->keep) ||
		                (o->older_than >= 0 && started >= 0 && started < o->now - o->older_than))) {
			bundle = xasprintf("%s/%s.dlk", o->runs_dir, id);
			if (!exists(bundle)) {
				free(bundle);
				bundle = NULL;
			}
			add_item(out, id, 1, xasprintf("%s/%s.json", o->runs_dir, id), bundle, ckpt);
		} else if (ckpt) {
			/* kept, but finished or no longer the newest: nothing resumes it, its bundle (if
			 * it made one) is what it left */
			add_item(out, id, 0, NULL, NULL, ckpt);
		}
	}
	rc = 0;
	if (!o->dry_run)
		for (size_t k = 0; k < out->n; k++)
			if (remove_item(&out->items[k], err))
				out->failed++;
	if (out->failed)
		rc = -1;
out:
	cJSON_Delete(recs);
	dlk_runs_close(s);
	return rc;
}

void dlk_prune_release(struct dlk_prune *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->items[i].id);
		free(p->items[i].record);
		free(p->items[i].bundle);
		free(p->items[i].checkpoints);
	}
	free(p->items);
	*p = (struct dlk_prune)DLK_PRUNE_INIT;
}
