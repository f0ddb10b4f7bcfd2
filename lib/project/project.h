/* The project specification: `dlk.yaml`, parsed, validated and with every default applied.
 *
 * This struct is the one thing the laptop half (render, submit) and the pod half (train --worker,
 * serve --worker) share. project_load() is the only place defaults are applied, and the same loader
 * runs on both sides, so they cannot disagree. The CLI renders project_dump_yaml() into a ConfigMap;
 * the worker reads that file back with project_load(). */
#ifndef DLK_PROJECT_PROJECT_H
#define DLK_PROJECT_PROJECT_H

#include <stddef.h>

#include "lib/project/program.h"
#include "lib/util/err.h"

/* ---- data ---- */

enum dlk_data_format { DLK_DATA_IDX, DLK_DATA_CSV, DLK_DATA_TAR, DLK_DATA_IMAGES, DLK_DATA_TEXT };

/* One value per channel (data.images.mean, data.images.std): n of them given, 0 = none. */
#define DLK_MAX_CHANNELS 4
struct dlk_channel_values {
	int n;
	float v[DLK_MAX_CHANNELS];
};

/* data.images.decode: when image files are decoded. auto: once, unless the decoded split would
 * take more than a quarter of the memory the process may use; then as stream. */
enum dlk_image_decode {
	DLK_DECODE_AUTO,
	DLK_DECODE_ONCE,   /* when the data loads, kept in memory as bytes */
	DLK_DECODE_STREAM, /* read and decoded each time a sample is used, on the loader threads */
};

/* data.images (format images): image folders, torchvision ImageFolder's way. */
struct dlk_images_spec {
	/* per-channel normalisation after scale: x = (raw * scale - mean[c]) / std[c]; one value
	 * means every channel; none: data.mean and data.std */
	struct dlk_channel_values mean, std;
	int flip;                /* training: a random horizontal flip, p = 0.5; default false */
	int crop_padding;        /* training: pad by this many zero pixels each side, then crop the
	                            input size at a random place; default 0 = no random crop */
	float noise;             /* model.task image: the inputs are the images with Gaussian noise of
	                            this standard deviation (raw pixel units, 0..255), the targets the
	                            images themselves (a denoiser); default 0 = none */
	enum dlk_image_decode decode; /* image folders; default auto */
};

enum dlk_tokenizer_kind { DLK_TOKENIZER_BYTE, DLK_TOKENIZER_BPE };

/* data.text (format text): rows of a CSV or JSON Lines file with a text and a label. */
struct dlk_text_spec {
	char *column;            /* the text's column (CSV header) or key (JSONL); default "text" */
	char *label;             /* the label's column or key; default "label" */
	enum dlk_tokenizer_kind tokenizer; /* default byte */
	int vocab_size;          /* bpe trained on the training split: default 1000 */
	char *vocab, *merges;    /* bpe from a GPT-2 vocab.json and merges.txt instead; both or none */
	char *separator;         /* tasks multilabel and regression: what separates a row's labels
	                            or numbers in its label column; default "|" */
};

/* One file to fetch: file://, https:// (or http://), pvc://claim/path; a bare path means file. */
struct dlk_source {
	char *url;      /* NULL when absent */
	char *sha256;   /* optional pin, 64 lowercase hex digits of the *fetched* bytes; NULL if none */
};

struct dlk_split {
	struct dlk_source images; /* idx: the images file */
	struct dlk_source labels; /* idx: the labels file */
	struct dlk_source source; /* csv: the table; tar: the shard archive */
	struct dlk_source targets; /* images with model.task image: the folder of target images, each
	                              paired with the input of the same name in source's folder */
	struct dlk_source *shards; /* tar: several shard archives instead of one source (each worker of
	                              a job loads only its share of them); n_shards of them, owned */
	int n_shards;
};

