#include "lib/project/check.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int why_f(char *why, size_t len, const char *msg)
{
	snprintf(why, len, "%s", msg);
	return -1;
}

static int is_lower_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_alnum(int c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* ---- names ---- */

int check_dns_label(const char *s, size_t max, char *why, size_t why_len)
{
	size_t n = strlen(s);

	if (!n)
		return why_f(why, why_len, "must not be empty");
	if (n > max) {
		snprintf(why, why_len, "must be at most %zu characters (it has %zu)", max, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return why_f(why, why_len,
			             "must consist of lowercase letters, digits and '-' (a DNS-1123 label)");
	if (s[0] == '-' || s[n - 1] == '-')
		return why_f(why, why_len, "must start and end with a lowercase letter or digit");
	return 0;
}

int check_dns_subdomain(const char *s, char *why, size_t why_len)
{
	size_t n = strlen(s);
	const char *p = s;

	if (!n)
		return why_f(why, why_len, "must not be empty");
	if (n > 253)
		return why_f(why, why_len, "must be at most 253 characters");
	for (;;) {
		size_t l = strcspn(p, ".");
		if (!l || !is_lower_alnum(p[0]) || !is_lower_alnum(p[l - 1]))
			return why_f(why, why_len,
			             "must be lowercase letters, digits, '-' and '.', starting and ending "
			             "with a letter or digit (a DNS-1123 subdomain)");
		for (size_t i = 0; i < l; i++)
			if (!is_lower_alnum(p[i]) && p[i] != '-')
				return why_f(why, why_len,
				             "must be lowercase letters, digits, '-' and '.' (a DNS-1123 subdomain)");
		if (!p[l])
			return 0;
		p += l + 1;
	}
}

/* The "qualified name" part shared by label keys and values. */
static int check_label_name(const char *s, size_t n, const char *what, char *why, size_t why_len)
{
	if (n > 63) {
		snprintf(why, why_len, "%s must be at most 63 characters", what);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') {
			snprintf(why, why_len, "%s may only contain letters, digits, '-', '_' and '.'", what);
			return -1;
		}
	if (n && (!is_alnum(s[0]) || !is_alnum(s[n - 1]))) {
		snprintf(why, why_len, "%s must start and end with a letter or digit", what);
		return -1;
	}
	return 0;
}

int check_label_key(const char *s, char *why, size_t why_len)
{
	const char *slash = strchr(s, '/');
	const char *name = slash ? slash + 1 : s;

	if (slash) {
		char prefix[256];
		size_t pl = (size_t)(slash - s);
		if (!pl || pl > 253)
			return why_f(why, why_len, "the prefix before '/' must be 1 to 253 characters");
		memcpy(prefix, s, pl);
		prefix[pl] = '\0';
		if (check_dns_subdomain(prefix, why, why_len)) {
			char inner[200];
			snprintf(inner, sizeof(inner), "%s", why);
			snprintf(why, why_len, "the prefix %s", inner);
			return -1;
		}
	}
	if (!*name)
		return why_f(why, why_len, "the name part must not be empty");
	return check_label_name(name, strlen(name), "the name part", why, why_len);
}

int check_gateway_ref(const char *s, char *why, size_t why_len)
{
	const char *slash = strchr(s, '/');
	char ns[254];

	if (!slash)
		return check_dns_subdomain(s, why, why_len);
	if ((size_t)(slash - s) >= sizeof(ns) || strchr(slash + 1, '/'))
		return why_f(why, why_len, "must be NAME or NAMESPACE/NAME");
	memcpy(ns, s, (size_t)(slash - s));
	ns[slash - s] = '\0';
	if (check_dns_subdomain(ns, why, why_len) || check_dns_subdomain(slash + 1, why, why_len))
		return why_f(why, why_len, "must be NAME or NAMESPACE/NAME, each a DNS-1123 name");
	return 0;
}

int check_label_value(const char *s, char *why, size_t why_len)
{
	return check_label_name(s, strlen(s), "a label value", why, why_len);
}

/* ---- quantities ---- */

/* Splits a quantity into its number and multiplier. Returns 0 or -1. */
static int quantity_parse(const char *s, long double *num, long double *mult, char *why, size_t why_len)
{
	static const struct { const char *suffix; long double mult; } suffixes[] = {
		{ "Ki", 1024.0L }, { "Mi", 1048576.0L }, { "Gi", 1073741824.0L },
		{ "Ti", 1099511627776.0L }, { "Pi", 1125899906842624.0L }, { "Ei", 1152921504606846976.0L },
		{ "n", 1e-9L }, { "u", 1e-6L }, { "m", 1e-3L }, { "", 1.0L }, { "k", 1e3L },
		{ "M", 1e6L }, { "G", 1e9L }, { "T", 1e12L }, { "P", 1e15L }, { "E", 1e18L },
	};
	const char *p = s;
	int digits = 0;
	char *end;

	if (strlen(s) > 64)
		return why_f(why, why_len, "is too long for a quantity");
	if (*p == '-')
		return why_f(why, why_len, "must not be negative");
	if (*p == '+')
		p++;
	const char *num_start = p;
	while (isdigit((unsigned char)*p))
		p++, digits++;
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p))
			p++, digits++;
	}
	if (!digits)
		return why_f(why, why_len, "is not a quantity (like 500m, 2, 1.5, 512Mi, 4Gi, 1G)");
	{
		/* only the digits: strtold would also eat an exponent that is the suffix's business */
		char digits_only[80];
		size_t dl = (size_t)(p - num_start);
		memcpy(digits_only, num_start, dl);
		digits_only[dl] = '\0';
		*num = strtold(digits_only, &end);
	}
	if (*p == 'e' || *p == 'E') {
		const char *q = p + 1;
		if (*q == '+' || *q == '-')
			q++;
		if (isdigit((unsigned char)*q)) {
			long exp;
			while (isdigit((unsigned char)*q))
				q++;
			if (*q)
				return why_f(why, why_len, "has characters after the exponent");
			exp = strtol(p + 1, NULL, 10);
			if (exp > 30 || exp < -30)
				return why_f(why, why_len, "has an exponent out of range");
			*mult = powl(10.0L, (long double)exp);
			return 0;
		}
		/* a lone "E" is the exa suffix, handled below */
	}
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (!strcmp(p, suffixes[i].suffix)) {
			*mult = suffixes[i].mult;
			return 0;
		}
	snprintf(why, why_len, "has an unknown suffix '%.16s' (use Ki Mi Gi Ti Pi Ei, or n u m k M G T P E)", p);
	return -1;
}

