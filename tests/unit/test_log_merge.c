/* lib/jobs/logmerge.c: lines of several ranks merged by time, then rank, then arrival; a line
 * without a time sorts first and keeps its text whole; the byte bound stops the reading. */
#include "tests/unit/check.h"
#include "lib/jobs/logmerge.h"

#include <string.h>

static void add(struct dlk_log_merge *m, int rank, const char *line)
{
	m->rank = rank;
	dlk_log_merge_add(line, strlen(line), m);
}

int main(void)
{
	struct dlk_log_merge m = { 0 };

	add(&m, 1, "2026-01-01T00:00:02.000000000Z one b");
	add(&m, 0, "2026-01-01T00:00:02.000000000Z zero b");
	add(&m, 0, "2026-01-01T00:00:01.000000000Z zero a");
	add(&m, 1, "2026-01-01T00:00:02.000000000Z one c");
	add(&m, 2, "no time here");
	add(&m, 0, "2026-01-01 not a time");
	dlk_log_merge_sort(&m);
	CHECK(m.n == 6);
	/* the lines without a time first (rank, then arrival), then by time, rank and arrival */
	CHECK_STR(m.v[0].text, "2026-01-01 not a time");
	CHECK_STR(m.v[0].ts, "");
	CHECK_STR(m.v[1].text, "no time here");
	CHECK_STR(m.v[2].text, "zero a");
	CHECK_STR(m.v[2].ts, "2026-01-01T00:00:01.000000000Z");
	CHECK_STR(m.v[3].text, "zero b");
	CHECK_STR(m.v[4].text, "one b");
	CHECK_STR(m.v[5].text, "one c");
	CHECK(m.v[5].rank == 1);
	dlk_log_merge_release(&m);
	CHECK(m.n == 0 && m.v == NULL);

	/* the bound: the line that would pass it is not kept, and reading is asked to stop */
	m.max_bytes = 200;
	CHECK(dlk_log_merge_add("2026-01-01T00:00:01.000000000Z a", 32, &m) == 0);
	CHECK(dlk_log_merge_add("2026-01-01T00:00:01.000000000Z b", 32, &m) == 0);
	CHECK(dlk_log_merge_add("2026-01-01T00:00:01.000000000Z c", 32, &m) == 1);
	CHECK(m.full && m.n == 2);
	dlk_log_merge_release(&m);
	CHECK(m.max_bytes == 200 && !m.full);
	return check_failed != 0;
}
