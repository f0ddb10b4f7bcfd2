/* Inside lib/project only: how project.c's table-driven loader hands the `program:` and
 * `serving.program:` sections to lib/project/program.c, which parses, defaults, validates and
 * dumps them. The loader keeps positions and the problem list; program.c reports a problem
 * through the callback with the node it is about (for file:line) and the key's path. */
#ifndef DLK_PROJECT_PROGRAM_LOAD_H
#define DLK_PROJECT_PROGRAM_LOAD_H

#include "lib/project/program.h"
#include "lib/util/buf.h"
#include "lib/util/ytree.h"

struct program_problems {
	void (*report)(void *ctx, const struct ynode *at, const char *path, const char *msg);
	void *ctx;
};

/* val: the section's node (a mapping, never null); path: "program" or "serving.program".
 * Fills out (present = 1, defaults applied); every problem goes to pp. */
void program_parse(const struct ynode *val, const char *path, struct dlk_program *out,
                   const struct program_problems *pp);
void program_server_parse(const struct ynode *val, const char *path,
                          struct dlk_program_server *out, const struct program_problems *pp);
/* port is left 0 when not given: the loader makes it serving.port */

/* What follows "program:" in the dump, newline included: " null\n" when absent. The dump reads
 * back to the same struct. */
void program_dump(struct dlk_buf *b, const struct dlk_program *p, int indent);
void program_server_dump(struct dlk_buf *b, const struct dlk_program_server *p, int indent);

void program_release(struct dlk_program *p);
void program_server_release(struct dlk_program_server *p);

/* the keys under the sections, for project_known_keys(): ".framework", ... NULL-terminated */
extern const char *const program_subkeys[];
extern const char *const program_server_subkeys[];

/* A YAML double-quoted string (project.c's dump of strings), NULL as null. */
void project_dump_string(struct dlk_buf *b, const char *s);

#endif
