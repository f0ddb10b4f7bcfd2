/* What dlk data's commands share with train's: opening the store a command or the project names. */
#ifndef DLK_COMMANDS_DATA_H
#define DLK_COMMANDS_DATA_H

#include <stddef.h>

#include "commands/ctx.h"
#include "lib/util/err.h"

struct dlk_project;
struct dlk_store;
struct kube_client;

struct dlk_data_store {
	struct dlk_store *store;
	struct kube_client *kube;      /* for pvc://; NULL otherwise */
	char *base_dir;
};

/* Opens url, or the project's data.store when url is NULL (spec may be NULL: then url must be
 * given). pvc:// gets a client from the global options. -vv logs each store request. */
int dlk_data_store_open(const struct dlk_ctx *ctx, const char *url, const struct dlk_project *spec,
                        struct dlk_data_store *ds, struct dlk_err *err);
void dlk_data_store_release(struct dlk_data_store *ds);
/* The project file when there is one (*spec, NULL when -f names no file, or when url is given
 * and is not pvc://): its data.store is the default store. A missing file is no error (the store
 * may be given); a broken one is, since its store would be a guess. */
int dlk_data_maybe_project(const struct dlk_ctx *ctx, const char *url, struct dlk_project **spec,
                           struct dlk_err *err);

/* "54.1 MB" */
void dlk_fmt_bytes(char *buf, size_t n, unsigned long long bytes);

#endif
