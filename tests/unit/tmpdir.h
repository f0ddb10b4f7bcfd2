/* A scratch directory for a test program, under $TMPDIR (or /tmp), removed with all it holds. */
#ifndef DLK_TESTS_TMPDIR_H
#define DLK_TESTS_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

#include "lib/util/mem.h"

/* Creates "$TMPDIR/dlk-NAME-XXXXXX"; NULL (and a message) when it cannot. */
static __attribute__((unused)) char *test_tmpdir(const char *name)
{
	const char *t = getenv("TMPDIR");
	char *dir = xasprintf("%s/dlk-%s-XXXXXX", t && *t ? t : "/tmp", name);

	if (mkdtemp(dir))
		return dir;
	perror("mkdtemp");
	free(dir);
	return NULL;
}

/* Removes dir and everything in it, and frees the name. */
static __attribute__((unused)) void test_tmpdir_remove(char *dir)
{
	char *cmd = xasprintf("rm -rf '%s'", dir);

	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	free(cmd);
	free(dir);
}

#endif
