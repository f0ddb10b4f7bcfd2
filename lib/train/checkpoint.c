#include "lib/train/checkpoint.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"
#include "lib/util/jsonprint.h"

#define MANIFEST "manifest.json"
#define FORMAT "dlk-checkpoint"
#define FORMAT_VERSION 1
#define DEFAULT_MAX_BYTES (16ULL << 30)

static int valid_name(const char *s, size_t len)
{
	if (!len || len > CKPT_NAME_MAX || s[0] == '.')
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return !(len == strlen(MANIFEST) && !memcmp(s, MANIFEST, len));
}

/* "step-" and at least 8 digits; the step is the number. */
static int parse_step_name(const char *name, unsigned long long *step)
{
	size_t n;
	unsigned long long v = 0;

	if (strncmp(name, "step-", 5))
		return 0;
	name += 5;
	n = strlen(name);
	if (n < 8 || n > 12)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (name[i] < '0' || name[i] > '9')
			return 0;
		v = v * 10 + (unsigned long long)(name[i] - '0');
	}
	*step = v;
	return 1;
}

/* Removes a checkpoint-shaped tree (files and, a few levels deep, directories). */
static int rm_tree(const char *path, int depth)
{
	DIR *d;
	struct dirent *e;
	int ret = 0;

	if (depth > 4)
		return -1;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : unlink(path);
	while ((e = readdir(d))) {
		char *p;
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", path, e->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			ret |= rm_tree(p, depth + 1);
		else if (unlink(p) && errno != ENOENT)
			ret = -1;
		free(p);
	}
	closedir(d);
	if (rmdir(path) && errno != ENOENT)
		ret = -1;
	return ret;
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static int is_space_error(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EFBIG;
}

/* Writes one file completely and fsyncs it; on failure errno says why. */
#define FILL_PIECE ((size_t)4 << 20) /* bytes a blob's fill gives at a time */

/* Writes blob bi's bytes (b->data, or o->fill's pieces) into a new file, fsynced, and their
 * sha256 into hex. -1 with errno; a fill that failed: -1 with *filled set and err. */
static int write_file(const char *path, const struct ckpt_blob *b, size_t bi, const struct ckpt_write_opts *o,
                      char hex[DLK_SHA256_HEX_LEN + 1], int *filled, struct dlk_err *err)
{
	const char *p = b->data;
	size_t len = b->len;
	char *piece = b->data ? NULL : xmalloc(FILL_PIECE);
	struct dlk_sha256 h = DLK_SHA256_INIT;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), e;

	if (fd < 0) {
		free(piece);
		return -1;
	}
	dlk_sha256_begin(&h);
	while (len) {
		size_t chunk = len > (64u << 20) ? (64u << 20) : len;
		if (piece) {
			chunk = len < FILL_PIECE ? len : FILL_PIECE;
			if (o->fill(o->fill_ctx, bi, piece, chunk, err)) {
				*filled = 1;
				goto fail;
			}
			p = piece;
		}
		dlk_sha256_update(&h, p, chunk);
		for (size_t left = chunk; left;) {
			ssize_t w = o->write_fn ? o->write_fn(fd, p, left, o->write_ctx) : write(fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				if (w == 0)
					errno = ENOSPC; /* no progress on a regular file: treat as full */
				goto fail;
			}
			p += w;
			left -= (size_t)w;
		}
		len -= chunk;
	}
	free(piece);
	dlk_sha256_end(&h, hex);
	if (fsync(fd))
		goto fail_hashed;
	if (close(fd))
		return -1;
	return 0;
fail:
	e = errno;
	free(piece);
	dlk_sha256_end(&h, hex); /* releases the digest's context; the value is not used */
	errno = e;
fail_hashed:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

static int cmp_desc(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_list(const char *dir, unsigned long long **steps, size_t *n, struct dlk_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t cap = 0;

	*steps = NULL;
	*n = 0;
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot open checkpoint directory '%s': %s", dir, strerror(errno));
	}
	while ((e = readdir(d))) {
		unsigned long long s;
		if (!parse_step_name(e->d_name, &s))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*steps = xrealloc(*steps, cap * sizeof(**steps));
		}
		(*steps)[(*n)++] = s;
	}
	closedir(d);
	if (*n)
		qsort(*steps, *n, sizeof(**steps), cmp_desc);
	return 0;
}

