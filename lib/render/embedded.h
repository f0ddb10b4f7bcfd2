/* Files embedded into the binary at build time (the built-in templates). */
#ifndef DLK_RENDER_EMBEDDED_H
#define DLK_RENDER_EMBEDDED_H

#include <stddef.h>

struct dlk_embedded {
	const char *name;  /* file name, e.g. "job.yaml"; NULL ends the table */
	const char *data;  /* NUL-terminated contents */
	size_t len;
};

/* The built-in Kubernetes object templates, named by file name ("job.yaml"). */
extern const struct dlk_embedded dlk_builtin_templates[];
/* Other files the binary carries, named by their path in the source tree
 * ("examples/mlp/dlk.yaml", "completions/dlk.bash"). */
extern const struct dlk_embedded dlk_builtin_files[];
/* The entry named `name`, or NULL. */
const struct dlk_embedded *dlk_embedded_find(const struct dlk_embedded *table, const char *name);

#endif
