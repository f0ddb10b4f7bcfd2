/* A model bundle made ready to serve: read and verified (lib/train/bundle.c checks the tar, the
 * weights' sha256 against model.json and every tensor's shape against the architecture), its
 * signature for the protocols, and the engine the batcher runs on a backend. */
#ifndef DLK_SERVE_MODEL_H
#define DLK_SERVE_MODEL_H

#include <stdatomic.h>

#include "lib/gen/lm.h"
#include "lib/nn/backend.h"
#include "lib/serve/batcher.h"
#include "lib/serve/gen.h"
#include "lib/serve/metrics.h"
#include "lib/serve/tensor.h"
#include "lib/train/bundle.h"
#include "lib/util/err.h"

#define DLK_SERVE_NAME_MAX 63

struct dlk_serve_model {
	char *name;                  /* in URLs: the bundle's project name unless NAME=PATH said */
	char *path;
	struct dlk_bundle bundle;
	struct dlk_serve_sig sig;
	const struct dlk_backend *be;
	double test_accuracy;        /* recorded in the bundle; < 0 when it has none */
	int max_batch;               /* rows in one forward pass: serving.max_batch, or fewer when
	                                serving.max_memory says so (dlk_serve_model_fit) */
	struct dlk_batcher *batcher; /* set when the server adds it to its pool */
	struct dlk_model_stats stats;
	atomic_int ready;            /* loaded and warmed up */
	/* a language model (lib/gen/lm.h): the text routes answer it, through its scheduler */
	int is_lm;
	struct dlk_lm lm;
	char *not_lm;                /* why it is not one (for the text routes' 400) */
	struct dlk_gen_sched *gen;   /* set when the server starts it */
	struct dlk_gen_stats gen_stats;
};

/* Parses "PATH" or "NAME=PATH" (a name is 1 to 63 of [A-Za-z0-9._-], not starting with '.').
 * name_out is NULL when the argument names none; both are the caller's to free. */
int dlk_serve_model_arg(const char *arg, char **name_out, char **path_out, struct dlk_err *err);

/* Reads and verifies the bundle at path and prepares the model (name NULL: the bundle's).
 * Errors name the file; code DLK_EXIT_CONFIG for a bad bundle. */
int dlk_serve_model_load(struct dlk_serve_model *m, const char *name, const char *path,
                         const struct dlk_backend *be, struct dlk_err *err);
/* Sets m->max_batch: max_batch, or the most rows whose forward pass needs at most max_memory
 * bytes on the model's backend. -1 with err (DLK_EXIT_CONFIG, naming serving.max_memory) when
 * a single row needs more; *lowered is 1 when the batch is smaller than max_batch. */
int dlk_serve_model_fit(struct dlk_serve_model *m, int max_batch, long long max_memory, int *lowered,
                        struct dlk_err *err);
/* The engine that runs this model on its backend (replicas build the network from the bundle). */
struct dlk_engine dlk_serve_model_engine(struct dlk_serve_model *m);
/* One row of raw zeros through the batcher; fails when the pass fails or gives a non-finite
 * logit (a broken model must not be reported ready). */
int dlk_serve_model_warmup(struct dlk_serve_model *m, struct dlk_err *err);
void dlk_serve_model_release(struct dlk_serve_model *m);

#endif
