/* Resolving data sources to local files and checking their sha256 pins. */
#include "lib/data/fetch.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

void dlk_fetched_release(struct dlk_fetched *f)
{
	free(f->path);
	f->path = NULL;
	f->sha256[0] = '\0';
}

static int has_prefix(const char *s, const char *p)
{
	return !strncasecmp(s, p, strlen(p));
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

char *dlk_pvc_resolve(const char *url, const char *root, struct dlk_err *err)
{
	const char *claim = url + strlen("pvc://"), *slash, *seg;
	size_t i, claim_len;

	if (!has_prefix(url, "pvc://")) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a pvc:// URL", url);
		return NULL;
	}
	slash = strchr(claim, '/');
	claim_len = slash ? (size_t)(slash - claim) : strlen(claim);
	/* A claim is a Kubernetes object name (DNS-1123 subdomain): lowercase letters, digits,
	 * '-' and '.', so ".." or an empty claim cannot be one. */
	if (claim_len == 0 || claim_len > 253 || !isalnum((unsigned char)claim[0]) ||
	    !isalnum((unsigned char)claim[claim_len - 1])) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the claim name must be a Kubernetes name (pvc://CLAIM/PATH)", url);
		return NULL;
	}
	for (i = 0; i < claim_len; i++)
		if (!(islower((unsigned char)claim[i]) || isdigit((unsigned char)claim[i]) ||
		      claim[i] == '-' || claim[i] == '.')) {
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': the claim name must be a Kubernetes name (lowercase letters, digits, '-', '.')",
			         url);
			return NULL;
		}
	if (!slash || !slash[1]) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': no path inside the claim (pvc://CLAIM/PATH)", url);
		return NULL;
	}
	for (seg = slash + 1; *seg;) {
		size_t n = strcspn(seg, "/");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': '.' and '..' are not allowed in a pvc:// path", url);
			return NULL;
		}
		seg += n;
		while (*seg == '/')
			seg++;
	}
	return xasprintf("%s/%.*s/%s", root ? root : DLK_PVC_ROOT, (int)claim_len, claim, slash + 1);
}

char *dlk_local_path(const char *url, const char *base_dir, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	const char *p;

	if (!has_prefix(url, "file://")) {
		if (!*url) {
			dlk_errf(err, DLK_EXIT_CONFIG, "empty data source path");
			return NULL;
		}
		if (url[0] == '/' || !base_dir || !*base_dir)
			return xstrdup(url);
		/* "./x" in a project in "." is "x", not "././x" (the path messages show) */
		while (url[0] == '.' && url[1] == '/')
			for (url += 2; *url == '/';)
				url++;
		if (!strcmp(base_dir, "."))
			return xstrdup(*url ? url : ".");
		return xasprintf("%s/%s", base_dir, url);
	}
	p = url + strlen("file://");
	if (has_prefix(p, "localhost/"))
		p += strlen("localhost");
	if (*p != '/') {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a file URL needs an absolute path (file:///path)", url);
		return NULL;
	}
	for (; *p; p++) {
		if (*p == '%') {
			int hi = hexval((unsigned char)p[1]), lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				dlk_buf_release(&b);
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': bad percent-escape in the file URL", url);
				return NULL;
			}
			dlk_buf_addc(&b, (char)(hi << 4 | lo));
			p += 2;
		} else {
			dlk_buf_addc(&b, *p);
		}
	}
	return dlk_buf_detach(&b, NULL);
}

char *dlk_cache_path(const char *cache_dir, const char *url)
{
	char hex[65], base[81];
	const char *end = url + strcspn(url, "?#"), *s = end;
	size_t n, i;

	dlk_sha256_hex(url, strlen(url), hex);
	while (s > url && s[-1] != '/')
		s--;
	n = (size_t)(end - s);
	if (n > sizeof(base) - 1)
		n = sizeof(base) - 1;
	/* Keep the basename readable in `ls`, but never let it name another directory. */
	for (i = 0; i < n; i++)
		base[i] = (isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '-' || s[i] == '_') ? s[i] : '_';
	base[n] = '\0';
	return xasprintf("%s/%.16s-%s", cache_dir, hex, n ? base : "data");
}

static int mkdir_p(const char *dir, struct dlk_err *err)
{
	char *d = xstrdup(dir), *p;
	int ret = 0;

	for (p = d + 1; ; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = '\0';
			if (mkdir(d, 0755) < 0 && errno != EEXIST) {
				ret = dlk_errf(err, DLK_EXIT_FAIL, "cannot create the cache directory '%s': %s", d,
				               strerror(errno));
				break;
			}
			*p = c;
			if (!c)
				break;
		}
	}
	free(d);
	return ret;
}

static int pin_check(const char *what, const char *pin, const char *actual, struct dlk_err *err)
{
	if (!pin || !*pin || !strcasecmp(pin, actual))
		return 0;
	dlk_errf(err, DLK_EXIT_CONFIG, "'%s': sha256 mismatch: expected %s, got %s", what, pin, actual);
	return dlk_err_hint(err, "the file changed or the pin is wrong; pins are of the bytes as fetched "
	                         "(a compressed file's pin is of the compressed bytes)");
}

