/* A strict subset of mustache that writes YAML which user values cannot reshape.
 *
 *   {{name}} {{a.b.c}} {{.}}   a value from the context, written as a YAML scalar: strings always
 *                              double-quoted and escaped, numbers plain, true/false, null
 *   {{#x}}...{{/x}}            a list: once per item, the item on top of the context;
 *                              an object: once, the object on top; true, a non-empty string, a
 *                              non-zero number: once (the value on top); otherwise not at all
 *   {{^x}}...{{/x}}            once when x is false, null, an empty list or string, or zero
 *   {{! comment }}             nothing (may span lines)
 *   {{> name}}                 another template (a partial), indented like the tag when the tag
 *                              stands alone on its line
 *
 * A line holding only a section, comment or partial tag (and white space) vanishes entirely, as
 * in the mustache spec, so templates stay readable YAML. There is no unescaped output ({{{x}}},
 * {{&x}}) and no delimiter change: everything a template prints from the context is a scalar.
 *
 * Strict: a name the context does not have is an error (a typo in a template or an override must
 * not silently render nothing), and so is a variable that names a list or an object;
 * mustache_check() finds such names in branches a context does not take as well. Errors read
 * "FILE:LINE: what was wrong". */
#ifndef DLK_RENDER_MUSTACHE_H
#define DLK_RENDER_MUSTACHE_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

#define MUSTACHE_MAX_DEPTH 32          /* sections nested in one template */
#define MUSTACHE_MAX_PARTIAL_DEPTH 8   /* partials including partials */
#define MUSTACHE_MAX_TEMPLATE (1u << 20)
#define MUSTACHE_MAX_STEPS 4000000u      /* tags and texts visited in one render */

struct mustache;

/* Finds a partial by name; returns NULL (and fills err) when there is none. The returned template
 * is borrowed: it must live until mustache_render() returns. */
struct mustache_partials {
	const struct mustache *(*lookup)(void *ud, const char *name, struct dlk_err *err);
	void *ud;
};

/* Parses a template. `file` is the name used in messages (copied). Returns a new template
 * (mustache_free) or NULL with err = "FILE:LINE: problem", code DLK_EXIT_CONFIG. */
struct mustache *mustache_parse(const char *file, const char *text, size_t len, struct dlk_err *err);

/* Renders t with ctx (an object; borrowed) appending to out. partials may be NULL (then a partial
 * tag is an error). Fails when the output would grow past max_out bytes. Returns 0, or -1 with
 * err = "FILE:LINE: problem" (code DLK_EXIT_CONFIG); out may then hold partial output. */
int mustache_render(const struct mustache *t, const cJSON *ctx, const struct mustache_partials *partials,
                    size_t max_out, struct dlk_buf *out, struct dlk_err *err);

/* Resolves every name of t and of the partials it includes in every branch, as if each section
 * were entered once (with the first item of a list) and each inverted section too, printing
 * nothing. So a typo in a branch this context does not take is found all the same. Inside a
 * section over an empty list, the names that do not resolve outside it are taken to be the
 * items' fields and are not checked. Returns 0, or -1 with err as mustache_render() would. */
int mustache_check(const struct mustache *t, const cJSON *ctx, const struct mustache_partials *partials,
                   struct dlk_err *err);

/* The file name given to mustache_parse (borrowed). */
const char *mustache_file(const struct mustache *t);

void mustache_free(struct mustache *t);

#endif
