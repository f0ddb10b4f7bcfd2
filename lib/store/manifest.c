/* Manifests: canonical text, strict parsing, building one from local files. */
#include "lib/store/manifest.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

void dlk_manifest_release(struct dlk_manifest *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].path);
		free(m->e[i].local);
	}
	free(m->e);
	m->e = NULL;
	m->n = 0;
	m->total = 0;
	m->id[0] = '\0';
}

/* Length of the UTF-8 sequence at s (at most n bytes), or 0 when it is not valid UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

int dlk_manifest_check_path(const char *s, size_t len, char *why, size_t why_len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t seg = 0;

	if (!len)
		return snprintf(why, why_len, "an empty path"), -1;
	if (len > DLK_MANIFEST_MAX_PATH)
		return snprintf(why, why_len, "a path longer than %d bytes", DLK_MANIFEST_MAX_PATH), -1;
	if (s[0] == '/')
		return snprintf(why, why_len, "an absolute path"), -1;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || p[i] == '/') {
			size_t n = i - seg;
			if (n == 0)
				return snprintf(why, why_len, "an empty path segment ('//' or a trailing '/')"), -1;
			if ((n == 1 && s[seg] == '.') || (n == 2 && s[seg] == '.' && s[seg + 1] == '.'))
				return snprintf(why, why_len, "a '.' or '..' segment"), -1;
			seg = i + 1;
			continue;
		}
		if (p[i] < 0x20 || p[i] == 0x7f)
			return snprintf(why, why_len, "a control character"), -1;
		if (p[i] == '\\')
			return snprintf(why, why_len, "a backslash"), -1;
		if (p[i] >= 0x80) {
			size_t l = utf8_len(p + i, len - i);
			if (!l)
				return snprintf(why, why_len, "bytes that are not UTF-8"), -1;
			i += l - 1;
		}
	}
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct dlk_manifest_entry *)a)->path, ((const struct dlk_manifest_entry *)b)->path);
}

const struct dlk_manifest_entry *dlk_manifest_find(const struct dlk_manifest *m, const char *path)
{
	struct dlk_manifest_entry key = { .path = (char *)path };

	if (!m->n)
		return NULL;
	return bsearch(&key, m->e, m->n, sizeof(*m->e), cmp_entry);
}

/* A path that is a directory of another one ("a" and "a/b") cannot be written out. Entries are
 * sorted; returns the index of the entry whose path has a file as one of its directories, or -1. */
static long dir_conflict(const struct dlk_manifest *m, size_t *file_idx)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *p = m->e[i].path;
		for (const char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
			char *dir = xstrndup(p, (size_t)(s - p));
			const struct dlk_manifest_entry *f = dlk_manifest_find(m, dir);
			free(dir);
			if (f) {
				*file_idx = (size_t)(f - m->e);
				return (long)i;
			}
		}
	}
	return -1;
}

static int parse_size(const char *s, size_t n, unsigned long long *out)
{
	unsigned long long v = 0;

	if (!n || n > 19 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > (unsigned long long)1 << 62)
		return -1;
	*out = v;
	return 0;
}

