/* The progress file of one process of a user's program (DLK_PROGRESS_FILE, docs/program.md):
 * a program that cannot write its DLK-PROGRESS lines cleanly on its output (a library owns
 * stdout, a launcher swallows it) appends them to this file; the supervisor tails it, line by
 * line, as it reads the output. The file is the process's own: the supervisor names it, the
 * process creates it (truncating what a previous generation left) and appends to it; a file that
 * shrank (or another file at the path) is read again from its start. */
#ifndef DLK_PROGRAM_PROGFILE_H
#define DLK_PROGRAM_PROGFILE_H

#include <stddef.h>
#include <sys/types.h>

struct progfile {
	char *path;
	off_t off;        /* bytes read so far */
	char *buf;        /* a line not finished yet */
	size_t len;
	ino_t ino;        /* the file read so far (0: none yet) */
};
#define PROGFILE_INIT { NULL, 0, NULL, 0, 0 }

/* Starts tailing path (copied); nothing is read yet. */
void progfile_open(struct progfile *t, const char *path);
/* Reads what was appended since the last call and calls fn for every whole line (without its
 * newline; a line longer than PROGRAM_PROTOCOL_MAX_LINE is given in pieces of that size, which
 * the protocol's parser then refuses). With ended, the rest after the last newline is a line
 * too, and the tail starts over (the file is removed: the next generation's process makes its
 * own). A file that does not exist (yet) is no error. Returns the lines given. */
int progfile_poll(struct progfile *t, void (*fn)(void *ud, char *line, size_t n), void *ud, int ended);
void progfile_release(struct progfile *t);

#endif
