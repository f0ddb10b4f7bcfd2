/* Run records: made, changed, checked, shortened and compared. */
#include "lib/runs/runs.h"
#include "lib/runs/usage.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/report/report.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#define MAX_WORLDS 10000      /* entries of run.worlds read back */
#define MAX_DATA 100000       /* entries of run.data */
#define MAX_TEXT 8192         /* bytes of a message, a reason, a URL */
#define MAX_RANKS 4096        /* entries of run.peak_memory_bytes */
#define MAX_COUNT 9007199254740992.0

static const char *const outcome_names[] = { "running", "succeeded", "failed", "interrupted", "skipped", "stopped" };

const char *dlk_run_outcome_name(enum dlk_run_outcome o)
{
	return (unsigned)o < DLK_ARRAY_SIZE(outcome_names) ? outcome_names[o] : "unknown";
}

int dlk_run_outcome_parse(const char *s)
{
	for (size_t i = 0; s && i < DLK_ARRAY_SIZE(outcome_names); i++)
		if (!strcmp(s, outcome_names[i]))
			return (int)i;
	return -1;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

void dlk_run_time_now(char buf[32])
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	char date[24];

	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, 32, "%.19s.%03dZ", date, (int)(ts.tv_nsec / 1000000) % 1000);
}

int dlk_run_new_id(char id[37], struct dlk_err *err)
{
	unsigned char b[16];
	size_t got = 0;

	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot make a run id: getrandom: %s", strerror(errno));
		got += (size_t)n;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* the RFC 4122 variant */
	snprintf(id, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
	         b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

cJSON *dlk_run_record_new(const char *project, const char *id)
{
	cJSON *rec = cJSON_CreateObject(), *run;
	char now[32];

	cJSON_AddStringToObject(rec, "format", REPORT_RUN_FORMAT);
	cJSON_AddNumberToObject(rec, "version", REPORT_RUN_VERSION);
	cJSON_AddStringToObject(rec, "name", project);
	run = cJSON_AddObjectToObject(rec, "run");
	cJSON_AddStringToObject(run, "id", id);
	cJSON_AddStringToObject(run, "project", project);
	cJSON_AddStringToObject(run, "outcome", dlk_run_outcome_name(DLK_RUN_RUNNING));
	dlk_run_time_now(now);
	cJSON_AddStringToObject(run, "started_at", now);
	return rec;
}

cJSON *dlk_run_info(const cJSON *rec)
{
	cJSON *r = cJSON_GetObjectItemCaseSensitive(rec, "run");
	return cJSON_IsObject(r) ? r : NULL;
}

const char *dlk_run_str(const cJSON *rec, const char *key)
{
	const cJSON *v = get(dlk_run_info(rec), key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *dlk_run_id(const cJSON *rec)
{
	return dlk_run_str(rec, "id");
}

const char *dlk_run_project(const cJSON *rec)
{
	return dlk_run_str(rec, "project");
}

const char *dlk_run_started_at(const cJSON *rec)
{
	return dlk_run_str(rec, "started_at");
}

int dlk_run_outcome(const cJSON *rec)
{
	return dlk_run_outcome_parse(dlk_run_str(rec, "outcome"));
}

static cJSON *info_or_new(cJSON *rec)
{
	cJSON *r = dlk_run_info(rec);
	if (!r) {
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "run");
		r = cJSON_AddObjectToObject(rec, "run");
	}
	return r;
}

void dlk_run_set_item(cJSON *rec, const char *key, cJSON *item)
{
	cJSON *r = info_or_new(rec);

	if (!item) {
		cJSON_DeleteItemFromObjectCaseSensitive(r, key);
		return;
	}
	if (get(r, key))
		cJSON_ReplaceItemInObjectCaseSensitive(r, key, item);
	else
		cJSON_AddItemToObject(r, key, item);
}

void dlk_run_set_str(cJSON *rec, const char *key, const char *value)
{
	dlk_run_set_item(rec, key, value ? cJSON_CreateString(value) : NULL);
}

void dlk_run_set_num(cJSON *rec, const char *key, double value)
{
	dlk_run_set_item(rec, key, cJSON_CreateNumber(value));
}

void dlk_run_set_outcome(cJSON *rec, enum dlk_run_outcome o)
{
	dlk_run_set_str(rec, "outcome", dlk_run_outcome_name(o));
}

void dlk_run_set_failure(cJSON *rec, int rank, int exit_code, const char *message)
{
	dlk_run_set_failure_class(rec, rank, exit_code, NULL, message);
}

void dlk_run_set_failure_class(cJSON *rec, int rank, int exit_code, const char *cls, const char *message)
{
	cJSON *f = cJSON_CreateObject();

	if (!cls)
		cls = exit_code >= 128 + 1 && exit_code < 128 + 65 && exit_code != 130 ? "signal" : dlk_exit_name(exit_code);

	cJSON_AddNumberToObject(f, "rank", rank);
	cJSON_AddNumberToObject(f, "exit_code", exit_code);
	cJSON_AddStringToObject(f, "class", cls ? cls : "other");
	cJSON_AddStringToObject(f, "message", message ? message : "");
	dlk_run_set_item(rec, "failure", f);
}

void dlk_run_add_world(cJSON *rec, int world)
{
	cJSON *r = info_or_new(rec), *w = cJSON_GetObjectItemCaseSensitive(r, "worlds");
	cJSON *last;

	if (!cJSON_IsArray(w)) {
		cJSON_DeleteItemFromObjectCaseSensitive(r, "worlds");
		w = cJSON_AddArrayToObject(r, "worlds");
	}
	last = cJSON_GetArrayItem(w, cJSON_GetArraySize(w) - 1);
	if (!cJSON_IsNumber(last) || last->valueint != world)
		cJSON_AddItemToArray(w, cJSON_CreateNumber(world));
}

void dlk_run_count_restart(cJSON *rec)
{
	const cJSON *n = get(dlk_run_info(rec), "restarts");
	dlk_run_set_num(rec, "restarts", (cJSON_IsNumber(n) ? n->valuedouble : 0) + 1);
}

static const char *const doc_parts[] = { "classes", "architecture", "training", "metrics", "history", "provenance",
	                                     "weights" };

void dlk_run_set_document(cJSON *rec, const cJSON *run)
{
	for (size_t i = 0; i < DLK_ARRAY_SIZE(doc_parts); i++) {
		const cJSON *it = get(run, doc_parts[i]);
		cJSON_DeleteItemFromObjectCaseSensitive(rec, doc_parts[i]);
		if (it)
			cJSON_AddItemToObject(rec, doc_parts[i], cJSON_Duplicate(it, 1));
	}
}

/* ---- checking ---- */

static int bad(struct dlk_err *err, const char *who, const char *field, const char *what)
{
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s: run.%s %s", who, field, what);
}

static int check_str(const cJSON *o, const char *key, int required, size_t max, const char *who, struct dlk_err *err)
{
	const cJSON *v = get(o, key);

	if (!v)
		return required ? bad(err, who, key, "is missing") : 0;
	if (!cJSON_IsString(v))
		return bad(err, who, key, "is not a string");
	if (strlen(v->valuestring) > max)
		return bad(err, who, key, "is too long");
	return 0;
}

static int check_whole(const cJSON *o, const char *key, double lo, double hi, const char *who, struct dlk_err *err)
{
	const cJSON *v = get(o, key);

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
	    v->valuedouble < lo || v->valuedouble > hi) {
		char what[96];
		snprintf(what, sizeof(what), "is not a whole number in [%g, %g]", lo, hi);
		return bad(err, who, key, what);
	}
	return 0;
}

/* RFC 3339 as dlk writes it: 2024-05-01T12:00:00Z, with an optional fraction */
static int is_time(const char *s)
{
	static const char pat[] = "dddd-dd-ddTdd:dd:dd";
	size_t i = 0;

	for (; pat[i]; i++)
		if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i])
			return 0;
	if (s[i] == '.') {
		size_t k = ++i;
		while (s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == k || i - k > 9)
			return 0;
	}
	return s[i] == 'Z' && !s[i + 1];
}

