/* The clocks dlk reads: a monotonic one for intervals, deadlines and rates (immune to the wall
 * clock being set), and the wall clock as RFC 3339 text for what is recorded. */
#ifndef DLK_UTIL_CLOCK_H
#define DLK_UTIL_CLOCK_H

/* Monotonic time since an arbitrary start, in seconds and in whole milliseconds. */
double dlk_now(void);
long long dlk_now_ms(void);

/* Current UTC time as RFC 3339 ("2024-05-01T12:00:00Z"). */
void dlk_rfc3339_now(char buf[32]);

/* Parses an RFC 3339 time ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123456789+02:00": a
 * fraction of any length, Z or a numeric offset, 'T' and 'Z' in either case) into seconds since
 * the epoch in *out, the fraction kept. 0, or -1 when s (NULL allowed) is not one whole RFC 3339
 * time; *out is then untouched. The one parser of the times Kubernetes, exec plugins and the run
 * records write. */
int dlk_rfc3339_parse(const char *s, double *out);

#endif