/* Where workers keep fetched objects (lib/store/cache.h): a volume the job template mounts. */
enum dlk_cache_volume { DLK_CACHE_EMPTYDIR, DLK_CACHE_HOSTPATH, DLK_CACHE_CHECKPOINT };

struct dlk_node_cache {
	enum dlk_cache_volume volume; /* default emptyDir: survives a container restart, not a new pod */
	char *host_path;         /* hostPath: the node's directory, default "/var/cache/dlk" */
	long long max_bytes;     /* the bound, evicting least recently used objects; default 20Gi */
};

struct dlk_data {
	enum dlk_data_format format;
	/* a versioned dataset (dlk data push), the sources then being paths inside it. Written
	 * "sha256:<id>", "NAME@TAG" (or NAME: NAME@latest), or {id, tag}: a tag is resolved to its
	 * id when a run is submitted, and both are kept. Both NULL: the sources are URLs */
	struct {
		char *id;            /* "sha256:<64 lowercase hex>" or NULL */
		char *tag;           /* "NAME@TAG" or NULL */
	} dataset;
	char *store;             /* where datasets are: a directory, file://, s3://BUCKET/PREFIX,
	                            pvc://CLAIM/PATH; NULL = none */
	char *store_secret;      /* a Secret with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and
	                            optionally AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL) that
	                            workers get as environment variables; NULL = none */
	struct dlk_node_cache node_cache;
	struct dlk_split train;
	struct dlk_split test;
	/* csv options */
	int csv_header;          /* -1 = detect (default), 0 no, 1 yes */
	int csv_label_column;    /* 0-based, -1 = last column (default) */
	int csv_targets;         /* > 0: the last csv_targets columns are float targets (regression,
	                            multilabel), no label column; default 0 */
	/* scaling applied to raw values: x = (raw * scale - mean) / std */
	float scale;             /* default 1/255 for idx and tar, 1 for csv */
	float mean, std;         /* default 0 and 1 */
	char **classes;          /* optional class names, n_classes entries; NULL when not given */
	int n_classes;           /* 0 = infer from the last dense layer */
	char *cache_dir;         /* where fetched data is kept; default ".dlk/cache" (pod: /data) */
	long long max_bytes;     /* size limit for one fetched file; default 8 GiB */
	char *netrc_secret;      /* a Secret whose key "netrc" holds credentials for http(s) sources */
	int shard;               /* each rank of a gang loads only its part of the training split
	                            (lib/data/load.c, lib/train/train.c); default false */
	int loader_threads;      /* threads gathering (and, streamed, decoding) batches ahead
	                            (lib/train/loader.h); default 0 = one per core the process may use */
	struct dlk_images_spec images;
	struct dlk_text_spec text;
	double validation;       /* task lm: the fraction of the training corpus's tokens (its end) held
	                            out as the validation split when data.test is not given; default 0 */
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
	DLK_LAYER_ADD,           /* the sum of its two inputs, of one shape (a residual connection) */
	DLK_LAYER_CONCAT,        /* its two inputs stacked along channels (same height and width) */
	DLK_LAYER_GLOBALAVGPOOL, /* each channel's mean over height and width: C features, flat */
	DLK_LAYER_LAYERNORM,
	DLK_LAYER_GELU,
	DLK_LAYER_SOFTMAX,
	DLK_LAYER_EMBEDDING,
	DLK_LAYER_UPSAMPLE,
	DLK_LAYER_ATTENTION,     /* multi-head self-attention over a sequence [1, T, D] (lib/nn/layer_attention.c) */
	DLK_LAYER_BATCHNORM,     /* per channel ([C, H, W]) or per feature (flat), batch statistics in training */
	DLK_LAYER_AVGPOOL,       /* each channel's mean over a size x size window (count_include_pad) */
	DLK_LAYER_CONVTRANSPOSE2D,
	DLK_LAYER_RESHAPE,       /* the same values in a new shape (one size may be -1: what is left) */
	DLK_LAYER_MEANPOOL,      /* a sequence [1, T, D]'s mean over its positions: D features, flat; with
	                            pad_id, the positions whose model-input id is pad_id are left out */
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
	/* the graph: a layer reads the layer before it (the model input for the first) unless it
	 * names its inputs; add and concat name two */
	int n_inputs;   /* 0 = the layer before it; else how many of inputs[] */
	int inputs[2];  /* the layers it reads, each before it; -1 = the model input */
	char name[32];  /* how later layers' inputs name it; "" = unnamed */
	float eps;      /* layernorm, default 1e-5 */
	int approximate; /* gelu: enum dlk_gelu (lib/nn/kernels.h), default exact (erf) */
	int vocab, dim; /* embedding: rows of the table, width of each */
	int tie;        /* dense: 1 + the index of the embedding layer whose table is its weight (GPT-2's
	                   lm_head = wte; units = vocab, input width = dim, no bias); 0 = its own */
	int scale;      /* upsample: the integer factor of height and width, default 2 */
	int mode;       /* upsample: enum dlk_upsample_mode (lib/nn/kernels.h), default nearest */
	int positions;  /* embedding: learned position embeddings for up to this many positions, 0 = none */
	/* attention: heads (dividing D); causal (the project file's default is 1); rotary position
	 * embeddings; pad_id >= 0: keys whose model-input id is pad_id are masked out (the project
	 * file's default is -1, none: a spec made in C must set it); rate: dropout on the weights.
	 * meanpool: pad_id as attention's (positions whose model-input id is pad_id are left out) */
	int heads, causal, rotary, pad_id;
	int groups;     /* conv2d: channels and filters in this many groups, default 1 (= channels: depthwise) */
	int target[3], target_rank; /* reshape: the sizes as written (one may be -1), 1 to 3 of them */
	int output_padding; /* convtranspose2d: extra rows and columns at the bottom and right, < stride; default 0 */
	float momentum; /* batchnorm: the running statistics' update factor, default 0.1 (PyTorch's); eps: 1e-5 */
	int line, column; /* where it was declared in the project file (1-based; 0 if unknown) */
	/* where the file wrote it, for messages (the loader sets these; a model.json leaves them 0):
	 * use = 1 + its index in model.layers as written (a block's layer: the index of the
	 * `block:` use); block = the block's name and block_pos its index there, rep its repetition
	 * (0-based) -- block "" for a layer written in model.layers itself */
	int use;
	char block[32];
	int block_pos, rep, reps;
};