static int check_time(const cJSON *o, const char *key, int required, const char *who, struct dlk_err *err)
{
	const cJSON *v = get(o, key);

	if (check_str(o, key, required, 40, who, err))
		return -1;
	if (v && !is_time(v->valuestring))
		return bad(err, who, key, "is not an RFC 3339 UTC time");
	return 0;
}

static int id_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > DLK_RUNS_ID_MAX || s[0] == '.' || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static int check_data(const cJSON *arr, const char *who, const char *field, struct dlk_err *err)
{
	const cJSON *d;
	int n = 0;

	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr))
		return bad(err, who, field, "is not an array");
	cJSON_ArrayForEach(d, arr) {
		const cJSON *sha = get(d, "sha256");
		if (++n > MAX_DATA)
			return bad(err, who, field, "has too many entries");
		if (!cJSON_IsObject(d) || check_str(d, "split", 0, 64, who, err) || check_str(d, "url", 0, MAX_TEXT, who, err))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: run.%s[%d] is not {split, url, sha256}", who, field, n - 1);
		if (!cJSON_IsString(sha) || (sha->valuestring[0] && !dlk_sha256_is_hex(sha->valuestring)))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: run.%s[%d].sha256 is not a sha256", who, field, n - 1);
	}
	return 0;
}

