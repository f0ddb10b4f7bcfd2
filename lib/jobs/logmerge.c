/* Log lines of several ranks merged in time order (lib/jobs/logmerge.h). */
#include "lib/jobs/logmerge.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

int dlk_log_merge_add(const char *line, size_t len, void *ud)
{
	struct dlk_log_merge *m = ud;
	const char *sp = memchr(line, ' ', len);
	struct dlk_log_line l;

	if (m->max_bytes && m->bytes + len > m->max_bytes) {
		m->full = 1;
		return 1;
	}
	/* "2026-01-01T00:00:00.123456789Z text" */
	if (sp && sp - line >= 20 && sp - line < 40 && line[4] == '-' && line[10] == 'T') {
		l.ts = xstrndup(line, (size_t)(sp - line));
		l.text = xstrndup(sp + 1, len - (size_t)(sp - line) - 1);
	} else {
		l.ts = xstrdup("");
		l.text = xstrndup(line, len);
	}
	l.rank = m->rank;
	l.seq = m->n;
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->v = xrealloc(m->v, m->cap * sizeof(*m->v));
	}
	m->v[m->n++] = l;
	m->bytes += len + 64;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct dlk_log_line *x = a, *y = b;
	int c = strcmp(x->ts, y->ts);

	if (c)
		return c;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void dlk_log_merge_sort(struct dlk_log_merge *m)
{
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), by_time);
}

void dlk_log_merge_release(struct dlk_log_merge *m)
{
	size_t max = m->max_bytes;

	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].ts);
		free(m->v[i].text);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
	m->max_bytes = max;
}
