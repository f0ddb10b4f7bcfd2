/* The bytes of the store pod's protocol (lib/store/serve.h) that each side reads from the other:
 * the client reads the pod's JSON answers, the pod reads the client's Range header. */
#ifndef DLK_STORE_WIRE_H
#define DLK_STORE_WIRE_H

#include <stddef.h>

#include "lib/store/store.h"
#include "lib/util/err.h"

/* {"size": N} with N a whole number of bytes: 0 and *size, or -1. */
int dlk_store_wire_size(const char *body, size_t len, unsigned long long *size);

/* {"size": N, "sha256": "<64 hex digits>"}: the answer to a stat that asked the pod to hash the
 * object. 0 with *size and hex (hex "" when the pod did not hash it: a pod of an older dlk), or -1
 * when size is not as dlk_store_wire_size reads it. */
int dlk_store_wire_stat(const char *body, size_t len, unsigned long long *size, char hex[65]);

/* {"names": [{"name": "...", "size": N}, ...]}: fn for each entry whose name is a plain file name
 * (no '/', not "." or ".."), until fn returns nonzero. -1 with err when body is not such a list. */
int dlk_store_wire_list(const char *body, size_t len, const char *what, dlk_store_list_fn fn, void *ctx,
                        struct dlk_err *err);

/* "bytes=N-" for an object of size bytes: 0 and *from (N <= size), or -1. */
int dlk_store_wire_range(const char *range, unsigned long long size, unsigned long long *from);

#endif