int check_quantity(const char *s, char *why, size_t why_len)
{
	long double num, mult;
	return quantity_parse(s, &num, &mult, why, why_len);
}

int parse_bytes(const char *s, long long *out, char *why, size_t why_len)
{
	long double num, mult, v;

	if (quantity_parse(s, &num, &mult, why, why_len))
		return -1;
	v = num * mult;
	if (v != floorl(v))
		return why_f(why, why_len, "is not a whole number of bytes");
	if (v < 1)
		return why_f(why, why_len, "must be at least 1 byte");
	if (v > (long double)LLONG_MAX / 2)
		return why_f(why, why_len, "is too large");
	*out = (long long)v;
	return 0;
}

/* ---- cron ---- */

static const char *const month_names[] = { "JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                           "JUL", "AUG", "SEP", "OCT", "NOV", "DEC" };
static const char *const dow_names[] = { "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT" };

struct cron_field {
	const char *name;
	int min, max;
	const char *const *names; /* names[i] means min + i */
	int n_names;
	int allow_any;
};

static int cron_value(const char *s, size_t len, const struct cron_field *f, int *v)
{
	char buf[16];

	if (!len || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (strspn(buf, "0123456789") == len) {
		if (len > 3)
			return -1;
		*v = atoi(buf);
		return *v < f->min || *v > f->max ? -1 : 0;
	}
	for (int i = 0; i < f->n_names; i++)
		if (!strcasecmp(buf, f->names[i])) {
			*v = f->min + i;
			return 0;
		}
	return -1;
}

static int cron_check_field(const char *s, size_t len, const struct cron_field *f, char *why, size_t why_len)
{
	size_t i = 0;

	while (i <= len) {
		size_t j = i;
		while (j < len && s[j] != ',')
			j++;
		const char *item = s + i;
		size_t il = j - i;
		const char *slash = memchr(item, '/', il);
		size_t bl = slash ? (size_t)(slash - item) : il;
		int a, b;

		if (!il)
			goto bad;
		if (bl == 1 && (item[0] == '*' || (item[0] == '?' && f->allow_any))) {
			/* every value ('?' is cron's "no specific value" for the day fields) */
		} else {
			const char *dash = memchr(item, '-', bl);
			if (dash) {
				if (cron_value(item, (size_t)(dash - item), f, &a) ||
				    cron_value(dash + 1, bl - (size_t)(dash - item) - 1, f, &b))
					goto bad;
				if (a > b) {
					snprintf(why, why_len, "%s range '%.*s' runs backwards", f->name, (int)bl, item);
					return -1;
				}
			} else if (cron_value(item, bl, f, &a)) {
				goto bad;
			}
		}
		if (slash) {
			size_t sl = il - bl - 1;
			if (!sl || sl > 3 || strspn(slash + 1, "0123456789") < sl || atoi(slash + 1) < 1 ||
			    atoi(slash + 1) > f->max) {
				snprintf(why, why_len, "%s step in '%.*s' must be a number from 1 to %d", f->name,
				         (int)il, item, f->max);
				return -1;
			}
		}
		i = j + 1;
		continue;
bad:
		snprintf(why, why_len, "%s field '%.*s' is not valid (values %d-%d%s)", f->name, (int)(il ? il : len),
		         il ? item : s, f->min, f->max,
		         f->names == month_names ? " or JAN-DEC" : f->names == dow_names ? " or SUN-SAT" : "");
		return -1;
	}
	return 0;
}

int check_cron(const char *s, char *why, size_t why_len)
{
	static const char *const macros[] = { "@yearly", "@annually", "@monthly", "@weekly",
	                                      "@daily", "@midnight", "@hourly" };
	static const struct cron_field fields[] = {
		{ "minute", 0, 59, NULL, 0, 0 },
		{ "hour", 0, 23, NULL, 0, 0 },
		{ "day of month", 1, 31, NULL, 0, 1 },
		{ "month", 1, 12, month_names, 12, 0 },
		{ "day of week", 0, 7, dow_names, 7, 1 },
	};
	const char *p = s;
	int n = 0;

	if (*s == '@') {
		for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
			if (!strcmp(s, macros[i]))
				return 0;
		return why_f(why, why_len,
		             "unknown schedule macro (use @yearly, @monthly, @weekly, @daily or @hourly)");
	}
	if (strlen(s) > 256)
		return why_f(why, why_len, "is too long for a cron schedule");
	while (*p) {
		size_t l;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		l = strcspn(p, " \t");
		if (n < 5 && cron_check_field(p, l, &fields[n], why, why_len))
			return -1;
		n++;
		p += l;
	}
	if (n != 5) {
		snprintf(why, why_len,
		         "must have 5 fields (minute hour day-of-month month day-of-week), it has %d", n);
		return -1;
	}
	return 0;
}

/* ---- images ---- */

static int check_path_component(const char *s, size_t n)
{
	size_t i = 0;

	if (!n || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return -1;
	while (i < n) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && !is_lower_alnum(s[j]))
			j++;
		/* a separator: ".", "_", "__" or a run of "-" */
		size_t sl = j - i;
		if (!((sl == 1 && (s[i] == '.' || s[i] == '_')) || (sl == 2 && s[i] == '_' && s[i + 1] == '_') ||
		      strspn(s + i, "-") >= sl))
			return -1;
		i = j;
	}
	return 0;
}

static int check_registry(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && s[i] != ':') {
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '.')
			return -1;
		i++;
	}
	if (!i || s[0] == '.' || s[0] == '-' || s[i - 1] == '.' || s[i - 1] == '-')
		return -1;
	if (i < n) {
		size_t pl = n - i - 1;
		if (!pl || pl > 5)
			return -1;
		for (size_t k = i + 1; k < n; k++)
			if (!isdigit((unsigned char)s[k]))
				return -1;
	}
	return 0;
}