/* token_cross_entropy (task lm): softmax cross-entropy at every position of a [1, T, V] output
 * against the next token, the mean over the positions whose target is not ignored (negative) */
enum dlk_loss { DLK_LOSS_SOFTMAX_CE, DLK_LOSS_BCE, DLK_LOSS_MSE, DLK_LOSS_L1, DLK_LOSS_HUBER, DLK_LOSS_TOKEN_CE };
/* What the model predicts, which decides its targets, default loss and metrics (lib/nn/loss.h):
 * classification: one class per sample (int labels); multilabel: a 0/1 target per class;
 * regression: float targets; image: a float target of the output's shape (dense prediction);
 * lm: next-token prediction, a [1, T, V] output of logits per position (a language model). */
enum dlk_task { DLK_TASK_CLASSIFICATION, DLK_TASK_MULTILABEL, DLK_TASK_REGRESSION, DLK_TASK_IMAGE, DLK_TASK_LM };

struct dlk_model {
	int input[3];             /* C, H, W; a flat input of n features is [1, 1, n] */
	int input_rank;           /* how many dims the user wrote (1 or 3) */
	struct dlk_layer_spec *layers; /* flat: each `block:` use is expanded into its layers */
	int n_layers;
	enum dlk_loss loss;       /* default by task: softmax_cross_entropy, binary_cross_entropy, mse, mse */
	char *init;               /* weight init scheme (dlk_net_init_params): "torch" (PyTorch's
	                             kaiming-uniform(a=sqrt 5)), "xavier" or "gpt2"; default gpt2 for a
	                             model with an attention layer, torch otherwise */
	enum dlk_task task;       /* default classification */
	double huber_delta;       /* loss huber: default 1 */
	double threshold;         /* multilabel: a class is predicted when sigmoid(logit) >= this; default 0.5 */
	int n_blocks;             /* how many model.blocks the file defined (layers holds their uses expanded) */
	char *init_from;          /* a Hugging Face GPT-2 directory whose weights the run starts from
	                             (lib/export/hf.h); NULL = none */
};

