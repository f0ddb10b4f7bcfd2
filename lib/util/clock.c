#include "lib/util/clock.h"

#include <time.h>

double dlk_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long dlk_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dlk_rfc3339_now(char buf[32])
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* n digits at s as a number, -1 when any is not a digit: strptime would take "2024-5-1" or a
 * leading space, and sscanf a sign, neither of which RFC 3339 allows */
static int digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

int dlk_rfc3339_parse(const char *s, double *out)
{
	struct tm tm = { 0 };
	double frac = 0, scale = 0.1;
	int off = 0;

	/* each field is read only once the text before it matched, so a short string is never
	 * read past its end */
	int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
	if (!s || (y = digits(s, 4)) < 0 || s[4] != '-' || (mo = digits(s + 5, 2)) < 1 || mo > 12 || s[7] != '-' ||
	    (d = digits(s + 8, 2)) < 1 || d > 31 || (s[10] != 'T' && s[10] != 't') || (h = digits(s + 11, 2)) < 0 ||
	    h > 23 || s[13] != ':' || (mi = digits(s + 14, 2)) < 0 || mi > 59 || s[16] != ':' ||
	    (sec = digits(s + 17, 2)) < 0 || sec > 60) /* 60: a leap second, which timegm carries on */
		return -1;
	const char *p = s + 19;
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return -1;
		for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;
		if ((oh = digits(p + 1, 2)) < 0 || oh > 23 || p[3] != ':' || (om = digits(p + 4, 2)) < 0 || om > 59)
			return -1;
		off = (*p == '-' ? -1 : 1) * (oh * 3600 + om * 60);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*out = (double)(timegm(&tm) - off) + frac;
	return 0;
}