int dlk_manifest_parse(const char *buf, size_t len, const char *what, struct dlk_manifest *m, struct dlk_err *err)
{
	struct dlk_manifest r = DLK_MANIFEST_INIT;
	size_t cap = 0, magic = strlen(DLK_MANIFEST_MAGIC), pos, line = 1;
	char why[128];

	if (len > DLK_MANIFEST_MAX_BYTES)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: a manifest of %zu bytes, more than the limit of %u", what, len,
		                DLK_MANIFEST_MAX_BYTES);
	if (len < magic || memcmp(buf, DLK_MANIFEST_MAGIC, magic))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a dataset manifest (it does not start with '%.*s')", what,
		                (int)magic - 1, DLK_MANIFEST_MAGIC);
	for (pos = magic; pos < len;) {
		const char *l = buf + pos, *nl = memchr(l, '\n', len - pos), *sp;
		struct dlk_manifest_entry *e;
		size_t ll;

		line++;
		if (!nl) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: the last line does not end with a newline", what, line);
			goto fail;
		}
		ll = (size_t)(nl - l);
		if (r.n >= DLK_MANIFEST_MAX_FILES) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: more than %d files", what, DLK_MANIFEST_MAX_FILES);
			goto fail;
		}
		if (ll < 64 + 1 + 1 + 1 + 1 || l[64] != ' ') {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: expected '<sha256> <size> <path>'", what, line);
			goto fail;
		}
		for (int i = 0; i < 64; i++)
			if (!((l[i] >= '0' && l[i] <= '9') || (l[i] >= 'a' && l[i] <= 'f'))) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: the sha256 is not 64 lowercase hex digits", what,
				         line);
				goto fail;
			}
		sp = memchr(l + 65, ' ', ll - 65);
		if (cap == r.n) {
			cap = cap ? cap * 2 : 64;
			r.e = xrealloc(r.e, cap * sizeof(*r.e));
		}
		e = &r.e[r.n];
		memset(e, 0, sizeof(*e));
		if (!sp || parse_size(l + 65, (size_t)(sp - (l + 65)), &e->size)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: the size is not a decimal number of bytes", what, line);
			goto fail;
		}
		if (dlk_manifest_check_path(sp + 1, (size_t)(nl - sp - 1), why, sizeof(why))) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: the path has %s", what, line, why);
			goto fail;
		}
		memcpy(e->sha256, l, 64);
		e->sha256[64] = '\0';
		e->path = xstrndup(sp + 1, (size_t)(nl - sp - 1));
		if (memchr(sp + 1, '\0', (size_t)(nl - sp - 1))) {
			free(e->path);
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: the path has a NUL byte", what, line);
			goto fail;
		}
		r.n++;
		if (r.n > 1 && strcmp(r.e[r.n - 2].path, e->path) >= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: line %zu: '%s' is %s", what, line, e->path,
			         strcmp(r.e[r.n - 2].path, e->path) ? "out of order (paths are sorted by their bytes)"
			                                             : "listed twice");
			goto fail;
		}
		if (r.total + e->size < r.total) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: the sizes add up past 2^64", what);
			goto fail;
		}
		r.total += e->size;
		pos = (size_t)(nl - buf) + 1;
	}
	{
		size_t f;
		long c = dir_conflict(&r, &f);
		if (c >= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: '%s' is a file and a directory of '%s'", what, r.e[f].path,
			         r.e[c].path);
			goto fail;
		}
	}
	dlk_sha256_hex(buf, len, r.id);
	*m = r;
	return 0;
fail:
	dlk_manifest_release(&r);
	return -1;
}

char *dlk_manifest_format(const struct dlk_manifest *m, size_t *len)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_adds(&b, DLK_MANIFEST_MAGIC);
	for (size_t i = 0; i < m->n; i++)
		dlk_buf_addf(&b, "%s %llu %s\n", m->e[i].sha256, m->e[i].size, m->e[i].path);
	return dlk_buf_detach(&b, len);
}

/* ---- building from local files ---- */

struct walk {
	struct dlk_manifest *m;
	size_t cap;
	struct dlk_err *err;
};

static int add_file(struct walk *w, const char *name, const char *local, unsigned long long size)
{
	char why[128];
	struct dlk_manifest_entry *e;

	if (dlk_manifest_check_path(name, strlen(name), why, sizeof(why)))
		return dlk_errf(w->err, DLK_EXIT_CONFIG, "'%s': cannot be named in a dataset: the name '%s' has %s", local,
		                name, why);
	if (w->m->n >= DLK_MANIFEST_MAX_FILES)
		return dlk_errf(w->err, DLK_EXIT_CONFIG, "more than %d files: too many for one dataset",
		                DLK_MANIFEST_MAX_FILES);
	if (w->cap == w->m->n) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->m->e = xrealloc(w->m->e, w->cap * sizeof(*w->m->e));
	}
	e = &w->m->e[w->m->n++];
	memset(e, 0, sizeof(*e));
	e->path = xstrdup(name);
	e->local = xstrdup(local);
	e->size = size;
	return 0;
}