int check_image(const char *s, char *why, size_t why_len)
{
	size_t n = strlen(s), name_len;
	const char *at = strchr(s, '@');
	const char *last_slash, *colon;

	if (!n)
		return why_f(why, why_len, "must not be empty");
	if (n > 512)
		return why_f(why, why_len, "is too long for an image reference");
	if (at) {
		const char *d = at + 1, *dc = strchr(d, ':');
		size_t hl;
		if (!dc || dc == d)
			return why_f(why, why_len, "has a digest that is not 'algorithm:hex' (like sha256:...)");
		for (const char *q = d; q < dc; q++)
			if (!is_lower_alnum(*q) && !strchr("+._-", *q))
				return why_f(why, why_len, "has an invalid digest algorithm");
		hl = strlen(dc + 1);
		if (hl < 32 || strspn(dc + 1, "0123456789abcdef") != hl)
			return why_f(why, why_len, "has a digest that is not lowercase hex");
		if (!strncmp(d, "sha256:", 7) && hl != 64)
			return why_f(why, why_len, "has a sha256 digest that is not 64 hex digits");
		n = (size_t)(at - s);
	}
	last_slash = memrchr(s, '/', n);
	colon = memrchr(last_slash ? last_slash : s, ':', n - (size_t)((last_slash ? last_slash : s) - s));
	name_len = colon ? (size_t)(colon - s) : n;
	if (colon) {
		size_t tl = n - name_len - 1;
		const char *t = colon + 1;
		if (!tl || tl > 128)
			return why_f(why, why_len, "has a tag that is empty or longer than 128 characters");
		if (!is_alnum(t[0]) && t[0] != '_')
			return why_f(why, why_len, "has a tag that does not start with a letter, digit or '_'");
		for (size_t i = 0; i < tl; i++)
			if (!is_alnum(t[i]) && !strchr("_.-", t[i]))
				return why_f(why, why_len, "has a tag with characters other than letters, digits, '_', '.' and '-'");
	}
	if (!name_len)
		return why_f(why, why_len, "has no repository name");
	if (name_len > 255)
		return why_f(why, why_len, "has a name longer than 255 characters");
	size_t i = 0;
	int first = 1;
	while (i <= name_len) {
		const char *c = s + i;
		size_t cl = 0;
		while (i + cl < name_len && s[i + cl] != '/')
			cl++;
		int has_more = i + cl < name_len;
		/* docker's rule: a first component with '.' or ':', or "localhost", is a registry */
		if (first && has_more && (memchr(c, '.', cl) || memchr(c, ':', cl) ||
		                          (cl == 9 && !memcmp(c, "localhost", 9)))) {
			if (check_registry(c, cl))
				return why_f(why, why_len, "has an invalid registry host (like registry.example.com:5000)");
		} else if (check_path_component(c, cl)) {
			return why_f(why, why_len,
			             "has an invalid repository name: path components are lowercase letters and "
			             "digits separated by '.', '_', '__' or '-'");
		}
		first = 0;
		i += cl + 1;
	}
	return 0;
}

