/* Allocation helpers: out of memory is fatal (message on stderr, abort), as in git. */
#ifndef DLK_UTIL_MEM_H
#define DLK_UTIL_MEM_H

#include <stddef.h>
#include <stdlib.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string the caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define DLK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
