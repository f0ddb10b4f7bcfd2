#include "lib/util/duration.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dlk_duration_text(double s, char *out, size_t n)
{
	long t = !(s > 0) ? 0 : s > 1e12 ? (long)1e12 : (long)s; /* NaN and absurd ages too */

	if (t < 60)
		snprintf(out, n, "%lds", t);
	else if (t < 600)
		snprintf(out, n, "%ldm%lds", t / 60, t % 60);
	else if (t < 3600)
		snprintf(out, n, "%ldm", t / 60);
	else if (t < 10 * 3600)
		snprintf(out, n, "%ldh%ldm", t / 3600, (t % 3600) / 60);
	else if (t < 2 * 86400)
		snprintf(out, n, "%ldh", t / 3600);
	else
		snprintf(out, n, "%ldd", t / 86400);
}

void dlk_duration_span(double s, char *out, size_t n)
{
	double t;

	if (!isfinite(s) || s < 0) {
		snprintf(out, n, "-");
		return;
	}
	/* tenths only where they matter: a run of seconds; minutes and hours in whole units below */
	if (s < 59.95) {
		snprintf(out, n, "%.1fs", s);
		return;
	}
	t = floor(s + 0.5);
	if (t < 3600)
		snprintf(out, n, "%.0fm%02.0fs", floor(t / 60), fmod(t, 60));
	else
		snprintf(out, n, "%.0fh%02.0fm", floor(t / 3600), floor(fmod(t, 3600) / 60));
}

double dlk_duration_parse(const char *s)
{
	double total = 0;
	int parts = 0;

	if (!s || !*s || strlen(s) > 32)
		return -1;
	while (*s) {
		char *end;
		if (!isdigit((unsigned char)*s))
			return -1;
		double v = strtod(s, &end);
		if (end == s || !isfinite(v))
			return -1;
		s = end;
		double unit = 1;
		switch (*s) {
		case 'h': unit = 3600; s++; break;
		case 'm': unit = 60; s++; break;
		case 's': unit = 1; s++; break;
		case 'd': unit = 86400; s++; break;
		case '\0': if (parts) return -1; break; /* a bare number only alone: "45" */
		default: return -1;
		}
		total += v * unit;
		parts++;
	}
	return total > 366.0 * 86400 ? -1 : total;
}