/* ---- data sources ---- */

int check_store_url(const char *s, char *why, size_t why_len)
{
	const char *sep = strstr(s, "://");
	size_t n = strlen(s);

	if (!n)
		return why_f(why, why_len, "must not be empty");
	if (n > 1024)
		return why_f(why, why_len, "is longer than 1024 characters");
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
			return why_f(why, why_len, "contains a control character or a backslash");
	if (!sep)
		return 0; /* a directory */
	size_t sl = (size_t)(sep - s);
	const char *rest = sep + 3;
	if (sl == 4 && !strncmp(s, "file", 4)) {
		if (rest[0] != '/' || !rest[1])
			return why_f(why, why_len, "a file URL needs an absolute path (file:///path/to/store)");
		return 0;
	}
	if (sl == 2 && !strncmp(s, "s3", 2)) {
		size_t bl = strcspn(rest, "/");
		if (bl < 3 || bl > 63)
			return why_f(why, why_len, "is not s3://BUCKET[/PREFIX] with a bucket name of 3 to 63 characters");
		for (size_t i = 0; i < bl; i++)
			if (!(islower((unsigned char)rest[i]) || isdigit((unsigned char)rest[i]) || rest[i] == '-' ||
			      rest[i] == '.'))
				return why_f(why, why_len, "has a bucket name with other characters than lowercase letters, "
				                           "digits, '-' and '.'");
		if (memchr(rest, '@', bl))
			return why_f(why, why_len, "carries credentials, which never go in the project file");
		return 0;
	}
	if (sl == 3 && !strncmp(s, "pvc", 3)) {
		char claim[254], inner[200];
		size_t cl = strcspn(rest, "/");
		if (!cl || cl > 253)
			return why_f(why, why_len, "is not pvc://CLAIM[/PATH]");
		memcpy(claim, rest, cl);
		claim[cl] = '\0';
		if (check_dns_subdomain(claim, inner, sizeof(inner))) {
			snprintf(why, why_len, "has a claim name that %s", inner);
			return -1;
		}
		for (const char *seg = rest + cl; *seg;) {
			size_t k;
			while (*seg == '/')
				seg++;
			k = strcspn(seg, "/");
			if ((k == 1 && seg[0] == '.') || (k == 2 && !strncmp(seg, "..", 2)))
				return why_f(why, why_len, "has a '.' or '..' segment");
			seg += k;
		}
		return 0;
	}
	snprintf(why, why_len, "has an unsupported scheme '%.*s' (use a directory, file://, s3:// or pvc://)",
	         (int)(sl > 20 ? 20 : sl), s);
	return -1;
}