/* The first member name an object of the tree has twice (NULL: none). JSON allows them, but a
 * reader sees the first and an edit (a compaction) may remove it and uncover the other,
 * which was never checked. */
static const char *duplicate_member(const cJSON *o)
{
	const cJSON *a, *b;
	const char *d;

	if (!cJSON_IsObject(o) && !cJSON_IsArray(o))
		return NULL;
	for (a = o->child; a; a = a->next) {
		if (cJSON_IsObject(o))
			for (b = a->next; b; b = b->next)
				if (a->string && b->string && !strcmp(a->string, b->string))
					return a->string;
		if ((d = duplicate_member(a)))
			return d;
	}
	return NULL;
}

/* run.sweep, a sweep's trial: {"id", "trial", "params": {KEY: number | string}, "metric", "goal",
 * "value", "curve": [[at, value]...], "stopped_at"}. */
static int check_sweep(const cJSON *s, const char *who, struct dlk_err *err)
{
	const cJSON *v, *it;
	int n = 0;

	if (!cJSON_IsObject(s))
		return bad(err, who, "sweep", "is not an object");
	if (check_str(s, "id", 1, DLK_RUNS_ID_MAX, who, err) || check_whole(s, "trial", 0, 1e6, who, err) ||
	    check_str(s, "metric", 0, 64, who, err) || check_str(s, "goal", 0, 64, who, err) ||
	    check_whole(s, "stopped_at", 0, 1e15, who, err))
		return dlk_err_prefix(err, "in run.sweep");
	if ((v = get(s, "value")) && !cJSON_IsNumber(v) && !cJSON_IsNull(v))
		return bad(err, who, "sweep.value", "is not a number");
	if ((v = get(s, "params"))) {
		if (!cJSON_IsObject(v))
			return bad(err, who, "sweep.params", "is not an object");
		cJSON_ArrayForEach(it, v) {
			if ((!cJSON_IsNumber(it) && !cJSON_IsString(it)) || strlen(it->string) > 256 || ++n > 64 ||
			    (cJSON_IsString(it) && strlen(it->valuestring) > MAX_TEXT))
				return bad(err, who, "sweep.params", "is not a map of keys to numbers or strings");
		}
	}
	if ((v = get(s, "curve"))) {
		n = 0;
		if (!cJSON_IsArray(v))
			return bad(err, who, "sweep.curve", "is not an array");
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(it, 0)) ||
			    !cJSON_IsNumber(cJSON_GetArrayItem(it, 1)) || ++n > 100000)
				return bad(err, who, "sweep.curve", "is not a list of [epoch or step, value] pairs");
		}
	}
	return 0;
}