/* ---- training ---- */

enum dlk_optim { DLK_OPT_SGD, DLK_OPT_ADAM, DLK_OPT_ADAMW };
enum dlk_lr_schedule { DLK_LR_CONSTANT, DLK_LR_STEP, DLK_LR_COSINE };

/* training.precision: what the matrix products of dense layers multiply (lib/nn/cpu_bgemm.h) */
enum dlk_precision { DLK_PRECISION_FP32, DLK_PRECISION_BF16 };

struct dlk_training {
	int epochs;               /* default 5 */
	int batch_size;           /* per worker; default 128 */
	int accumulate;           /* micro-batches of batch_size per optimizer step; default 1 */
	int zero;                 /* ZeRO stage: 1 shards the optimizer state over the ranks; default 0 */
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
	double label_smoothing;   /* classification: PyTorch's label_smoothing, default 0 */
	int decay_norms_and_biases; /* weight decay on biases (and norms) too; default 0, as most recipes */
	int recompute;            /* activation recomputation of each model.blocks repetition
	                             (dlk_net_set_recompute); default 0 */
	enum dlk_precision precision; /* default fp32 */
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
	int metrics_port;         /* each worker serves Prometheus metrics here, default 9464; 0: none */
};

struct dlk_storage {
	char *claim;              /* existing PVC name for checkpoints; NULL = none */
	char *size;               /* when set (and no claim), dlk creates a PVC of this size */
	char *storage_class;      /* for the created PVC; NULL = cluster default */
	char *mount;              /* mount path, default "/checkpoints" */
};

/* serving.stream: scoring a Kafka topic (dlk serve --stream; see lib/stream/stream.h) */
struct dlk_stream_spec {
	char *brokers;            /* host:port[,host:port...]; NULL = no stream */
	char *input, *output;     /* topics; both required with brokers */
	char *dead_letter;        /* default INPUT.dlq */
	char *group;              /* consumer group, default the project's name */
	char *instance;           /* transactional id suffix, default the host (pod) name */
	int exactly_once;         /* default true; false = at-least-once */
	char *format;             /* records without a content-type header: raw (default) or json */
	char *datatype;           /* raw records without a dlk-datatype header, default FP32 */
	int max_records;          /* records per transaction, default 2000 */
	int commit_ms;            /* longest a transaction gathers, default 100 */
	struct dlk_kv *properties; /* librdkafka properties for both clients */
	int n_properties;
};

/* One rule of serving.gate: the run's test metric `metric` (a name of lib/train/eval.h's list, or
 * "loss") must be at least min and/or at most max. */
struct dlk_gate_rule {
	char *metric;
	double min, max;
	int has_min, has_max;
};

