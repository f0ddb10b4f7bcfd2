/* The project specification: `dlk.yaml`, parsed, validated and with every default applied.
 *
 * This struct is the one thing the laptop half (render, submit) and the pod half (train --worker,
 * serve --worker) share. project_load() is the only place defaults are applied, and the same loader
 * runs on both sides, so they cannot disagree. The CLI renders project_dump_yaml() into a ConfigMap;
 * the worker reads that file back with project_load(). */
#ifndef DLK_PROJECT_PROJECT_H
#define DLK_PROJECT_PROJECT_H

#include <stddef.h>

#include "lib/util/err.h"

/* ---- data ---- */

enum dlk_data_format { DLK_DATA_IDX, DLK_DATA_CSV, DLK_DATA_TAR };

/* One file to fetch: file://, https:// (or http://), pvc://claim/path; a bare path means file. */
struct dlk_source {
	char *url;      /* NULL when absent */
	char *sha256;   /* optional pin, 64 lowercase hex digits of the *fetched* bytes; NULL if none */
};

struct dlk_split {
	struct dlk_source images; /* idx: the images file */
	struct dlk_source labels; /* idx: the labels file */
	struct dlk_source source; /* csv: the table; tar: the shard archive */
	struct dlk_source *shards; /* tar: several shard archives instead of one source (each worker of
	                              a job loads only its share of them); n_shards of them, owned */
	int n_shards;
};

struct dlk_data {
	enum dlk_data_format format;
	struct dlk_split train;
	struct dlk_split test;
	/* csv options */
	int csv_header;          /* -1 = detect (default), 0 no, 1 yes */
	int csv_label_column;    /* 0-based, -1 = last column (default) */
	/* scaling applied to raw values: x = (raw * scale - mean) / std */
	float scale;             /* default 1/255 for idx and tar, 1 for csv */
	float mean, std;         /* default 0 and 1 */
	char **classes;          /* optional class names, n_classes entries; NULL when not given */
	int n_classes;           /* 0 = infer from the last dense layer */
	char *cache_dir;         /* where fetched data is kept; default ".dlk/cache" (pod: /data) */
	long long max_bytes;     /* size limit for one fetched file; default 8 GiB */
	char *netrc_secret;      /* a Secret whose key "netrc" holds credentials for http(s) sources */
};

/* ---- model ---- */

enum dlk_layer_kind {
	DLK_LAYER_DENSE,
	DLK_LAYER_CONV2D,
	DLK_LAYER_MAXPOOL,
	DLK_LAYER_FLATTEN,
	DLK_LAYER_RELU,
	DLK_LAYER_TANH,
	DLK_LAYER_SIGMOID,
	DLK_LAYER_DROPOUT,
};

struct dlk_layer_spec {
	enum dlk_layer_kind kind;
	int units;      /* dense */
	int filters;    /* conv2d */
	int kernel;     /* conv2d (square), default 3 */
	int stride;     /* conv2d default 1; maxpool default = size */
	int padding;    /* conv2d default 0 */
	int size;       /* maxpool window, default 2 */
	float rate;     /* dropout probability, default 0.5 */
	int line, column; /* where it was declared in the project file (1-based; 0 if unknown) */
};

enum dlk_loss { DLK_LOSS_SOFTMAX_CE };

struct dlk_model {
	int input[3];             /* C, H, W; a flat input of n features is [1, 1, n] */
	int input_rank;           /* how many dims the user wrote (1 or 3) */
	struct dlk_layer_spec *layers;
	int n_layers;
	enum dlk_loss loss;
	char *init;               /* weight init scheme: "torch" (default: PyTorch's kaiming-uniform(a=sqrt 5)) or "xavier" */
};

/* ---- training ---- */

enum dlk_optim { DLK_OPT_SGD, DLK_OPT_ADAM, DLK_OPT_ADAMW };
enum dlk_lr_schedule { DLK_LR_CONSTANT, DLK_LR_STEP, DLK_LR_COSINE };

