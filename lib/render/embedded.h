/* Files embedded into the binary at build time (the built-in templates). */
#ifndef DLK_RENDER_EMBEDDED_H
#define DLK_RENDER_EMBEDDED_H

#include <stddef.h>

struct dlk_embedded {
	const char *name;  /* file name, e.g. "job.yaml"; NULL ends the table */
	const char *data;  /* NUL-terminated contents */
	size_t len;
};

extern const struct dlk_embedded dlk_builtin_templates[];

#endif