/* Removes leftovers of interrupted writes: .tmp-* entries. Only the writer calls this. */
static void clean_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strncmp(e->d_name, ".tmp-", 5)) {
			char *p = xasprintf("%s/%s", dir, e->d_name);
			rm_tree(p, 0);
			free(p);
		}
	}
	closedir(d);
}

/* hex[i]: blob i's sha256, computed as it was written */
static char *manifest_json(unsigned long long step, const struct ckpt_blob *blobs, size_t n,
                           char (*hex)[DLK_SHA256_HEX_LEN + 1])
{
	cJSON *root = cJSON_CreateObject(), *arr;
	char *s, *out;

	cJSON_AddStringToObject(root, "format", FORMAT);
	cJSON_AddNumberToObject(root, "version", FORMAT_VERSION);
	cJSON_AddNumberToObject(root, "step", (double)step);
	arr = cJSON_AddArrayToObject(root, "blobs");
	for (size_t i = 0; i < n; i++) {
		cJSON *b = cJSON_CreateObject();

		cJSON_AddStringToObject(b, "name", blobs[i].name);
		cJSON_AddNumberToObject(b, "size", (double)blobs[i].len);
		cJSON_AddStringToObject(b, "sha256", hex[i]);
		cJSON_AddItemToArray(arr, b);
	}
	s = dlk_json_print(root);
	cJSON_Delete(root);
	if (!s)
		abort(); /* cJSON only fails on allocation: fatal, as everywhere in dlk */
	out = xasprintf("%s\n", s);
	free(s);
	return out;
}