int check_source_url(const char *s, char *why, size_t why_len)
{
	const char *sep = strstr(s, "://");
	size_t n = strlen(s);

	if (!n)
		return why_f(why, why_len, "must not be empty");
	if (n > 4096)
		return why_f(why, why_len, "is longer than 4096 characters");
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return why_f(why, why_len, "contains a control character");
	if (!sep)
		return 0; /* a bare path */
	size_t sl = (size_t)(sep - s);
	const char *rest = sep + 3;
	if (sl == 4 && !strncmp(s, "file", 4)) {
		if (rest[0] != '/' || !rest[1])
			return why_f(why, why_len, "a file URL needs an absolute path (file:///path/to/file)");
		return 0;
	}
	if ((sl == 5 && !strncmp(s, "https", 5)) || (sl == 4 && !strncmp(s, "http", 4))) {
		size_t hl = strcspn(rest, "/?#");
		if (!hl)
			return why_f(why, why_len, "has no host");
		/* dlk.yaml is stored in a ConfigMap, printed and kept in the bundle's provenance */
		if (memchr(rest, '@', hl))
			return why_f(why, why_len,
			             "carries credentials (user:password@host), which would be stored in plain text "
			             "with the project: put them in a netrc file instead (~/.netrc, or $NETRC; in the "
			             "cluster, a Secret named by data.netrc_secret)");
		if (strchr(s, ' '))
			return why_f(why, why_len, "contains a space (percent-encode it as %20)");
		return 0;
	}
	if (sl == 3 && !strncmp(s, "pvc", 3)) {
		char claim[254], inner[200];
		size_t cl = strcspn(rest, "/");
		if (!cl || cl > 253 || !rest[cl] || !rest[cl + 1])
			return why_f(why, why_len, "a pvc URL is pvc://CLAIM/path/in/volume");
		memcpy(claim, rest, cl);
		claim[cl] = '\0';
		if (check_dns_subdomain(claim, inner, sizeof(inner))) {
			snprintf(why, why_len, "has a claim name that %s", inner);
			return -1;
		}
		return 0;
	}
	snprintf(why, why_len, "has an unsupported scheme '%.*s' (use file://, https://, http://, pvc:// or a plain path)",
	         (int)(sl > 20 ? 20 : sl), s);
	return -1;
}