static int walk_dir(struct walk *w, const char *dir, const char *prefix, int depth)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > 64)
		return dlk_errf(w->err, DLK_EXIT_CONFIG, "'%s': directories nested more than 64 deep", dir);
	d = opendir(dir);
	if (!d)
		return dlk_errf(w->err, errno == ENOENT ? DLK_EXIT_CONFIG : DLK_EXIT_FAIL, "cannot read directory '%s': %s",
		                dir, strerror(errno));
	while (!rc && (errno = 0, de = readdir(d))) {
		struct stat st;
		char *local, *name;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		local = xasprintf("%s/%s", dir, de->d_name);
		name = *prefix ? xasprintf("%s/%s", prefix, de->d_name) : xstrdup(de->d_name);
		if (lstat(local, &st) < 0) {
			rc = dlk_errf(w->err, DLK_EXIT_FAIL, "cannot read '%s': %s", local, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			rc = walk_dir(w, local, name, depth + 1);
		} else if (S_ISLNK(st.st_mode) && stat(local, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = add_file(w, name, local, (unsigned long long)st.st_size);
		} else if (S_ISREG(st.st_mode)) {
			rc = add_file(w, name, local, (unsigned long long)st.st_size);
		} else {
			rc = dlk_errf(w->err, DLK_EXIT_CONFIG, "'%s' is not a regular file or a directory", local);
			dlk_err_hint(w->err, "a link to a directory is not followed; push that directory itself");
		}
		free(local);
		free(name);
	}
	if (!rc && errno)
		rc = dlk_errf(w->err, DLK_EXIT_FAIL, "cannot read directory '%s': %s", dir, strerror(errno));
	closedir(d);
	return rc;
}

int dlk_manifest_build(const char *const *paths, size_t n, dlk_manifest_progress_fn progress, void *progress_ctx,
                       struct dlk_manifest *m, struct dlk_err *err)
{
	struct dlk_manifest r = DLK_MANIFEST_INIT;
	struct walk w = { &r, 0, err };
	unsigned long long done = 0;
	size_t text_len;
	char *text;

	if (!n)
		return dlk_errf(err, DLK_EXIT_USAGE, "no files to make a dataset of");
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		const char *p = paths[i];
		if (stat(p, &st) < 0) {
			dlk_errf(err, errno == ENOENT ? DLK_EXIT_CONFIG : DLK_EXIT_FAIL, "cannot read '%s': %s", p,
			         strerror(errno));
			goto fail;
		}
		if (S_ISDIR(st.st_mode)) {
			if (walk_dir(&w, p, "", 0))
				goto fail;
		} else if (S_ISREG(st.st_mode)) {
			const char *base = strrchr(p, '/');
			if (add_file(&w, base ? base + 1 : p, p, (unsigned long long)st.st_size))
				goto fail;
		} else {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a regular file or a directory", p);
			goto fail;
		}
	}
	if (!r.n) {
		dlk_errf(err, DLK_EXIT_CONFIG, "no files found in %s%s", paths[0], n > 1 ? " and the others" : "");
		goto fail;
	}
	qsort(r.e, r.n, sizeof(*r.e), cmp_entry);
	for (size_t i = 1; i < r.n; i++)
		if (!strcmp(r.e[i - 1].path, r.e[i].path)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' and '%s' would both be '%s' in the dataset", r.e[i - 1].local,
			         r.e[i].local, r.e[i].path);
			goto fail;
		}
	{
		size_t f;
		long c = dir_conflict(&r, &f);
		if (c >= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' would be both a file ('%s') and a directory of '%s'", r.e[f].path,
			         r.e[f].local, r.e[c].local);
			goto fail;
		}
	}
	for (size_t i = 0; i < r.n; i++)
		r.total += r.e[i].size;
	for (size_t i = 0; i < r.n; i++) {
		struct dlk_manifest_entry *e = &r.e[i];
		struct dlk_sha256 h = DLK_SHA256_INIT;
		unsigned char chunk[1 << 16];
		unsigned long long got = 0;
		size_t k;
		FILE *f = fopen(e->local, "rb");

		if (!f) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", e->local, strerror(errno));
			goto fail;
		}
		dlk_sha256_begin(&h);
		while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0) {
			dlk_sha256_update(&h, chunk, k);
			got += k;
			if (progress && progress(progress_ctx, e->path, done + got, r.total)) {
				fclose(f);
				dlk_sha256_end(&h, e->sha256);
				dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while hashing '%s'", e->local);
				goto fail;
			}
		}
		if (ferror(f)) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", e->local, strerror(errno));
			fclose(f);
			dlk_sha256_end(&h, e->sha256);
			goto fail;
		}
		fclose(f);
		dlk_sha256_end(&h, e->sha256);
		if (got != e->size) {
			/* the manifest would not describe the bytes pushed */
			dlk_errf(err, DLK_EXIT_FAIL, "'%s' changed while it was read (%llu bytes, then %llu)", e->local, e->size,
			         got);
			goto fail;
		}
		done += got;
	}
	text = dlk_manifest_format(&r, &text_len);
	dlk_sha256_hex(text, text_len, r.id);
	free(text);
	*m = r;
	return 0;