int ckpt_write_atomic(const char *dir, unsigned long long step, const struct ckpt_blob *blobs,
		      size_t n, const struct ckpt_write_opts *opts, struct dlk_err *err)
{
	struct ckpt_write_opts o = CKPT_WRITE_OPTS_INIT;
	char *tmp = NULL, *final = NULL, *old = NULL, *file = NULL, *manifest = NULL;
	char (*hex)[DLK_SHA256_HEX_LEN + 1] = NULL;
	struct ckpt_blob mblob;
	int mfilled = 0;
	unsigned long long *steps = NULL;
	size_t nsteps = 0;
	const char *doing = NULL;
	int ret = -1, e;
	struct stat st;

	if (opts)
		o = *opts;
	if (o.keep < 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint: keep must be at least 1, not %d", o.keep);
	if (step > CKPT_STEP_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint: step %llu is too large", step);
	if (n > CKPT_BLOBS_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint: %zu blobs is more than %d", n, CKPT_BLOBS_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!blobs[i].name || !valid_name(blobs[i].name, strlen(blobs[i].name)))
			return dlk_errf(err, DLK_EXIT_CONFIG,
					"checkpoint: invalid blob name '%.80s' (1-64 of A-Z a-z 0-9 . _ -, not starting with '.')",
					blobs[i].name ? blobs[i].name : "(null)");
		if (!blobs[i].data && !o.fill && blobs[i].len)
			return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint: blob '%s' has no data", blobs[i].name);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(blobs[i].name, blobs[j].name))
				return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint: blob '%s' given twice", blobs[i].name);
	}
	if (mkdir(dir, 0755) == 0) {
		/* a new directory is durable only once its parent is synced */
		char *parent = xstrdup(dir), *slash = strrchr(parent, '/');
		if (slash && slash != parent)
			*slash = '\0';
		else if (slash)
			slash[1] = '\0';
		fsync_dir(slash ? parent : ".");
		free(parent);
	} else if (errno != EEXIST) {
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot create checkpoint directory '%s': %s", dir, strerror(errno));
	}
	clean_tmp(dir);

	final = xasprintf("%s/step-%08llu", dir, step);
	tmp = xasprintf("%s/.tmp-step-%08llu-%ld", dir, step, (long)getpid());
	if (mkdir(tmp, 0755)) {
		doing = "creating";
		file = xstrdup(tmp);
		goto io_fail;
	}
	hex = xcalloc(n + 1, sizeof(*hex));
	for (size_t i = 0; i < n; i++) {
		int filled = 0;
		free(file);
		file = xasprintf("%s/%s", tmp, blobs[i].name);
		if (write_file(file, &blobs[i], i, &o, hex[i], &filled, err)) {
			if (filled) {
				rm_tree(tmp, 0);
				goto out;
			}
			doing = "writing";
			goto io_fail;
		}
	}
	manifest = manifest_json(step, blobs, n, hex);
	free(file);
	file = xasprintf("%s/%s", tmp, MANIFEST);
	mblob = (struct ckpt_blob){ MANIFEST, manifest, strlen(manifest) };
	if (write_file(file, &mblob, n, &o, hex[n], &mfilled, err)) {
		doing = "writing";
		goto io_fail;
	}
	if (fsync_dir(tmp)) {
		doing = "syncing";
		goto io_fail;
	}
	if (stat(final, &st) == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
		/* Same step written again (a restarted run): swapped atomically; the old one
		 * now sits under the temporary name. */
		old = tmp;
		tmp = NULL;
	} else if (stat(final, &st) == 0) {
		/* No RENAME_EXCHANGE on this filesystem: move the old one aside first, because
		 * rename(2) cannot replace a non-empty directory. A crash between the two
		 * renames loses this step only; older checkpoints stay. */
		old = xasprintf("%s/.tmp-old-step-%08llu-%ld", dir, step, (long)getpid());
		if (rename(final, old)) {
			doing = "replacing";
			free(file);
			file = xstrdup(final);
			goto io_fail;
		}
	}
	if (tmp && rename(tmp, final)) {
		doing = "renaming";
		free(file);
		file = xstrdup(tmp);
		if (old)
			rename(old, final);
		goto io_fail;
	}
	if (fsync_dir(dir)) {
		doing = "syncing";
		free(file);
		file = xstrdup(dir);
		goto io_fail_committed;
	}
	if (old)
		rm_tree(old, 0);

	/* Prune: the newest `keep` stay. Renaming first makes each removal atomic for readers. */
	if (ckpt_list(dir, &steps, &nsteps, err))
		goto out;
	for (size_t i = (size_t)o.keep; i < nsteps; i++) {
		char *p = xasprintf("%s/step-%08llu", dir, steps[i]);
		char *t = xasprintf("%s/.tmp-del-step-%08llu", dir, steps[i]);
		if (rename(p, t) == 0)
			rm_tree(t, 0);
		free(p);
		free(t);
	}
	fsync_dir(dir);
	ret = 0;
	goto out;

io_fail:
	e = errno;
	if (tmp)
		rm_tree(tmp, 0);
	errno = e;
io_fail_committed:
	e = errno;
	dlk_errf(err, DLK_EXIT_FAIL, "checkpoint '%s': %s '%s': %s", final, doing, file, strerror(e));
	if (is_space_error(e))
		dlk_err_hint(err, "free space on the checkpoint volume (or lower keep); the previous checkpoint is intact");
out:
	free(tmp);
	free(final);
	free(old);
	free(file);
	free(manifest);
	free(hex);
	free(steps);
	return ret;
}

void ckpt_manifest_release(struct ckpt_manifest *m)
{
	free(m->blobs);
	m->blobs = NULL;
	m->n = 0;
}

static int whole_number(const cJSON *v, double max, unsigned long long *out)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble > max || floor(v->valuedouble) != v->valuedouble)
		return 0;
	*out = (unsigned long long)v->valuedouble;
	return 1;
}