int dlk_run_record_check(const cJSON *rec, const char *who, struct dlk_err *err)
{
	const cJSON *r = dlk_run_info(rec), *v, *it;
	struct report_run rr = REPORT_RUN_INIT;
	const char *dup;
	int rc;

	if ((dup = duplicate_member(rec)))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the member \"%.100s\" appears twice in one object", who, dup);

	if (!cJSON_IsObject(rec) || !cJSON_IsString(get(rec, "format")) ||
	    strcmp(get(rec, "format")->valuestring, REPORT_RUN_FORMAT))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a dlk run record (\"format\" is not \"%s\")", who,
		                REPORT_RUN_FORMAT);
	if (!r)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a dlk run record (no \"run\" object)", who);
	if (check_str(r, "id", 1, DLK_RUNS_ID_MAX, who, err) || check_str(r, "project", 1, 253, who, err))
		return -1;
	if (!id_ok(get(r, "id")->valuestring))
		return bad(err, who, "id", "has characters other than letters, digits, '.', '_' and '-'");
	if (check_str(r, "outcome", 1, 32, who, err))
		return -1;
	if (dlk_run_outcome_parse(get(r, "outcome")->valuestring) < 0)
		return bad(err, who, "outcome", "is not running, succeeded, failed, interrupted, skipped or stopped");
	if (check_time(r, "started_at", 1, who, err) || check_time(r, "finished_at", 0, who, err))
		return -1;
	static const char *const texts[] = { "reason", "where", "host", "trigger", "spec_sha256", "image", "dlk_version",
		                             "git_commit", "checkpoint_dir" };
	for (size_t i = 0; i < DLK_ARRAY_SIZE(texts); i++)
		if (check_str(r, texts[i], 0, MAX_TEXT, who, err))
			return -1;
	if (check_whole(r, "restarts", 0, 1e9, who, err) || check_whole(r, "pid", 0, 4194304, who, err))
		return -1;
	if ((v = get(r, "git_dirty")) && !cJSON_IsBool(v))
		return bad(err, who, "git_dirty", "is not true or false");
	if ((v = get(r, "worlds"))) {
		int n = 0;
		if (!cJSON_IsArray(v))
			return bad(err, who, "worlds", "is not an array");
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 1 ||
			    it->valuedouble > 1e6 || ++n > MAX_WORLDS)
				return bad(err, who, "worlds", "is not a list of worker counts");
		}
	}
	if ((v = get(r, "peak_memory_bytes"))) {
		int n = 0;
		if (!cJSON_IsArray(v))
			return bad(err, who, "peak_memory_bytes", "is not an array");
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble <= MAX_COUNT) || ++n > MAX_RANKS)
				return bad(err, who, "peak_memory_bytes", "is not a list of byte counts");
		}
	}
	if ((v = get(r, "failure"))) {
		if (!cJSON_IsObject(v))
			return bad(err, who, "failure", "is not an object");
		if (check_whole(v, "rank", -1, 1e6, who, err) || check_whole(v, "exit_code", 0, 255, who, err) ||
		    check_str(v, "class", 0, 64, who, err) || check_str(v, "message", 0, MAX_TEXT, who, err))
			return dlk_err_prefix(err, "in run.failure");
	}
	if ((v = get(r, "job"))) {
		if (!cJSON_IsObject(v) || check_str(v, "name", 0, 253, who, err) || check_str(v, "namespace", 0, 253, who, err) ||
		    check_str(v, "uid", 0, 128, who, err))
			return bad(err, who, "job", "is not {name, namespace, uid}");
	}
	if ((v = get(r, "bundle"))) {
		const cJSON *sha = get(v, "sha256");
		if (!cJSON_IsObject(v) || check_str(v, "path", 0, MAX_TEXT, who, err) ||
		    (sha && (!cJSON_IsString(sha) || !dlk_sha256_is_hex(sha->valuestring))))
			return bad(err, who, "bundle", "is not {path, sha256}");
	}
	if (check_data(get(r, "data"), who, "data", err))
		return -1;
	if ((v = get(r, "usage")) && dlk_usage_check(v, who, err))
		return -1;
	if ((v = get(r, "sweep")) && check_sweep(v, who, err))
		return -1;
	/* the parts a report draws, checked as `dlk report` checks them */
	rc = report_run_load(rec, who, &rr, err);
	report_run_release(&rr);
	return rc;
}

cJSON *dlk_run_record_parse(const char *text, size_t len, const char *who, struct dlk_err *err)
{
	cJSON *rec = cJSON_ParseWithLength(text, len);

	if (!rec) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: not valid JSON", who);
		return NULL;
	}
	if (dlk_run_record_check(rec, who, err)) {
		cJSON_Delete(rec);
		return NULL;
	}
	return rec;
}

static char *print_if_fits(const cJSON *j, size_t max)
{
	char *s = cJSON_PrintUnformatted(j);

	if (s && strlen(s) > max) {
		free(s);
		s = NULL;
	}
	return s;
}

