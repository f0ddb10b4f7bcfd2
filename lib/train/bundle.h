/* The model bundle NAME.dlk: a tar archive anyone can open, holding
 *   model.json          architecture, input shape, classes, metrics (confusion matrix included),
 *                       the run's history (per-epoch metrics, step losses, starts and resumes:
 *                       lib/train/history.h), provenance (data digests, spec digest, dlk
 *                       version and build, seed, start/end time, image, the project's git
 *                       commit) and the sha256 of the weights file;
 *   weights.safetensors the parameters as safetensors (F32, PyTorch names and shapes:
 *                       layers.<i>.weight [out, in] or [out, in, kh, kw], layers.<i>.bias [out]).
 * Written atomically; read back with every size, offset and digest checked. */
#ifndef DLK_TRAIN_BUNDLE_H
#define DLK_TRAIN_BUNDLE_H

#include <cJSON.h>

#include "lib/data/dataset.h"
#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/train/eval.h"
#include "lib/train/history.h"
#include "lib/util/err.h"

#define DLK_BUNDLE_FORMAT_VERSION 1
#define DLK_BUNDLE_MAX_JSON (16u << 20)          /* model.json */
#define DLK_BUNDLE_MAX_WEIGHTS (4ull << 30)      /* weights.safetensors */
#define DLK_BUNDLE_MAX_HEADER (100u << 20)       /* safetensors' own limit for its header */

struct dlk_bundle_info {
	const char *name;                   /* the project's name */
	const struct dlk_model *model;      /* architecture */
	const struct dlk_training *training; /* optional: recorded for reference */
	const struct dlk_net *net;          /* the trained weights (read from its backend) */
	char *const *classes;               /* optional class names ... */
	int n_class_names;                  /* ... this many (must equal the model's outputs); 0 means
	                                       net->n_classes of them */
	const struct dlk_eval *eval;        /* optional test metrics */
	double train_loss;
	const struct dlk_dataset *train, *test; /* optional: their sources' URLs and sha256 */
	const char *project_digest;            /* optional sha256 hex of the resolved spec */
	const char *dataset_id;                /* optional: data.dataset's "sha256:<id>" ... */
	const char *dataset_tag;               /* ... the tag it was resolved from, and ... */
	const char *data_store;                /* ... the store it came from */
	const char *run_id;                    /* optional: the run that made it (a Job's uid in a pod) */
	unsigned long long seed;
	const char *started_at, *finished_at; /* RFC 3339 UTC, optional */
	const struct dlk_history *history;    /* optional */
	const char *git_commit;               /* optional: the project's commit, and whether tracked */
	int git_dirty;                        /* files differed from it */
	const struct dlk_data *data;        /* optional: its scale, mean and std are recorded as the
	                                       input scaling a server applies to raw values */
	const struct dlk_tokenizer *tokenizer; /* optional (format text): kept as tokenizer.txt, so that
	                                          serving tokenizes as training did */
};

/* model.json without its "weights" entry: everything the bundle says about the model and the
 * run that made it. The worker publishes the same description on its Job while it trains, so a
 * report from the Job and one from the bundle are built from one writer. The caller owns it. */
cJSON *dlk_bundle_meta_json(const struct dlk_bundle_info *info);

/* Writes the bundle to `path` atomically: a temporary file in the same directory, fsync, rename,
 * fsync of the directory. The image is taken from $DLK_IMAGE when set. */
int dlk_bundle_write(const char *path, const struct dlk_bundle_info *info, struct dlk_err *err);

struct dlk_bundle {
	cJSON *meta;              /* model.json, owned */
	struct dlk_model model;   /* rebuilt architecture; layers owned */
	int n_classes;
	char **classes;           /* n_classes names, or NULL when the bundle has none; owned */
	float *weights;           /* host, flat in the net's layout; owned */
	size_t n_weights;
	char weights_sha256[65];
	char build[16];           /* "cpu" or "cuda" */
	/* model.json's input_scaling: a raw value v enters the network as (v * scale - mean) / std,
	 * in float32, as training computed it. has_scaling = 0 when the bundle records none (then
	 * scale 1, mean 0, std 1) */
	int has_scaling;
	float scale, mean, std;
	/* the tokenizer of a text model (member tokenizer.txt, lib/data/bpe.h's text form); NULL in
	 * bundles without one (every bundle written before text data); owned */
	struct dlk_tokenizer *tokenizer;
	/* input_scaling's channel_mean and channel_std (format images trained with per-channel
	 * normalisation), one value per channel of model.input (a list of one given for every
	 * channel, a list not recorded taken from mean or std): channel c's raw value v enters the
	 * network as (v * scale - channel_mean[c]) / channel_std[c]. n_channel_scaling is the
	 * number of channels, 0 when the bundle records neither list */
	int n_channel_scaling;
	float channel_mean[DLK_MAX_CHANNELS], channel_std[DLK_MAX_CHANNELS];
};
#define DLK_BUNDLE_INIT { NULL, { { 0, 0, 0 }, 0, NULL, 0, DLK_LOSS_SOFTMAX_CE, NULL, DLK_TASK_CLASSIFICATION, 1.0, 0.5, 0, NULL }, 0, NULL, NULL, 0, "", "", \
	                  0, 1.0f, 0.0f, 1.0f, NULL, 0, { 0 }, { 0 } }

/* Reads and verifies a bundle: the tar structure, model.json, the weights' sha256 against
 * model.json, the safetensors header (dtype, shapes against the architecture, offsets inside
 * the data, no overlap, no gap). Errors name the bundle and, for a damaged file, the member
 * and byte offset; code DLK_EXIT_CONFIG. */
int dlk_bundle_read(const char *path, struct dlk_bundle *b, struct dlk_err *err);
/* Builds the network of a read bundle on `be` and loads its weights, ready for inference
 * (dlk_net_reserve + dlk_net_forward with training = 0). */
int dlk_bundle_net(const struct dlk_bundle *b, const struct dlk_backend *be, struct dlk_net *net,
                   struct dlk_err *err);
void dlk_bundle_release(struct dlk_bundle *b);

/* What generation needs of a language model (model.task lm), in one place: its context (the
 * tokens of model.input), its vocabulary (the width of the last layer's [1, T, V] logits) and
 * its tokenizer (the bundle's, borrowed). -1 with err (DLK_EXIT_CONFIG) when the bundle is not a
 * language model or has no tokenizer. */
struct dlk_lm_info {
	int context, vocab;
	const struct dlk_tokenizer *tokenizer;
};
int dlk_bundle_lm(const struct dlk_bundle *b, const char *path, struct dlk_lm_info *out, struct dlk_err *err);

#endif