int ckpt_manifest_parse(const char *data, size_t len, struct ckpt_manifest *m, struct dlk_err *err)
{
	cJSON *root = NULL, *v, *arr, *b;
	int ret = -1, i = 0;

	*m = (struct ckpt_manifest)CKPT_MANIFEST_INIT;
	if (len > CKPT_MANIFEST_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "manifest is larger than %u bytes", CKPT_MANIFEST_MAX);
	root = cJSON_ParseWithLength(data, len);
	if (!root || !cJSON_IsObject(root)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "manifest is not a JSON object");
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "format");
	if (!cJSON_IsString(v) || strcmp(v->valuestring, FORMAT)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "manifest: 'format' is not '%s'", FORMAT);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "version");
	if (!cJSON_IsNumber(v) || v->valuedouble != FORMAT_VERSION) {
		dlk_errf(err, DLK_EXIT_CONFIG, "manifest: unsupported 'version' (this dlk reads version %d)", FORMAT_VERSION);
		goto out;
	}
	if (!whole_number(cJSON_GetObjectItemCaseSensitive(root, "step"), (double)CKPT_STEP_MAX, &m->step)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "manifest: 'step' is not a whole number from 0 to %llu", CKPT_STEP_MAX);
		goto out;
	}
	arr = cJSON_GetObjectItemCaseSensitive(root, "blobs");
	if (!cJSON_IsArray(arr)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "manifest: 'blobs' is not an array");
		goto out;
	}
	if (cJSON_GetArraySize(arr) > CKPT_BLOBS_MAX) {
		dlk_errf(err, DLK_EXIT_CONFIG, "manifest: more than %d blobs", CKPT_BLOBS_MAX);
		goto out;
	}
	m->blobs = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*m->blobs));
	cJSON_ArrayForEach(b, arr) {
		struct ckpt_manifest_entry *en = &m->blobs[m->n];
		cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "name");
		cJSON *sha = cJSON_GetObjectItemCaseSensitive(b, "sha256");

		if (!cJSON_IsObject(b) || !cJSON_IsString(name) ||
		    !valid_name(name->valuestring, strlen(name->valuestring))) {
			dlk_errf(err, DLK_EXIT_CONFIG, "manifest: blobs[%d]: missing or invalid 'name'", i);
			goto out;
		}
		snprintf(en->name, sizeof(en->name), "%s", name->valuestring);
		if (!whole_number(cJSON_GetObjectItemCaseSensitive(b, "size"), 9007199254740992.0, &en->size)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "manifest: blob '%s': 'size' is not a whole number", en->name);
			goto out;
		}
		if (!cJSON_IsString(sha) || !dlk_sha256_is_hex(sha->valuestring)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "manifest: blob '%s': 'sha256' is not 64 hex digits", en->name);
			goto out;
		}
		for (int k = 0; k < 64; k++)
			en->sha256[k] = (char)(sha->valuestring[k] | 0x20); /* lowercase */
		en->sha256[64] = '\0';
		for (size_t j = 0; j < m->n; j++)
			if (!strcmp(m->blobs[j].name, en->name)) {
				dlk_errf(err, DLK_EXIT_CONFIG, "manifest: blob '%s' listed twice", en->name);
				goto out;
			}
		m->n++;
		i++;
	}
	ret = 0;
out:
	cJSON_Delete(root);
	if (ret)
		ckpt_manifest_release(m);
	return ret;
}

/* Reads exactly `size` bytes of path into a new buffer, checking its sha256. */
static int read_blob(const char *path, const struct ckpt_manifest_entry *en, void **out,
		     char *why, size_t why_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf = NULL, hex[DLK_SHA256_HEX_LEN + 1];
	size_t got = 0;

	if (fd < 0) {
		snprintf(why, why_len, "blob '%s': %s", en->name, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (unsigned long long)st.st_size != en->size) {
		snprintf(why, why_len, "blob '%s' has %lld bytes, the manifest says %llu", en->name,
			 (long long)st.st_size, en->size);
		goto fail;
	}
	buf = xmalloc((size_t)en->size + 1);
	while (got < en->size) {
		ssize_t r = read(fd, buf + got, (size_t)en->size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(why, why_len, "blob '%s': %s", en->name, r ? strerror(errno) : "truncated");
			goto fail;
		}
		got += (size_t)r;
	}
	buf[got] = '\0';
	dlk_sha256_hex(buf, got, hex);
	if (strcmp(hex, en->sha256)) {
		snprintf(why, why_len, "blob '%s' does not match its sha256 (corrupted)", en->name);
		goto fail;
	}
	close(fd);
	*out = buf;
	return 0;
fail:
	free(buf);
	close(fd);
	return -1;
}

static void free_blobs(struct ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->blobs[i].name);
		free(c->blobs[i].data);
	}
	free(c->blobs);
	c->blobs = NULL;
	c->n = 0;
}

