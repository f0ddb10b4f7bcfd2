/* Tailing a program's progress file (lib/program/progfile.c): whole lines as they are appended,
 * a line written in pieces given once it ends, a file truncated read from its start, an over-long line given in pieces, the rest given and the file removed at the end. */
#include "tests/unit/check.h"
#include "lib/program/progfile.h"
#include "lib/program/protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct seen {
	int n;
	char last[256];
	size_t last_len;
};

static void on(void *ud, char *line, size_t n)
{
	struct seen *s = ud;
	s->n++;
	s->last_len = n;
	snprintf(s->last, sizeof(s->last), "%.*s", (int)(n < 255 ? n : 255), line);
}

static void append(const char *path, const char *mode, const char *text)
{
	FILE *f = fopen(path, mode);
	fputs(text, f);
	fclose(f);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[4096], path[4200];
	struct progfile t;
	struct seen s = { 0 };

	snprintf(dir, sizeof(dir), "%s/dlk-test-progfile-XXXXXX", tmp);
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/p", dir);
	progfile_open(&t, path);
	CHECK_MSG(progfile_poll(&t, on, &s, 0) == 0 && s.n == 0, "a file not there yet is no line and no error");

	append(path, "w", "DLK-PROGRESS {\"step\": 1}\nDLK-PROGRESS {\"st");
	CHECK(progfile_poll(&t, on, &s, 0) == 1);
	CHECK_STR(s.last, "DLK-PROGRESS {\"step\": 1}");
	CHECK_MSG(progfile_poll(&t, on, &s, 0) == 0, "nothing new, nothing given");
	append(path, "a", "ep\": 2}\n");
	CHECK_MSG(progfile_poll(&t, on, &s, 0) == 1, "a line written in two pieces is given once, whole");
	CHECK_STR(s.last, "DLK-PROGRESS {\"step\": 2}");

	/* the file truncated (a restarted process makes it anew) is read from its start */
	append(path, "w", "x\n");
	CHECK(progfile_poll(&t, on, &s, 0) == 1);
	CHECK_STR(s.last, "x");

	/* a line longer than the protocol's bound comes in pieces, which the parser refuses */
	{
		size_t big = PROGRAM_PROTOCOL_MAX_LINE + 10;
		char *b = malloc(big + 2);
		memset(b, 'a', big);
		b[big] = '\n';
		b[big + 1] = '\0';
		append(path, "a", b);
		free(b);
		s.n = 0;
		CHECK(progfile_poll(&t, on, &s, 0) == 2);
		CHECK_MSG(s.last_len == 10, "the rest of an over-long line is a piece of its own");
	}

	/* the end: the unfinished rest is a line, and the file is gone for the next generation */
	append(path, "a", "DLK-PROGRESS {\"event\": \"done\"}");
	CHECK(progfile_poll(&t, on, &s, 1) == 1);
	CHECK_STR(s.last, "DLK-PROGRESS {\"event\": \"done\"}");
	CHECK_MSG(access(path, F_OK) != 0, "the file is removed at the end");
	append(path, "w", "DLK-PROGRESS {\"step\": 0}\n");
	CHECK_MSG(progfile_poll(&t, on, &s, 0) == 1, "the next generation's file is read from its start");
	progfile_release(&t);
	unlink(path);
	rmdir(dir);
	return CHECK_DONE();
}
