/* A directory store over HTTP: what the pod of a pvc:// store runs (`dlk data serve`), reached
 * through the API server's pod proxy (lib/store/pvc.c is the client). Every request carries the
 * pod's token in X-Dlk-Store-Token (the API server keeps its own Authorization header).
 *
 *	GET  /v1/stat/KEY                    {"size": N}, or 404
 *	GET  /v1/stat/KEY?hash=1             {"size": N, "sha256": "<hex>"}: the pod hashes the file
 *	                                     (a push asks before it skips an object)
 *	GET  /v1/object/KEY                  the bytes (Range: bytes=N- gives the rest from N, 206);
 *	                                     422 when KEY is not a regular file (a FIFO, a directory)
 *	GET  /v1/list/PREFIX/                {"names": [{"name": "...", "size": N}, ...]}
 *	GET  /v1/upload/KEY?sha256=H&size=S  {"size": N}: what an upload of KEY with content H (S
 *	                                     bytes) has staged so far (0: nothing)
 *	PUT  /v1/upload/KEY?sha256=H&offset=N   appends the body at N (409 {"size": have} when N is
 *	                                     not what is staged)
 *	POST /v1/commit/KEY?sha256=H&size=S  the staged bytes become KEY when they are S bytes that
 *	                                     hash to H (422 otherwise, and the staging is dropped)
 *
 * KEY is sha256/<hex>, datasets/<hex>, tags/NAME@TAG or logs/NAME (a worker's log archive, NAME
 * of letters, digits, '.', '_' and '-'); nothing else under the root is reachable.
 * Errors are {"error": "..."}. Library code: nothing is printed. */
#ifndef DLK_STORE_SERVE_H
#define DLK_STORE_SERVE_H

#include <signal.h>

#include "lib/util/err.h"

#define DLK_STORE_TOKEN_HEADER "X-Dlk-Store-Token"
#define DLK_STORE_CHUNK (8u << 20)     /* the largest body one PUT may carry */

struct dlk_store_serve_opts {
	const char *root;              /* the directory the store is */
	const char *listen;            /* "HOST:PORT", ":PORT" (every address) or "PORT" */
	const char *token;             /* what X-Dlk-Store-Token must say; required */
	double idle_s;                 /* return after this long without a request; 0: never */
	volatile sig_atomic_t *stop;   /* return when it becomes nonzero (a signal handler sets it) */
	void (*ready)(void *ctx, int port); /* called once listening, with the port (may be NULL) */
	void *ready_ctx;
};

/* Serves until stopped or idle. Returns 0, or -1 with err (cannot listen: DLK_EXIT_CONFIG for
 * a bad address, DLK_EXIT_FAIL otherwise). */
int dlk_store_serve(const struct dlk_store_serve_opts *o, struct dlk_err *err);

/* 0 when key is one a store holds (sha256/<hex>, datasets/<hex>, tags/NAME@TAG, logs/NAME). */
int dlk_store_key_check(const char *key);

#endif
