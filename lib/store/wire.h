/* The bytes of the store pod's protocol (lib/store/serve.h) that each side reads from the other:
 * the client reads the pod's JSON answers, the pod reads the client's Range header. */
#ifndef DLK_STORE_WIRE_H
#define DLK_STORE_WIRE_H

#include <stddef.h>

#include "lib/store/store.h"
#include "lib/util/err.h"

/* {"size": N} with N a whole number of bytes: 0 and *size, or -1. */
int dlk_store_wire_size(const char *body, size_t len, unsigned long long *size);

/* {"names": [{"name": "...", "size": N}, ...]}: fn for each entry whose name is a plain file name
 * (no '/', not "." or ".."), until fn returns nonzero. -1 with err when body is not such a list. */
int dlk_store_wire_list(const char *body, size_t len, const char *what, dlk_store_list_fn fn, void *ctx,
                        struct dlk_err *err);

/* "bytes=N-" for an object of size bytes: 0 and *from (N <= size), or -1. */
int dlk_store_wire_range(const char *range, unsigned long long size, unsigned long long *from);

#endif