static int check_local(const char *url, const char *path, unsigned long long max_bytes,
                       struct dlk_err *err)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		int missing = errno == ENOENT;
		char cwd[4096];
		dlk_errf(err, missing ? DLK_EXIT_CONFIG : DLK_EXIT_FAIL, "cannot read '%s': %s", url, strerror(errno));
		if (missing && has_prefix(path, DLK_FASHION_MNIST_DIR "/"))
			/* the examples' data: say where it comes from */
			dlk_err_hint(err, "Fashion-MNIST comes with Debian's dataset-fashion-mnist package ('apt install "
			             "dataset-fashion-mnist'), or from github.com/zalandoresearch/fashion-mnist: "
			             "point data.train and data.test at the downloaded files");
		else if (missing && path[0] != '/' && getcwd(cwd, sizeof(cwd)))
			/* relative to the project's directory, which may not be where the user stands */
			dlk_err_hint(err, "it resolves to '%s/%s'", cwd, path);
		else if (missing && strcmp(url, path))
			dlk_err_hint(err, "it resolves to '%s'", path);
		return -1;
	}
	if (!S_ISREG(st.st_mode))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a regular file", url);
	if (max_bytes && (unsigned long long)st.st_size > max_bytes) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is %lld bytes, more than the limit of %llu bytes", url,
		         (long long)st.st_size, max_bytes);
		return dlk_err_hint(err, "raise data.max_bytes if the data really is this large");
	}
	return 0;
}

int dlk_fetch(const struct dlk_source *src, const struct dlk_data *spec,
              const struct dlk_data_opts *opts, struct dlk_fetched *out, struct dlk_err *err)
{
	static const struct dlk_data_opts no_opts;
	unsigned long long max_bytes = spec->max_bytes > 0 ? (unsigned long long)spec->max_bytes : 0;
	const char *url = src->url;
	char *path = NULL, *lock_path = NULL;
	char hex[65];
	int lock_fd = -1, ret = -1;

	if (!opts)
		opts = &no_opts;
	if (!url || !*url)
		return dlk_errf(err, DLK_EXIT_CONFIG, "a data source has no URL");
	if (src->sha256 && *src->sha256 && !dlk_sha256_is_hex(src->sha256))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the sha256 pin '%s' is not 64 hex digits", url,
		                src->sha256);

	if (opts->resolve) {
		char want[65];
		if (opts->resolve(opts->resolve_ctx, url, &path, want, err) < 0)
			goto out;
		if (check_local(url, path, max_bytes, err) < 0)
			goto out;
		if (dlk_sha256_file(path, hex) < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", url, strerror(errno));
			goto out;
		}
		if (strcmp(want, hex)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' (%s): its bytes hash to %s, not to the %s its dataset's manifest lists",
			         url, path, hex, want);
			dlk_err_hint(err, "the copy was changed after it was fetched; remove it to fetch it again");
			goto out;
		}
		goto done;
	}
	if (has_prefix(url, "http://") || has_prefix(url, "https://")) {
		const char *cache_dir = opts->cache_dir ? opts->cache_dir
		                        : spec->cache_dir ? spec->cache_dir : ".dlk/cache";
		if (mkdir_p(cache_dir, err) < 0)
			return -1;
		path = dlk_cache_path(cache_dir, url);
		/* Workers that share a cache directory (a PVC) must not append to the same .part at
		 * once: the first one downloads, the others wait here and then find the file. */
		lock_path = xasprintf("%s.lock", path);
		lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (lock_fd < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", lock_path, strerror(errno));
			goto out;
		}
		while (flock(lock_fd, LOCK_EX) < 0 && errno == EINTR)
			;
		if (access(path, F_OK) == 0) {
			/* A complete cached copy exists (only complete files get this name). Reuse it
			 * unless it fails the pin: then the pin changed or the copy went bad, and one
			 * fresh download settles which. */
			if (check_local(url, path, max_bytes, err) == 0 && dlk_sha256_file(path, hex) == 0 &&
			    !pin_check(url, src->sha256, hex, NULL))
				goto done;
			unlink(path);
		}
		if (dlk_http_download(url, path, max_bytes, opts, err) < 0)
			goto out;
	} else if (has_prefix(url, "pvc://")) {
		path = dlk_pvc_resolve(url, opts->pvc_root, err);
	} else if (strstr(url, "://") && !has_prefix(url, "file://")) {
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': unsupported URL scheme (use https://, http://, file:// or pvc://)", url);
	} else {
		path = dlk_local_path(url, opts->base_dir, err);
	}
	if (!path)
		return -1;
	if (check_local(url, path, max_bytes, err) < 0)
		goto out;
	if (dlk_sha256_file(path, hex) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", url, strerror(errno));
		goto out;
	}
	if (pin_check(url, src->sha256, hex, err) < 0)
		goto out;
done:
	out->path = path;
	memcpy(out->sha256, hex, sizeof(out->sha256));
	path = NULL;
	ret = 0;
out:
	if (lock_fd >= 0)
		close(lock_fd);  /* releases the lock; the lock file stays, harmless and reused */
	free(lock_path);
	free(path);
	return ret;
}