char *dlk_run_record_compact(const cJSON *rec, size_t max_bytes)
{
	char *s = print_if_fits(rec, max_bytes);
	cJSON *c;

	if (s)
		return s;
	/* the step losses are the bulk of a record and the least of what an audit needs: their
	 * resolution goes first (the record stays one the checker reads back) */
	c = cJSON_Duplicate(rec, 1);
	while (!(s = print_if_fits(c, max_bytes)) && report_run_halve_step_loss(cJSON_GetObjectItemCaseSensitive(c, "history")))
		;
	if (!s)
		s = report_run_compact(c, max_bytes);
	cJSON_Delete(c);
	return s;
}

cJSON *dlk_run_report_doc(const cJSON *rec, const char *store)
{
	cJSON *doc = cJSON_Duplicate(rec, 1), *src = cJSON_CreateObject();
	const char *id = dlk_run_id(rec);

	cJSON_AddStringToObject(src, "kind", "run");
	if (id)
		cJSON_AddStringToObject(src, "id", id);
	if (store)
		cJSON_AddStringToObject(src, "store", store);
	report_run_set_source(doc, src);
	return doc;
}

/* the data entries of a record: run.data, else provenance.data */
static const cJSON *data_of(const cJSON *rec)
{
	const cJSON *d = get(dlk_run_info(rec), "data");
	return cJSON_IsArray(d) ? d : get(get(rec, "provenance"), "data");
}

int dlk_run_uses_data(const cJSON *rec, const char *sha256)
{
	const cJSON *d, *ds;

	if (!strncmp(sha256, "sha256:", 7))
		sha256 += 7;
	cJSON_ArrayForEach(d, data_of(rec)) {
		const cJSON *s = get(d, "sha256");
		if (cJSON_IsString(s) && !strcasecmp(s->valuestring, sha256))
			return 1;
	}
	/* a versioned dataset records its id in the provenance */
	ds = get(get(rec, "provenance"), "dataset");
	ds = cJSON_IsObject(ds) ? get(ds, "id") : ds;
	if (cJSON_IsString(ds)) {
		const char *id = ds->valuestring;
		if (!strncmp(id, "sha256:", 7))
			id += 7;
		if (!strcasecmp(id, sha256))
			return 1;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the fingerprint of the sources of split (NULL: all); *count of them */
static void fingerprint(const cJSON *rec, const char *split, char hex[65], int *count)
{
	const cJSON *data = data_of(rec), *d;
	struct dlk_sha256 h = DLK_SHA256_INIT;
	char **lines;
	int n = 0;

	hex[0] = '\0';
	if (count)
		*count = 0;
	if (!cJSON_IsArray(data) || !cJSON_GetArraySize(data))
		return;
	lines = xcalloc((size_t)cJSON_GetArraySize(data), sizeof(*lines));
	cJSON_ArrayForEach(d, data) {
		const cJSON *sp = get(d, "split"), *u = get(d, "url"), *s = get(d, "sha256");
		if (split && !(cJSON_IsString(sp) && !strcmp(sp->valuestring, split)))
			continue;
		lines[n++] = xasprintf("%s %s %s\n", cJSON_IsString(sp) ? sp->valuestring : "",
		                       cJSON_IsString(u) ? u->valuestring : "", cJSON_IsString(s) ? s->valuestring : "");
	}
	if (count)
		*count = n;
	if (n) {
		/* sorted: the same sources in another order are the same data */
		qsort(lines, (size_t)n, sizeof(*lines), cmp_str);
		dlk_sha256_begin(&h);
		for (int i = 0; i < n; i++) {
			dlk_sha256_update(&h, lines[i], strlen(lines[i]));
			free(lines[i]);
		}
		dlk_sha256_end(&h, hex);
	}
	free(lines);
}

void dlk_run_data_fingerprint(const cJSON *rec, char hex[65])
{
	fingerprint(rec, NULL, hex, NULL);
}

void dlk_run_split_fingerprint(const cJSON *rec, const char *split, char hex[65], int *n)
{
	fingerprint(rec, split, hex, n);
}

int dlk_run_same_data(const cJSON *a, const cJSON *b)
{
	char fa[65], fb[65];

	dlk_run_data_fingerprint(a, fa);
	dlk_run_data_fingerprint(b, fb);
	return fa[0] && !strcmp(fa, fb);
}