/* ---- what a cluster needs ---- */

/* a source a pod can reach without help: another machine's, or a volume's */
static int remote_url(const char *u)
{
	return !strncmp(u, "https://", 8) || !strncmp(u, "http://", 7) || !strncmp(u, "s3://", 5) ||
	       !strncmp(u, "pvc://", 6);
}

static void warn_line(struct dlk_buf *out, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void warn_line(struct dlk_buf *out, int *n, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if ((*n)++)
		dlk_buf_addc(out, '\n');
	dlk_buf_adds(out, line);
}

int project_cluster_warnings(const struct dlk_project *spec, struct dlk_buf *out)
{
	const struct dlk_data *d = &spec->data;
	const struct { const struct dlk_source *src; const char *key; } srcs[] = {
		{ &d->train.images, "data.train.images" }, { &d->train.labels, "data.train.labels" },
		{ &d->train.source, "data.train.source" }, { &d->test.images, "data.test.images" },
		{ &d->test.labels, "data.test.labels" }, { &d->test.source, "data.test.source" },
		{ &d->train.targets, "data.train.targets" }, { &d->test.targets, "data.test.targets" },
	};
	const char *local = NULL, *local_key = NULL;
	int n = 0;

	/* the first local source stands for all of them: one warning, not six */
	if (d->dataset.id || d->dataset.tag) {
		if (d->store && !remote_url(d->store))
			local = d->store, local_key = "data.store";
	} else {
		for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]) && !local; i++)
			if (srcs[i].src->url && !remote_url(srcs[i].src->url))
				local = srcs[i].src->url, local_key = srcs[i].key;
		for (int i = 0; i < d->train.n_shards && !local; i++)
			if (d->train.shards[i].url && !remote_url(d->train.shards[i].url))
				local = d->train.shards[i].url, local_key = "data.train.shards";
	}
	if (local)
		warn_line(out, &n, "%s: '%.200s' is on this machine's disk, which a pod cannot read (unless its image or "
		          "a volume holds it); give the data an https:// or pvc://CLAIM/PATH address, or push it to a "
		          "store the cluster reaches ('dlk data push --to s3://...') and name the dataset",
		          local_key, local);
	if (spec->image && !strchr(spec->image, '/'))
		warn_line(out, &n, "image: '%.200s' names no registry, so the nodes look for it on Docker Hub; push the "
		          "image ('make image' builds it) to a registry the cluster pulls from and set image: "
		          "REGISTRY/%.200s", spec->image, spec->image);
	if (!spec->storage.claim && !spec->storage.size)
		warn_line(out, &n, "storage: none, so the checkpoints and the model bundle are written inside the pod and "
		          "lost with it; set storage.size (a volume dlk creates, e.g. 1Gi) or storage.claim (an existing "
		          "one)");
	return n;
}