struct dlk_serving {
	int replicas;             /* default 1 */
	int port;                 /* default 8080 */
	char *cpu, *memory;       /* default "1", "1Gi" */
	int gpus;                 /* default 0 */
	double min_accuracy;      /* promote only at or above this test accuracy; default 0 */
	double min_class_recall;  /* and only when every class's recall is at least this; default 0 */
	double max_val_loss;      /* task lm: and only when the validation loss is at most this; 0 = none */
	struct dlk_gate_rule *gate; /* and only when every rule holds (serving.gate: [{metric, min, max}]) */
	int n_gate;
	int max_replicas;         /* above replicas: a HorizontalPodAutoscaler scales up to it; default 0 (none) */
	int target_cpu_percent;   /* the autoscaler's CPU utilisation target, default 70 */
	char *gateway;            /* the Gateway (NAME or NAMESPACE/NAME) an HTTPRoute attaches the model
	                             to, when the cluster serves the Gateway API; NULL: none */
	/* the inference server (dlk serve --local / --worker) */
	int max_batch;            /* rows in one forward pass, default 64 */
	long long max_memory;     /* bytes one compute worker's forward pass of a model may need
	                             (activations for max_batch rows); a model needing more gets a
	                             smaller batch, one that needs more for a single row is refused;
	                             default 1Gi */
	int max_delay_us;         /* how long a batch may wait for more rows, default 0: a batch is
	                             what queued while the compute workers were busy */
	int workers;              /* compute workers, 0 = one per core (one per GPU) */
	int threads;              /* BLAS threads per compute worker, 0 = cores / workers */
	int http_threads;         /* threads decoding and encoding requests, 0 = one per core */
	long long max_request_bytes; /* request body limit (413 above it), default 64Mi */
	int max_json_depth;       /* nesting limit of a JSON body, default 32 */
	int max_connections;      /* default 1024 */
	int idle_timeout_s;       /* a connection silent this long is closed, default 30 */
	int request_timeout_s;    /* a request body must arrive within this, default 60 */
	int drain_delay_s;        /* on SIGTERM, new requests are still answered this long (readiness
	                             already fails) while load balancers stop sending; default 0 */
	int drain_timeout_s;      /* then in-flight requests finish within this, default 25 */
	int access_log;           /* one line per request on stdout, default false */
	struct dlk_stream_spec stream;
	struct dlk_program_server program; /* the user's own server instead of a bundle (lib/project/program.h) */
};

enum dlk_trigger { DLK_TRIGGER_ALWAYS, DLK_TRIGGER_DATA_CHANGED };

/* logging: how the pods write their logs */
enum dlk_log_fmt { DLK_LOGFMT_TEXT, DLK_LOGFMT_JSON };
struct dlk_logging {
	enum dlk_log_fmt format;  /* default text; json: one JSON object per line (--log-format json) */
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
	enum dlk_trigger trigger; /* default always; data-changed: a run in the cluster whose data is what
	                             the last successful run trained on is recorded skipped, not trained */
	struct dlk_serving serving;
	struct dlk_logging logging;
	struct dlk_program program; /* the user's own program as the workload (lib/project/program.h) */
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

/* The serving section alone, for `dlk serve --local` without a project file: the defaults of the
 * table project_load() uses, with --set serving.KEY=VALUE overrides validated as it validates
 * them (any other key is a usage error). project_serving_release() frees its strings. */
int project_serving_load(const char *const *sets, size_t n_sets, struct dlk_serving *out, struct dlk_err *err);
void project_serving_release(struct dlk_serving *s);

const char *project_optimizer_name(enum dlk_optim o);
const char *project_schedule_name(enum dlk_lr_schedule s);
const char *project_format_name(enum dlk_data_format f);
/* Whether a format's samples are 8-bit images [C, H, W] that data.images (per-channel values,
 * flip, random crops) applies to: images, idx and tar. */
int project_format_has_images(enum dlk_data_format f);
/* Whether a task's data are paired images, inputs with target images (two folders, or tar shards
 * of KEY.png + KEY.target.png): format images with task image, without data.images.noise (which
 * makes the targets of the images themselves). */
int project_paired_images(const struct dlk_data *d, enum dlk_task task);
const char *project_cache_volume_name(enum dlk_cache_volume v);

/* Every key path the loader accepts ("training.epochs", "model.layers[].dense.units", ...),
 * NULL-terminated; used for suggestions and shell completion of --set. */
const char *const *project_known_keys(void);

#endif