fail:
	dlk_manifest_release(&r);
	return -1;
}

/* ---- references ---- */

static int name_part_ok(const char *s, size_t n)
{
	if (!n || n > 128 || !isalnum((unsigned char)s[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return 0;
	return 1;
}

int dlk_dataset_tag_check(const char *s, char *why, size_t why_len)
{
	const char *at = strchr(s, '@');
	size_t nl = at ? (size_t)(at - s) : strlen(s);

	if (!name_part_ok(s, nl))
		return snprintf(why, why_len,
		                "a dataset name is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"),
		       -1;
	if (at && (strchr(at + 1, '@') || !name_part_ok(at + 1, strlen(at + 1))))
		return snprintf(why, why_len,
		                "a tag is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"),
		       -1;
	return 0;
}

int dlk_dataset_ref_parse(const char *ref, int allow_prefix, struct dlk_dataset_ref *out, char *why, size_t why_len)
{
	memset(out, 0, sizeof(*out));
	if (!strncmp(ref, "sha256:", 7)) {
		const char *h = ref + 7;
		size_t n = strlen(h);
		for (size_t i = 0; i < n; i++)
			if (!isxdigit((unsigned char)h[i]))
				return snprintf(why, why_len, "'sha256:' is followed by 64 hex digits"), -1;
		if (n == 64) {
			out->kind = DLK_REF_ID;
		} else if (allow_prefix && n >= 6 && n < 64) {
			out->kind = DLK_REF_ID_PREFIX;
		} else {
			return snprintf(why, why_len,
			                allow_prefix ? "'sha256:' is followed by 64 hex digits (or at least 6 of them)"
			                             : "'sha256:' is followed by 64 hex digits"),
			       -1;
		}
		for (size_t i = 0; i < n; i++)
			out->id[i] = (char)tolower((unsigned char)h[i]);
		out->id[n] = '\0';
		return 0;
	}
	if (allow_prefix && strlen(ref) >= 6 && strlen(ref) <= 64 && strspn(ref, "0123456789abcdef") == strlen(ref)) {
		/* a bare id or prefix, as `data ls` prints it */
		out->kind = strlen(ref) == 64 ? DLK_REF_ID : DLK_REF_ID_PREFIX;
		snprintf(out->id, sizeof(out->id), "%s", ref);
		return 0;
	}
	if (dlk_dataset_tag_check(ref, why, why_len))
		return -1;
	out->kind = DLK_REF_TAG;
	snprintf(out->tag, sizeof(out->tag), strchr(ref, '@') ? "%s" : "%s@latest", ref);
	return 0;
}