struct dlk_training {
	int epochs;               /* default 5 */
	int batch_size;           /* per worker; default 128 */
	enum dlk_optim optimizer; /* default adam */
	double lr;                /* default 1e-3 (adam/adamw), 0.01 (sgd) */
	double momentum;          /* sgd, default 0 */
	int nesterov;             /* sgd, default 0 */
	double weight_decay;      /* default 0 (sgd, adam), 0.01 (adamw) */
	double beta1, beta2, eps; /* adam/adamw: 0.9, 0.999, 1e-8 */
	enum dlk_lr_schedule schedule; /* default constant */
	int warmup_steps;         /* linear warm-up from 0, default 0 */
	int step_size;            /* step schedule: epochs between decays, default 1 */
	double gamma;             /* step schedule factor, default 0.1 */
	double min_lr;            /* cosine floor, default 0 */
	double grad_clip;         /* global L2 norm clip, 0 = off */
	unsigned long long seed;  /* default 42 */
	int threads;              /* BLAS/compute threads per worker, 0 = all cores */
	int checkpoint_every;     /* steps between checkpoints, 0 = only at epoch ends; default 500 */
	int checkpoint_keep;      /* newest N kept, default 3 */
	char *checkpoint_dir;     /* default ".dlk/checkpoints/<name>" locally, the PVC mount in a pod */
	int eval_every_epoch;     /* default 1 */
};

/* ---- cluster resources ---- */

struct dlk_kv {
	char *key;
	char *value;
};

struct dlk_toleration {
	char *key, *op, *value, *effect; /* op: Exists|Equal; NULLs when absent */
};

struct dlk_resources {
	int workers;              /* default 1 */
	int gpus;                 /* per worker, default 0 */
	char *gpu_product;        /* nvidia.com/gpu.product label value, NULL = any */
	char *cpu;                /* quantity, default "2" */
	char *memory;             /* quantity, default "4Gi" */
	char *shm_size;           /* /dev/shm size limit for GPU workers, default "1Gi" */
	struct dlk_kv *node_selector;
	int n_node_selector;
	struct dlk_toleration *tolerations;
	int n_tolerations;
	char *priority_class;     /* NULL = none */
	char *queue;              /* Kueue LocalQueue name, NULL = none */
	int backoff_limit_per_index; /* default 3 */
	int master_port;          /* rendezvous port, default 29500 */
};

struct dlk_storage {
	char *claim;              /* existing PVC name for checkpoints; NULL = none */
	char *size;               /* when set (and no claim), dlk creates a PVC of this size */
	char *storage_class;      /* for the created PVC; NULL = cluster default */
	char *mount;              /* mount path, default "/checkpoints" */
};

struct dlk_serving {
	int replicas;             /* default 1 */
	int port;                 /* default 8080 */
	char *cpu, *memory;       /* default "1", "1Gi" */
	int gpus;                 /* default 0 */
	double min_accuracy;      /* promote only at or above this test accuracy; default 0 */
};

struct dlk_project {
	char *path;               /* the file it was loaded from (for messages) */
	char *name;               /* DNS-1123 label, required */
	char *image;              /* container image, default "dlk:<version>", or "dlk:<version>-cuda"
	                           * when resources.gpus > 0 (the images `make image` builds) */
	char *namespace_;         /* NULL = from kubeconfig (kubectl's rule) */
	struct dlk_kv *labels;    /* extra labels on every object */
	int n_labels;
	struct dlk_data data;
	struct dlk_model model;
	struct dlk_training training;
	struct dlk_resources resources;
	struct dlk_storage storage;
	char *schedule;           /* cron expression; NULL = run once (a Job, not a CronJob) */
	struct dlk_serving serving;
};

/* Loads, applies --set overrides ("a.b.c=value", applied before validation, so they are
 * validated like the file), validates and fills defaults. On failure returns NULL and err holds
 * "file:line:column: key.path: what was wrong (did you mean ...)" with code DLK_EXIT_CONFIG,
 * or DLK_EXIT_USAGE for a malformed --set. All problems found are reported, one per line. */
struct dlk_project *project_load(const char *path, const char *const *sets, size_t n_sets, struct dlk_err *err);
/* Same, from text in memory; `name` is used in messages. */
struct dlk_project *project_load_mem(const char *text, size_t len, const char *name,
                               const char *const *sets, size_t n_sets, struct dlk_err *err);
void project_free(struct dlk_project *spec);

/* The resolved spec (every default explicit) as YAML that project_load_mem() reads back to an equal
 * spec. Deterministic: the same spec gives the same bytes. Caller frees. */
char *project_dump_yaml(const struct dlk_project *spec);
/* sha256 hex of project_dump_yaml(): the spec digest recorded in provenance. */
void project_digest(const struct dlk_project *spec, char hex[65]);

const char *project_layer_kind_name(enum dlk_layer_kind kind);
const char *project_optimizer_name(enum dlk_optim o);
const char *project_schedule_name(enum dlk_lr_schedule s);
const char *project_format_name(enum dlk_data_format f);

/* Every key path the loader accepts ("training.epochs", "model.layers[].dense.units", ...),
 * NULL-terminated; used for suggestions and shell completion of --set. */
const char *const *project_known_keys(void);

#endif