/* Verifies and loads one checkpoint directory; on failure why says what is wrong. */
static int load_one(const char *path, unsigned long long step, size_t max_bytes, struct ckpt *c,
		    char *why, size_t why_len)
{
	struct dlk_buf mb = DLK_BUF_INIT;
	struct ckpt_manifest m = CKPT_MANIFEST_INIT;
	struct dlk_err perr = DLK_ERR_INIT;
	char *mp = xasprintf("%s/%s", path, MANIFEST), emsg[512];
	unsigned long long total = 0;
	int ret = -1;

	if (dlk_buf_read_file(&mb, mp, CKPT_MANIFEST_MAX, emsg, sizeof(emsg))) {
		snprintf(why, why_len, "%s", emsg);
		goto out;
	}
	if (ckpt_manifest_parse(mb.data, mb.len, &m, &perr)) {
		snprintf(why, why_len, "%.900s", perr.msg);
		goto out;
	}
	if (m.step != step) {
		snprintf(why, why_len, "manifest says step %llu", m.step);
		goto out;
	}
	for (size_t i = 0; i < m.n; i++)
		total += m.blobs[i].size;
	if (total > max_bytes) {
		snprintf(why, why_len, "blobs total %llu bytes, over the limit of %zu", total, max_bytes);
		goto out;
	}
	c->blobs = xcalloc(m.n + 1, sizeof(*c->blobs));
	for (size_t i = 0; i < m.n; i++) {
		char *bp = xasprintf("%s/%s", path, m.blobs[i].name);
		void *data;
		int rc = read_blob(bp, &m.blobs[i], &data, why, why_len);

		free(bp);
		if (rc) {
			free_blobs(c);
			goto out;
		}
		c->blobs[c->n].name = xstrdup(m.blobs[i].name);
		c->blobs[c->n].data = data;
		c->blobs[c->n].len = (size_t)m.blobs[i].size;
		c->n++;
	}
	c->step = step;
	c->path = xstrdup(path);
	ret = 0;
out:
	free(mp);
	dlk_buf_release(&mb);
	ckpt_manifest_release(&m);
	return ret;
}

int ckpt_load_latest(const char *dir, size_t max_bytes, struct ckpt *c, struct dlk_err *err)
{
	unsigned long long *steps = NULL;
	size_t n = 0;
	int ret = 0;

	*c = (struct ckpt)CKPT_INIT;
	if (!max_bytes)
		max_bytes = (size_t)DEFAULT_MAX_BYTES;
	if (ckpt_list(dir, &steps, &n, err))
		return -1;
	for (size_t i = 0; i < n; i++) {
		char *path = xasprintf("%s/step-%08llu", dir, steps[i]), why[1024];

		if (load_one(path, steps[i], max_bytes, c, why, sizeof(why)) == 0) {
			free(path);
			ret = 1;
			break;
		}
		c->warnings = xrealloc(c->warnings, (c->nwarnings + 1) * sizeof(char *));
		c->warnings[c->nwarnings++] = xasprintf("checkpoint '%s' skipped: %s", path, why);
		free(path);
	}
	free(steps);
	return ret;
}

const void *ckpt_get(const struct ckpt *c, const char *name, size_t *len)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->blobs[i].name, name)) {
			if (len)
				*len = c->blobs[i].len;
			return c->blobs[i].data;
		}
	return NULL;
}

void ckpt_release(struct ckpt *c)
{
	free_blobs(c);
	for (size_t i = 0; i < c->nwarnings; i++)
		free(c->warnings[i]);
	free(c->warnings);
	free(c->path);
	*c = (struct ckpt)CKPT_INIT;
}
