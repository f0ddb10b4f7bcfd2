/* Tailing a program's progress file (lib/program/progfile.h). */
#include "lib/program/progfile.h"
#include "lib/program/protocol.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void progfile_open(struct progfile *t, const char *path)
{
	*t = (struct progfile)PROGFILE_INIT;
	t->path = xstrdup(path);
	t->buf = xmalloc(PROGRAM_PROTOCOL_MAX_LINE + 1);
}

/* the whole lines in buf, the rest moved to its start */
static int split(struct progfile *t, void (*fn)(void *, char *, size_t), void *ud)
{
	size_t start = 0;
	int n = 0;

	for (size_t i = 0; i < t->len; i++) {
		if (t->buf[i] != '\n')
			continue;
		fn(ud, t->buf + start, i - start);
		n++;
		start = i + 1;
	}
	memmove(t->buf, t->buf + start, t->len - start);
	t->len -= start;
	if (t->len >= PROGRAM_PROTOCOL_MAX_LINE) {
		fn(ud, t->buf, t->len);
		n++;
		t->len = 0;
	}
	return n;
}

int progfile_poll(struct progfile *t, void (*fn)(void *ud, char *line, size_t n), void *ud, int ended)
{
	int fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), n = 0;
	struct stat st;

	if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode)) {
		if (st.st_ino != t->ino || st.st_size < t->off) {
			/* a new file, or one truncated: its lines from the start */
			t->ino = st.st_ino;
			t->off = 0;
			t->len = 0;
		}
		for (;;) {
			ssize_t k = pread(fd, t->buf + t->len, PROGRAM_PROTOCOL_MAX_LINE - t->len, t->off);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break;
			t->off += k;
			t->len += (size_t)k;
			n += split(t, fn, ud);
		}
	}
	if (fd >= 0)
		close(fd);
	if (ended) {
		if (t->len)
			fn(ud, t->buf, t->len), n++;
		t->len = 0;
		t->off = 0;
		t->ino = 0;
		unlink(t->path);
	}
	return n;
}

void progfile_release(struct progfile *t)
{
	free(t->path);
	free(t->buf);
	*t = (struct progfile)PROGFILE_INIT;
}
