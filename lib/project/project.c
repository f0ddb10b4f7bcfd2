/* project_load(): dlk.yaml -> struct dlk_project.
 *
 * The file is read into a small position-keeping tree (ytree.c), --set overrides are grafted
 * onto that tree, and then one walk over a declarative schema (the field tables below) converts,
 * validates and records every problem it meets, so the user sees all of them at once. The same
 * tables drive the defaults, the dump, project_free() and project_known_keys(), so a field added to a
 * table is handled everywhere. */
#include "lib/project/project.h"
#include "lib/project/check.h"
#include "lib/project/layers.h"
#include "lib/project/program_load.h"
#include "lib/program/protocol.h"
#include "lib/store/manifest.h"
#include "lib/util/ytree.h"
#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"
#include "lib/util/utf8.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <strings.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DLK_VERSION
#error "DLK_VERSION must be defined (the Makefile passes -DDLK_VERSION)"
#endif
#define DLK_DEFAULT_IMAGE "dlk:" DLK_VERSION
#define DLK_DEFAULT_CUDA_IMAGE "dlk:" DLK_VERSION "-cuda" /* the names `make image` gives */

#define SPEC_MAX_FILE (1 << 20)  /* bytes of dlk.yaml */
#define SPEC_MAX_LAYERS 256
#define SPEC_MAX_USE_KEYS 64     /* keys of a use of a block, and of a block's layer */
#define SPEC_MAX_KV 64           /* labels, node selector entries */
#define SPEC_MAX_TOLERATIONS 64
#define SPEC_MAX_CLASSES 65536
#define SPEC_MAX_SETS 256
#define SPEC_NAME_MAX 50         /* pods get "-<index>-<random>" suffixes within 63 */

/* dlk.yaml is small and plain: shallow, bounded, no anchors and aliases */
static const struct ytree_opts yaml_opts = {
	.max_depth = 32, .max_nodes = 200000, .max_items = 100000, .aliases = 0,
};

/* The reader's problem in the words dlk.yaml's messages use. */
static const char *yaml_problem_text(const struct ytree_error *e, char *buf, size_t len)
{
	char ctx[256] = "";

	switch (e->problem) {
	case YTREE_SYNTAX:
		if (e->yaml_context)
			snprintf(ctx, sizeof(ctx), " (%s at line %d, column %d)", e->yaml_context, e->context_line,
			         e->context_col);
		else if (e->byte >= 0)
			snprintf(ctx, sizeof(ctx), " (byte 0x%02x)", (unsigned)e->byte);
		snprintf(buf, len, "invalid YAML: %s%s", e->yaml_problem ? e->yaml_problem : "invalid YAML", ctx);
		return buf;
	case YTREE_MORE_DOCS:
		snprintf(buf, len, "the file holds more than one YAML document; dlk.yaml must hold one");
		return buf;
	case YTREE_ALIAS:
		snprintf(buf, len, "alias '*%.*s' is not supported: dlk.yaml does not allow anchors and aliases; "
		         "write the value out", (int)strlen(e->name), e->name);
		return buf;
	case YTREE_NUL:
		snprintf(buf, len, "a string contains a NUL character");
		return buf;
	case YTREE_TOO_DEEP:
		snprintf(buf, len, "nesting is deeper than %d levels", yaml_opts.max_depth);
		return buf;
	case YTREE_TOO_MANY_NODES:
		snprintf(buf, len, "document has too many nodes");
		return buf;
	default:
		return ytree_error_text(e, &yaml_opts, buf, len);
	}
}

/* ---- the schema ---- */

enum ftype {
	F_INT,    /* int */
	F_U64,    /* unsigned long long */
	F_DOUBLE, /* double */
	F_FLOAT,  /* float */
	F_BOOL,   /* int 0/1 */
	F_STR,    /* char * */
	F_ENUM,   /* an enum, by name */
	F_BYTES,  /* long long, an integer or a byte quantity */
	F_MAP,    /* a nested struct described by sub */
	F_CUSTOM, /* parsed by custom->parse */
};

enum {
	REQ = 1,       /* must be given */
	MIN_EXCL = 2,  /* value > min rather than >= */
	MAX_EXCL = 4,  /* value < max rather than <= */
	ANY_SCALAR = 8 /* F_STR: take any scalar's text (cpu: 2 is as good as cpu: "2") */
};

struct ctx;
struct field;

struct custom {
	/* val is never NULL nor a null scalar; base is the struct holding the field */
	void (*parse)(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path);
	/* writes what follows "key:", newline included */
	void (*dump)(struct dlk_buf *b, const struct field *f, const void *base, int indent);
	void (*free)(const struct field *f, void *base);
	const char *const *subkeys; /* for project_known_keys(), NULL-terminated suffixes */
};

typedef int (*check_fn)(const char *s, char *why, size_t why_len);

struct field {
	const char *key;
	enum ftype type;
	size_t off;                   /* offset in the enclosing struct */
	int flags;
	double min, max;              /* numeric bounds */
	const char *def;              /* default as YAML text; NULL: none or dependent (see apply_defaults) */
	const char *const *names;     /* F_ENUM: names in enum order; F_STR: the allowed values */
	check_fn check;               /* F_STR: syntax check */
	const struct field *sub;      /* F_MAP */
	const char *scalar_key;       /* F_MAP: a bare scalar means {scalar_key: scalar} */
	const struct custom *custom;  /* F_CUSTOM */
};

#define FIELD(k, t, type_, member, ...) \
	{ .key = k, .type = type_, .off = offsetof(t, member), __VA_ARGS__ }
#define END { .key = NULL }

static int check_name(const char *s, char *why, size_t len) { return check_dns_label(s, SPEC_NAME_MAX, why, len); }
static int check_label63(const char *s, char *why, size_t len) { return check_dns_label(s, 63, why, len); }

static int check_sha256(const char *s, char *why, size_t len)
{
	if (!dlk_sha256_is_hex(s))
		return snprintf(why, len, "expected 64 hex digits"), -1;
	return 0;
}

/* a Kafka topic name: 1 to 249 of [A-Za-z0-9._-], not "." or ".." */
static int check_topic(const char *s, char *why, size_t len)
{
	size_t n = strlen(s);

	if (!n || n > 249 || !strcmp(s, ".") || !strcmp(s, ".."))
		return snprintf(why, len, "a topic name has 1 to 249 characters and is not '.' or '..'"), -1;
	if (strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
		return snprintf(why, len, "a topic name has only letters, digits, '.', '_' and '-'"), -1;
	return 0;
}

/* Kafka bootstrap brokers: host:port[,host:port...] */
static int check_brokers(const char *s, char *why, size_t len)
{
	const char *p = s;

	do {
		const char *end = strchr(p, ','), *colon;
		size_t n = end ? (size_t)(end - p) : strlen(p);
		colon = memrchr(p, ':', n);
		if (!colon || colon == p || colon + 1 == p + n ||
		    strspn(colon + 1, "0123456789") != (size_t)(p + n - colon - 1) || p + n - colon - 1 > 5)
			return snprintf(why, len, "expected host:port[,host:port...]"), -1;
		for (const char *q = p; q < colon; q++)
			if ((unsigned char)*q <= ' ' || *q == '/')
				return snprintf(why, len, "expected host:port[,host:port...]"), -1;
		p = end ? end + 1 : NULL;
	} while (p);
	return 0;
}

static int check_nonempty(const char *s, char *why, size_t len)
{
	if (!*s)
		return snprintf(why, len, "must not be empty"), -1;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20)
			return snprintf(why, len, "contains a control character"), -1;
	return 0;
}

static int check_abs_path(const char *s, char *why, size_t len)
{
	if (check_nonempty(s, why, len))
		return -1;
	if (s[0] != '/')
		return snprintf(why, len, "must be an absolute path"), -1;
	return 0;
}

static int check_dataset_id(const char *s, char *why, size_t len)
{
	if (strncmp(s, "sha256:", 7) || !dlk_sha256_is_hex(s + 7))
		return snprintf(why, len, "expected sha256: and 64 hex digits"), -1;
	return 0;
}

static int check_dataset_tag(const char *s, char *why, size_t len)
{
	return dlk_dataset_tag_check(s, why, len);
}

static int check_label_value_nonempty(const char *s, char *why, size_t len)
{
	if (!*s)
		return snprintf(why, len, "must not be empty"), -1;
	return check_label_value(s, why, len);
}

static const char *const format_names[] = { "idx", "csv", "tar", "images", "text", NULL };
static const char *const tokenizer_names[] = { "byte", "bpe", NULL };
static const char *const decode_names[] = { "auto", "once", "stream", NULL };
static const char *const cache_volume_names[] = { "emptyDir", "hostPath", "checkpoint", NULL };
static const char *const trigger_names[] = { "always", "data-changed", NULL };
static const char *const loss_names[] = { "softmax_cross_entropy", "binary_cross_entropy", "mse", "l1", "huber",
	"token_cross_entropy", NULL };
static const char *const task_names[] = { "classification", "multilabel", "regression", "image", "lm", NULL };
static const char *const init_names[] = { "torch", "xavier", "gpt2", NULL };
static const char *const optim_names[] = { "sgd", "adam", "adamw", NULL };
static const char *const sched_names[] = { "constant", "step", "cosine", NULL };
static const char *const precision_names[] = { "fp32", "bf16", NULL }; /* enum dlk_precision */
static const char *const toleration_ops[] = { "Exists", "Equal", NULL };
static const char *const toleration_effects[] = { "NoSchedule", "PreferNoSchedule", "NoExecute", NULL };

/* custom handlers, defined further down */
static const struct custom c_program, c_program_server, c_kafka_props, c_labels, c_node_selector, c_source, c_shards,
	c_classes, c_csv_header, c_channel_values, c_input, c_layers, c_blocks, c_tolerations, c_dataset, c_gate;

static const struct field source_fields[] = {
	FIELD("url", struct dlk_source, F_STR, url, .flags = REQ, .check = check_source_url),
	FIELD("sha256", struct dlk_source, F_STR, sha256, .check = check_sha256),
	END
};

static const struct field dataset_fields[] = {
	FIELD("id", struct dlk_data, F_STR, dataset.id, .check = check_dataset_id),
	FIELD("tag", struct dlk_data, F_STR, dataset.tag, .check = check_dataset_tag),
	END
};

static const struct field split_fields[] = {
	FIELD("images", struct dlk_split, F_CUSTOM, images, .custom = &c_source),
	FIELD("labels", struct dlk_split, F_CUSTOM, labels, .custom = &c_source),
	FIELD("source", struct dlk_split, F_CUSTOM, source, .custom = &c_source),
	FIELD("targets", struct dlk_split, F_CUSTOM, targets, .custom = &c_source),
	FIELD("shards", struct dlk_split, F_CUSTOM, shards, .custom = &c_shards),
	END
};

static const struct field csv_fields[] = {
	FIELD("header", struct dlk_data, F_CUSTOM, csv_header, .custom = &c_csv_header),
	FIELD("label_column", struct dlk_data, F_INT, csv_label_column, .min = -1, .max = 1 << 20, .def = "-1"),
	FIELD("targets", struct dlk_data, F_INT, csv_targets, .min = 0, .max = 1 << 20, .def = "0"),
	END
};

static const struct field images_fields[] = {
	FIELD("mean", struct dlk_images_spec, F_CUSTOM, mean, .custom = &c_channel_values),
	FIELD("std", struct dlk_images_spec, F_CUSTOM, std, .custom = &c_channel_values),
	FIELD("flip", struct dlk_images_spec, F_BOOL, flip, .def = "false"),
	FIELD("crop_padding", struct dlk_images_spec, F_INT, crop_padding, .min = 0, .max = 1024, .def = "0"),
	FIELD("noise", struct dlk_images_spec, F_FLOAT, noise, .min = 0, .max = 255, .def = "0"),
	FIELD("decode", struct dlk_images_spec, F_ENUM, decode, .names = decode_names, .def = "auto"),
	END
};

static const struct field text_fields[] = {
	FIELD("column", struct dlk_text_spec, F_STR, column, .check = check_nonempty, .def = "text"),
	FIELD("label", struct dlk_text_spec, F_STR, label, .check = check_nonempty, .def = "label"),
	FIELD("tokenizer", struct dlk_text_spec, F_ENUM, tokenizer, .names = tokenizer_names, .def = "byte"),
	FIELD("vocab_size", struct dlk_text_spec, F_INT, vocab_size, .min = 260, .max = 1 << 20, .def = "1000"),
	FIELD("vocab", struct dlk_text_spec, F_STR, vocab, .check = check_nonempty),
	FIELD("merges", struct dlk_text_spec, F_STR, merges, .check = check_nonempty),
	FIELD("separator", struct dlk_text_spec, F_STR, separator, .check = check_nonempty, .def = "|"),
	END
};

static const struct field node_cache_fields[] = {
	FIELD("volume", struct dlk_node_cache, F_ENUM, volume, .names = cache_volume_names, .def = "emptyDir"),
	FIELD("host_path", struct dlk_node_cache, F_STR, host_path, .check = check_abs_path, .def = "/var/cache/dlk"),
	FIELD("max_bytes", struct dlk_node_cache, F_BYTES, max_bytes, .def = "20Gi"),
	END
};

/* csv options live in struct dlk_data itself, so csv's "struct" is dlk_data at offset 0 */
static const struct field data_fields[] = {
	FIELD("format", struct dlk_data, F_ENUM, format, .names = format_names, .def = "idx"),
	FIELD("dataset", struct dlk_data, F_CUSTOM, dataset, .custom = &c_dataset),
	FIELD("store", struct dlk_data, F_STR, store, .check = check_store_url),
	FIELD("store_secret", struct dlk_data, F_STR, store_secret, .check = check_dns_subdomain),
	FIELD("node_cache", struct dlk_data, F_MAP, node_cache, .sub = node_cache_fields),
	FIELD("train", struct dlk_data, F_MAP, train, .flags = REQ, .sub = split_fields),
	FIELD("test", struct dlk_data, F_MAP, test, .sub = split_fields),
	{ .key = "csv", .type = F_MAP, .off = 0, .sub = csv_fields },
	FIELD("scale", struct dlk_data, F_FLOAT, scale, .flags = MIN_EXCL, .min = 0, .max = 1e30),
	FIELD("mean", struct dlk_data, F_FLOAT, mean, .min = -1e30, .max = 1e30, .def = "0"),
	FIELD("std", struct dlk_data, F_FLOAT, std, .flags = MIN_EXCL, .min = 0, .max = 1e30, .def = "1"),
	FIELD("classes", struct dlk_data, F_CUSTOM, classes, .custom = &c_classes),
	FIELD("cache_dir", struct dlk_data, F_STR, cache_dir, .check = check_nonempty, .def = ".dlk/cache"),
	FIELD("max_bytes", struct dlk_data, F_BYTES, max_bytes, .def = "8Gi"),
	FIELD("shard", struct dlk_data, F_BOOL, shard, .def = "false"),
	FIELD("loader_threads", struct dlk_data, F_INT, loader_threads, .min = 0, .max = 256, .def = "0"),
	FIELD("netrc_secret", struct dlk_data, F_STR, netrc_secret, .check = check_dns_subdomain),
	FIELD("images", struct dlk_data, F_MAP, images, .sub = images_fields),
	FIELD("text", struct dlk_data, F_MAP, text, .sub = text_fields),
	FIELD("validation", struct dlk_data, F_DOUBLE, validation, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0"),
	END
};

static const struct field model_fields[] = {
	FIELD("input", struct dlk_model, F_CUSTOM, input, .flags = REQ, .custom = &c_input),
	FIELD("blocks", struct dlk_model, F_CUSTOM, n_blocks, .custom = &c_blocks),
	FIELD("layers", struct dlk_model, F_CUSTOM, layers, .flags = REQ, .custom = &c_layers),
	FIELD("task", struct dlk_model, F_ENUM, task, .names = task_names, .def = "classification"),
	FIELD("loss", struct dlk_model, F_ENUM, loss, .names = loss_names),
	FIELD("huber_delta", struct dlk_model, F_DOUBLE, huber_delta, .flags = MIN_EXCL, .min = 0, .max = 1e30, .def = "1"),
	FIELD("threshold", struct dlk_model, F_DOUBLE, threshold, .flags = MIN_EXCL | MAX_EXCL, .min = 0, .max = 1, .def = "0.5"),
	FIELD("init", struct dlk_model, F_STR, init, .names = init_names),
	FIELD("init_from", struct dlk_model, F_STR, init_from, .check = check_nonempty),
	END
};

static const struct field optimizer_fields[] = {
	FIELD("name", struct dlk_training, F_ENUM, optimizer, .names = optim_names, .def = "adam"),
	FIELD("lr", struct dlk_training, F_DOUBLE, lr, .flags = MIN_EXCL, .min = 0, .max = 1e6),
	FIELD("momentum", struct dlk_training, F_DOUBLE, momentum, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0"),
	FIELD("nesterov", struct dlk_training, F_BOOL, nesterov, .def = "false"),
	FIELD("weight_decay", struct dlk_training, F_DOUBLE, weight_decay, .min = 0, .max = 1e6),
	FIELD("beta1", struct dlk_training, F_DOUBLE, beta1, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0.9"),
	FIELD("beta2", struct dlk_training, F_DOUBLE, beta2, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0.999"),
	FIELD("eps", struct dlk_training, F_DOUBLE, eps, .flags = MIN_EXCL, .min = 0, .max = 1, .def = "1.0e-8"),
	END
};

static const struct field schedule_fields[] = {
	FIELD("name", struct dlk_training, F_ENUM, schedule, .names = sched_names, .def = "constant"),
	FIELD("warmup_steps", struct dlk_training, F_INT, warmup_steps, .min = 0, .max = INT_MAX, .def = "0"),
	FIELD("step_size", struct dlk_training, F_INT, step_size, .min = 1, .max = INT_MAX, .def = "1"),
	FIELD("gamma", struct dlk_training, F_DOUBLE, gamma, .flags = MIN_EXCL, .min = 0, .max = 1e6, .def = "0.1"),
	FIELD("min_lr", struct dlk_training, F_DOUBLE, min_lr, .min = 0, .max = 1e6, .def = "0"),
	END
};

static const struct field checkpoint_fields[] = {
	FIELD("every", struct dlk_training, F_INT, checkpoint_every, .min = 0, .max = INT_MAX, .def = "500"),
	FIELD("keep", struct dlk_training, F_INT, checkpoint_keep, .min = 1, .max = 1000, .def = "3"),
	FIELD("dir", struct dlk_training, F_STR, checkpoint_dir, .check = check_nonempty),
	END
};

/* optimizer, lr_schedule and checkpoint are nested in YAML but flat in struct dlk_training */
static const struct field training_fields[] = {
	FIELD("epochs", struct dlk_training, F_INT, epochs, .min = 1, .max = 1000000, .def = "5"),
	FIELD("batch_size", struct dlk_training, F_INT, batch_size, .min = 1, .max = 1 << 20, .def = "128"),
	FIELD("accumulate", struct dlk_training, F_INT, accumulate, .min = 1, .max = 1 << 16, .def = "1"),
	FIELD("zero", struct dlk_training, F_INT, zero, .min = 0, .max = 1, .def = "0"),
	{ .key = "optimizer", .type = F_MAP, .off = 0, .sub = optimizer_fields, .scalar_key = "name" },
	{ .key = "lr_schedule", .type = F_MAP, .off = 0, .sub = schedule_fields, .scalar_key = "name" },
	FIELD("grad_clip", struct dlk_training, F_DOUBLE, grad_clip, .min = 0, .max = 1e30, .def = "0"),
	FIELD("seed", struct dlk_training, F_U64, seed, .def = "42"),
	FIELD("threads", struct dlk_training, F_INT, threads, .min = 0, .max = 4096, .def = "0"),
	{ .key = "checkpoint", .type = F_MAP, .off = 0, .sub = checkpoint_fields },
	FIELD("eval_every_epoch", struct dlk_training, F_BOOL, eval_every_epoch, .def = "true"),
	FIELD("label_smoothing", struct dlk_training, F_DOUBLE, label_smoothing, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0"),
	FIELD("decay_norms_and_biases", struct dlk_training, F_BOOL, decay_norms_and_biases, .def = "false"),
	FIELD("recompute", struct dlk_training, F_BOOL, recompute, .def = "false"),
	FIELD("precision", struct dlk_training, F_ENUM, precision, .names = precision_names, .def = "fp32"),
	END
};

static const struct field toleration_fields[] = {
	FIELD("key", struct dlk_toleration, F_STR, key, .check = check_label_key),
	FIELD("operator", struct dlk_toleration, F_STR, op, .names = toleration_ops),
	FIELD("value", struct dlk_toleration, F_STR, value, .flags = ANY_SCALAR, .check = check_label_value),
	FIELD("effect", struct dlk_toleration, F_STR, effect, .names = toleration_effects),
	END
};

static const struct field resources_fields[] = {
	FIELD("workers", struct dlk_resources, F_INT, workers, .min = 1, .max = 1024, .def = "1"),
	FIELD("gpus", struct dlk_resources, F_INT, gpus, .min = 0, .max = 16, .def = "0"),
	FIELD("gpu_product", struct dlk_resources, F_STR, gpu_product, .flags = ANY_SCALAR, .check = check_label_value_nonempty),
	FIELD("cpu", struct dlk_resources, F_STR, cpu, .flags = ANY_SCALAR, .check = check_quantity, .def = "2"),
	FIELD("memory", struct dlk_resources, F_STR, memory, .flags = ANY_SCALAR, .check = check_quantity, .def = "4Gi"),
	FIELD("shm_size", struct dlk_resources, F_STR, shm_size, .flags = ANY_SCALAR, .check = check_quantity, .def = "1Gi"),
	FIELD("node_selector", struct dlk_resources, F_CUSTOM, node_selector, .custom = &c_node_selector),
	FIELD("tolerations", struct dlk_resources, F_CUSTOM, tolerations, .custom = &c_tolerations),
	FIELD("priority_class", struct dlk_resources, F_STR, priority_class, .check = check_dns_subdomain),
	FIELD("queue", struct dlk_resources, F_STR, queue, .check = check_dns_subdomain),
	FIELD("backoff_limit_per_index", struct dlk_resources, F_INT, backoff_limit_per_index, .min = 0, .max = 1000, .def = "3"),
	FIELD("master_port", struct dlk_resources, F_INT, master_port, .min = 1, .max = 65535, .def = "29500"),
	FIELD("metrics_port", struct dlk_resources, F_INT, metrics_port, .min = 0, .max = 65535, .def = "9464"),
	END
};

static const struct field storage_fields[] = {
	FIELD("claim", struct dlk_storage, F_STR, claim, .check = check_dns_subdomain),
	FIELD("size", struct dlk_storage, F_STR, size, .flags = ANY_SCALAR, .check = check_quantity),
	FIELD("storage_class", struct dlk_storage, F_STR, storage_class, .check = check_dns_subdomain),
	FIELD("mount", struct dlk_storage, F_STR, mount, .check = check_abs_path, .def = "/checkpoints"),
	END
};

static const char *const stream_formats[] = { "raw", "json", "text", NULL }; /* lib/stream/record.h's */
static const char *const stream_datatypes[] = { "FP16", "FP32", "FP64", "INT8", "UINT8", "INT16", "UINT16", "INT32",
	"UINT32", "INT64", "UINT64", NULL };

static const struct field stream_fields[] = {
	FIELD("brokers", struct dlk_stream_spec, F_STR, brokers, .check = check_brokers),
	FIELD("input", struct dlk_stream_spec, F_STR, input, .check = check_topic),
	FIELD("output", struct dlk_stream_spec, F_STR, output, .check = check_topic),
	FIELD("dead_letter", struct dlk_stream_spec, F_STR, dead_letter, .check = check_topic),
	FIELD("group", struct dlk_stream_spec, F_STR, group, .check = check_nonempty),
	FIELD("instance", struct dlk_stream_spec, F_STR, instance, .check = check_nonempty),
	FIELD("exactly_once", struct dlk_stream_spec, F_BOOL, exactly_once, .def = "true"),
	FIELD("format", struct dlk_stream_spec, F_STR, format, .names = stream_formats, .def = "raw"),
	FIELD("datatype", struct dlk_stream_spec, F_STR, datatype, .names = stream_datatypes, .def = "FP32"),
	FIELD("max_records", struct dlk_stream_spec, F_INT, max_records, .min = 1, .max = 1 << 20, .def = "2000"),
	FIELD("commit_ms", struct dlk_stream_spec, F_INT, commit_ms, .min = 1, .max = 600000, .def = "100"),
	FIELD("properties", struct dlk_stream_spec, F_CUSTOM, properties, .custom = &c_kafka_props),
	END
};

static const struct field serving_fields[] = {
	FIELD("replicas", struct dlk_serving, F_INT, replicas, .min = 1, .max = 1000, .def = "1"),
	FIELD("port", struct dlk_serving, F_INT, port, .min = 1, .max = 65535, .def = "8080"),
	FIELD("cpu", struct dlk_serving, F_STR, cpu, .flags = ANY_SCALAR, .check = check_quantity, .def = "1"),
	FIELD("memory", struct dlk_serving, F_STR, memory, .flags = ANY_SCALAR, .check = check_quantity, .def = "1Gi"),
	FIELD("gpus", struct dlk_serving, F_INT, gpus, .min = 0, .max = 16, .def = "0"),
	FIELD("min_accuracy", struct dlk_serving, F_DOUBLE, min_accuracy, .min = 0, .max = 1, .def = "0"),
	FIELD("min_class_recall", struct dlk_serving, F_DOUBLE, min_class_recall, .min = 0, .max = 1, .def = "0"),
	FIELD("max_val_loss", struct dlk_serving, F_DOUBLE, max_val_loss, .min = 0, .max = 1e30, .def = "0"),
	FIELD("gate", struct dlk_serving, F_CUSTOM, gate, .custom = &c_gate),
	FIELD("max_replicas", struct dlk_serving, F_INT, max_replicas, .min = 0, .max = 1000, .def = "0"),
	FIELD("target_cpu_percent", struct dlk_serving, F_INT, target_cpu_percent, .min = 1, .max = 100, .def = "70"),
	FIELD("gateway", struct dlk_serving, F_STR, gateway, .check = check_gateway_ref),
	FIELD("max_batch", struct dlk_serving, F_INT, max_batch, .min = 1, .max = 65536, .def = "64"),
	FIELD("max_memory", struct dlk_serving, F_BYTES, max_memory, .min = 1 << 20, .max = 1024.0 * (1ull << 30), .def = "1Gi"),
	FIELD("max_delay_us", struct dlk_serving, F_INT, max_delay_us, .min = 0, .max = 10000000, .def = "0"),
	FIELD("workers", struct dlk_serving, F_INT, workers, .min = 0, .max = 1024, .def = "0"),
	FIELD("threads", struct dlk_serving, F_INT, threads, .min = 0, .max = 1024, .def = "0"),
	FIELD("http_threads", struct dlk_serving, F_INT, http_threads, .min = 0, .max = 1024, .def = "0"),
	FIELD("max_request_bytes", struct dlk_serving, F_BYTES, max_request_bytes, .min = 1024, .max = 4.0 * (1ull << 30), .def = "64Mi"),
	FIELD("max_json_depth", struct dlk_serving, F_INT, max_json_depth, .min = 4, .max = 1024, .def = "32"),
	FIELD("max_connections", struct dlk_serving, F_INT, max_connections, .min = 1, .max = 1000000, .def = "1024"),
	FIELD("idle_timeout_s", struct dlk_serving, F_INT, idle_timeout_s, .min = 1, .max = 86400, .def = "30"),
	FIELD("request_timeout_s", struct dlk_serving, F_INT, request_timeout_s, .min = 1, .max = 86400, .def = "60"),
	FIELD("drain_delay_s", struct dlk_serving, F_INT, drain_delay_s, .min = 0, .max = 3600, .def = "0"),
	FIELD("drain_timeout_s", struct dlk_serving, F_INT, drain_timeout_s, .min = 0, .max = 86400, .def = "25"),
	FIELD("access_log", struct dlk_serving, F_BOOL, access_log, .def = "false"),
	FIELD("stream", struct dlk_serving, F_MAP, stream, .sub = stream_fields),
	FIELD("program", struct dlk_serving, F_CUSTOM, program, .custom = &c_program_server),
	END
};

static const char *const log_format_names[] = { "text", "json", NULL };

static const struct field logging_fields[] = {
	FIELD("format", struct dlk_logging, F_ENUM, format, .names = log_format_names, .def = "text"),
	END
};

static const struct field root_fields[] = {
	FIELD("name", struct dlk_project, F_STR, name, .flags = REQ, .check = check_name),
	FIELD("image", struct dlk_project, F_STR, image, .check = check_image, .def = DLK_DEFAULT_IMAGE),
	FIELD("namespace", struct dlk_project, F_STR, namespace_, .check = check_label63),
	FIELD("labels", struct dlk_project, F_CUSTOM, labels, .custom = &c_labels),
	FIELD("data", struct dlk_project, F_MAP, data, .flags = REQ, .sub = data_fields),
	/* required unless program: runs the user's own code (check_spec) */
	FIELD("model", struct dlk_project, F_MAP, model, .sub = model_fields),
	FIELD("training", struct dlk_project, F_MAP, training, .sub = training_fields),
	FIELD("resources", struct dlk_project, F_MAP, resources, .sub = resources_fields),
	FIELD("storage", struct dlk_project, F_MAP, storage, .sub = storage_fields),
	FIELD("schedule", struct dlk_project, F_STR, schedule, .check = check_cron),
	FIELD("trigger", struct dlk_project, F_ENUM, trigger, .names = trigger_names, .def = "always"),
	FIELD("serving", struct dlk_project, F_MAP, serving, .sub = serving_fields),
	FIELD("logging", struct dlk_project, F_MAP, logging, .sub = logging_fields),
	FIELD("program", struct dlk_project, F_CUSTOM, program, .custom = &c_program),
	END
};

/* Layers: one parameter table per kind, in enum dlk_layer_kind order. */
static const struct field dense_params[] = {
	FIELD("units", struct dlk_layer_spec, F_INT, units, .flags = REQ, .min = 1, .max = 1 << 24),
	END
};
static const struct field conv2d_params[] = {
	FIELD("filters", struct dlk_layer_spec, F_INT, filters, .flags = REQ, .min = 1, .max = 65536),
	FIELD("kernel", struct dlk_layer_spec, F_INT, kernel, .min = 1, .max = 1024, .def = "3"),
	FIELD("stride", struct dlk_layer_spec, F_INT, stride, .min = 1, .max = 1024, .def = "1"),
	FIELD("padding", struct dlk_layer_spec, F_INT, padding, .min = 0, .max = 1024, .def = "0"),
	FIELD("groups", struct dlk_layer_spec, F_INT, groups, .min = 1, .max = 65536, .def = "1"),
	END
};
static const struct field convtranspose2d_params[] = {
	FIELD("filters", struct dlk_layer_spec, F_INT, filters, .flags = REQ, .min = 1, .max = 65536),
	FIELD("kernel", struct dlk_layer_spec, F_INT, kernel, .min = 1, .max = 1024, .def = "3"),
	FIELD("stride", struct dlk_layer_spec, F_INT, stride, .min = 1, .max = 1024, .def = "1"),
	FIELD("padding", struct dlk_layer_spec, F_INT, padding, .min = 0, .max = 1024, .def = "0"),
	FIELD("output_padding", struct dlk_layer_spec, F_INT, output_padding, .min = 0, .max = 1023, .def = "0"),
	END
};
static const struct field avgpool_params[] = {
	FIELD("size", struct dlk_layer_spec, F_INT, size, .min = 1, .max = 1024, .def = "2"),
	FIELD("stride", struct dlk_layer_spec, F_INT, stride, .min = 1, .max = 1024),
	FIELD("padding", struct dlk_layer_spec, F_INT, padding, .min = 0, .max = 512, .def = "0"),
	END
};
static const struct field maxpool_params[] = {
	FIELD("size", struct dlk_layer_spec, F_INT, size, .min = 1, .max = 1024, .def = "2"),
	FIELD("stride", struct dlk_layer_spec, F_INT, stride, .min = 1, .max = 1024),
	END
};
static const struct field dropout_params[] = {
	FIELD("rate", struct dlk_layer_spec, F_FLOAT, rate, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0.5"),
	END
};
static const struct field layernorm_params[] = {
	FIELD("eps", struct dlk_layer_spec, F_FLOAT, eps, .flags = MIN_EXCL, .min = 0, .max = 1, .def = "1e-5"),
	END
};
/* in enum dlk_gelu order (lib/nn/kernels.h): PyTorch's names for its `approximate` */
static const char *const gelu_approx_names[] = { "none", "tanh", NULL };
static const struct field gelu_params[] = {
	FIELD("approximate", struct dlk_layer_spec, F_ENUM, approximate, .names = gelu_approx_names, .def = "none"),
	END
};
static const struct field embedding_params[] = {
	FIELD("vocab", struct dlk_layer_spec, F_INT, vocab, .flags = REQ, .min = 1, .max = 1 << 24),
	FIELD("dim", struct dlk_layer_spec, F_INT, dim, .flags = REQ, .min = 1, .max = 1 << 16),
	FIELD("positions", struct dlk_layer_spec, F_INT, positions, .min = 0, .max = 1 << 20, .def = "0"),
	END
};
static const struct field attention_params[] = {
	FIELD("heads", struct dlk_layer_spec, F_INT, heads, .flags = REQ, .min = 1, .max = 4096),
	FIELD("causal", struct dlk_layer_spec, F_BOOL, causal, .def = "true"),
	FIELD("rotary", struct dlk_layer_spec, F_BOOL, rotary, .def = "false"),
	FIELD("pad_id", struct dlk_layer_spec, F_INT, pad_id, .min = -1, .max = 1 << 24, .def = "-1"),
	FIELD("dropout", struct dlk_layer_spec, F_FLOAT, rate, .flags = MAX_EXCL, .min = 0, .max = 1, .def = "0"),
	END
};
static const struct field meanpool_params[] = {
	FIELD("pad_id", struct dlk_layer_spec, F_INT, pad_id, .min = -1, .max = 1 << 24, .def = "-1"),
	END
};
/* in enum dlk_upsample_mode order (lib/nn/kernels.h) */
static const char *const upsample_mode_names[] = { "nearest", "bilinear", NULL };
static const struct field upsample_params[] = {
	FIELD("scale", struct dlk_layer_spec, F_INT, scale, .min = 1, .max = 64, .def = "2"),
	FIELD("mode", struct dlk_layer_spec, F_ENUM, mode, .names = upsample_mode_names, .def = "nearest"),
	END
};
static const struct field batchnorm_params[] = {
	FIELD("eps", struct dlk_layer_spec, F_FLOAT, eps, .flags = MIN_EXCL, .min = 0, .max = 1, .def = "1e-5"),
	FIELD("momentum", struct dlk_layer_spec, F_FLOAT, momentum, .min = 0, .max = 1, .def = "0.1"),
	END
};
static void reshape_target_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base,
                                 const char *path);
static void reshape_target_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent);
static void no_free(const struct field *f, void *base);
static const struct custom c_reshape_target = { reshape_target_parse, reshape_target_dump, no_free, NULL };
static const struct field reshape_params[] = {
	FIELD("shape", struct dlk_layer_spec, F_CUSTOM, target, .flags = REQ, .custom = &c_reshape_target),
	END
};
static const struct field no_params[] = { END };
static const struct field *const layer_params[] = {
	[DLK_LAYER_DENSE] = dense_params, [DLK_LAYER_CONV2D] = conv2d_params,
	[DLK_LAYER_MAXPOOL] = maxpool_params, [DLK_LAYER_FLATTEN] = no_params,
	[DLK_LAYER_RELU] = no_params, [DLK_LAYER_TANH] = no_params,
	[DLK_LAYER_SIGMOID] = no_params, [DLK_LAYER_DROPOUT] = dropout_params,
	[DLK_LAYER_ADD] = no_params, [DLK_LAYER_CONCAT] = no_params, [DLK_LAYER_GLOBALAVGPOOL] = no_params,
	[DLK_LAYER_LAYERNORM] = layernorm_params, [DLK_LAYER_GELU] = gelu_params,
	[DLK_LAYER_SOFTMAX] = no_params, [DLK_LAYER_EMBEDDING] = embedding_params,
	[DLK_LAYER_UPSAMPLE] = upsample_params, [DLK_LAYER_ATTENTION] = attention_params,
	[DLK_LAYER_BATCHNORM] = batchnorm_params, [DLK_LAYER_AVGPOOL] = avgpool_params,
	[DLK_LAYER_CONVTRANSPOSE2D] = convtranspose2d_params, [DLK_LAYER_RESHAPE] = reshape_params,
	[DLK_LAYER_MEANPOOL] = meanpool_params,
};
#define N_LAYER_KINDS DLK_LAYER_KINDS
_Static_assert(DLK_ARRAY_SIZE(layer_params) == DLK_LAYER_KINDS, "a parameter table for every layer kind");

static int n_names(const char *const *names)
{
	int n = 0;
	while (names[n])
		n++;
	return n;
}

const char *project_optimizer_name(enum dlk_optim o)
{
	return (int)o >= 0 && (int)o < n_names(optim_names) ? optim_names[o] : "?";
}
const char *project_schedule_name(enum dlk_lr_schedule s)
{
	return (int)s >= 0 && (int)s < n_names(sched_names) ? sched_names[s] : "?";
}
const char *project_cache_volume_name(enum dlk_cache_volume v)
{
	return (int)v >= 0 && (int)v < n_names(cache_volume_names) ? cache_volume_names[v] : "?";
}
const char *project_format_name(enum dlk_data_format f)
{
	return (int)f >= 0 && (int)f < n_names(format_names) ? format_names[f] : "?";
}

int project_format_has_images(enum dlk_data_format f)
{
	return f == DLK_DATA_IMAGES || f == DLK_DATA_IDX || f == DLK_DATA_TAR;
}

int project_paired_images(const struct dlk_data *d, enum dlk_task task)
{
	return d->format == DLK_DATA_IMAGES && task == DLK_TASK_IMAGE && !(d->images.noise > 0);
}

/* ---- problems ---- */

struct set_arg {
	const char *arg;    /* as given */
	char *path;         /* normalised like the messages' paths: a.b[3].c */
	char **comps;
	int n_comps;
	struct ynode *value;
};

/* What a given entry records: a struct's address may equal its first member's, so the kind
 * is part of the key. */
enum { GIVEN_VALUE, GIVEN_MAP, GIVEN_CUSTOM };

struct given {
	const void *ptr;
	int container;      /* GIVEN_* */
	const struct ynode *node;
};

struct ctx {
	const char *file;
	struct set_arg *sets;
	struct dlk_buf out;
	int n_problems, n_shown;
	struct given *given;
	int n_given, cap_given;
	struct dlk_project *spec;
	/* model.layers and model.blocks, read together once the whole file is parsed (either may
	 * come first): model_layers_build() */
	const struct ynode *layers_val, *blocks_val;
	char layers_path[64];
};

#define PROBLEM_ROOM 48 /* kept free for "... and N more problems" */

/* s with a URL's user:password@ replaced by ***@ (in buf), or s itself when it has none: an
 * error names the problem, and the terminal, CI log or issue it lands in keeps no secret. */
static const char *hide_userinfo(const char *s, char *buf, size_t n)
{
	const char *sep = strstr(s, "://"), *at = NULL;

	if (!sep)
		return s;
	for (const char *p = sep + 3; *p && !strchr("/?#", *p); p++)
		if (*p == '@')
			at = p;
	if (!at)
		return s;
	snprintf(buf, n, "%.*s***%s", (int)(sep + 3 - s), s, at);
	return buf;
}

static void problem(struct ctx *c, const struct ynode *at, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void problem(struct ctx *c, const struct ynode *at, const char *path, const char *fmt, ...)
{
	char msg[1024], line[1400], arg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at && at->set_index >= 0) {
		const struct set_arg *s = &c->sets[at->set_index];
		const char *shown = hide_userinfo(s->arg, arg, sizeof(arg));
		if (path && *path && strcmp(path, s->path))
			snprintf(line, sizeof(line), "--set %s: %s: %s", shown, path, msg);
		else
			snprintf(line, sizeof(line), "--set %s: %s", shown, msg);
	} else if (at) {
		snprintf(line, sizeof(line), "%s:%d:%d: %s%s%s", c->file, at->line, at->col,
		         path && *path ? path : "", path && *path ? ": " : "", msg);
	} else {
		snprintf(line, sizeof(line), "%s: %s%s%s", c->file, path && *path ? path : "",
		         path && *path ? ": " : "", msg);
	}
	c->n_problems++;
	if (c->n_shown == c->n_problems - 1 &&
	    c->out.len + strlen(line) + 1 + PROBLEM_ROOM < DLK_ERR_MSG_MAX) {
		if (c->out.len)
			dlk_buf_addc(&c->out, '\n');
		dlk_buf_adds(&c->out, line);
		c->n_shown++;
	}
}

static int finish_problems(struct ctx *c, int code, struct dlk_err *err)
{
	if (c->n_problems > c->n_shown)
		dlk_buf_addf(&c->out, "\n... and %d more problem%s", c->n_problems - c->n_shown,
		             c->n_problems - c->n_shown == 1 ? "" : "s");
	dlk_errf(err, code, "%s", c->out.len ? c->out.data : "invalid project file");
	if (err && code == DLK_EXIT_CONFIG && c->n_problems > 1)
		dlk_err_hint(err, "fix the %d problems above in '%s' and run again", c->n_problems, c->file);
	return -1;
}

static void mark_given(struct ctx *c, const void *ptr, int container, const struct ynode *node)
{
	if (c->n_given == c->cap_given) {
		c->cap_given = c->cap_given ? c->cap_given * 2 : 128;
		c->given = xrealloc(c->given, (size_t)c->cap_given * sizeof(*c->given));
	}
	c->given[c->n_given++] = (struct given){ ptr, container, node };
}

/* The node a value was given at, or NULL when it was not given. */
static const struct ynode *given_at(const struct ctx *c, const void *ptr, int container)
{
	for (int i = c->n_given - 1; i >= 0; i--)
		if (c->given[i].ptr == ptr && c->given[i].container == container)
			return c->given[i].node;
	return NULL;
}

static void join_path(char *out, size_t len, const char *path, const char *key)
{
	if (path && *path)
		snprintf(out, len, "%s.%s", path, key);
	else
		snprintf(out, len, "%s", key);
}

static void suggest_suffix(char *out, size_t len, const char *word, const char *const *cands, size_t n)
{
	const char *s = dlk_suggest(word, cands, n);
	if (s)
		snprintf(out, len, " (did you mean '%s'?)", s);
	else
		out[0] = '\0';
}

/* A key valid somewhere else ("epochs" at the top level belongs under training). */
static void suggest_elsewhere(char *out, size_t len, const char *word)
{
	const char *const *keys = project_known_keys();
	size_t wl = strlen(word);

	out[0] = '\0';
	for (size_t i = 0; keys[i]; i++) {
		size_t kl = strlen(keys[i]);
		if (kl > wl && keys[i][kl - wl - 1] == '.' && !strcmp(keys[i] + kl - wl, word)) {
			snprintf(out, len, " (did you mean '%s'?)", keys[i]);
			return;
		}
	}
}

/* A value as an error message quotes it: shortened, and with a URL's user:password@ hidden. */
static void shown_text(char *out, size_t len, const char *s)
{
	char red[4200];

	s = hide_userinfo(s, red, sizeof(red));
	if (strlen(s) > 60)
		snprintf(out, len, "%.57s...", s);
	else
		snprintf(out, len, "%s", s);
}

static void duplicate_problem(struct ctx *c, const struct ynode *map, int i, int first, const char *path)
{
	char p[512];
	join_path(p, sizeof(p), path, map->keys[i]->text);
	problem(c, map->keys[i], p, "duplicate key '%s' (first at line %d)", map->keys[i]->text,
	        map->keys[first]->line);
}

/* Reports a key that appears twice in a mapping; returns 1 when keys[i] is such a repeat.
 * Quadratic: only for mappings already bounded to a few dozen entries. */
static int duplicate_key(struct ctx *c, const struct ynode *map, int i, const char *path)
{
	for (int j = 0; j < i; j++)
		if (!strcmp(map->keys[j]->text, map->keys[i]->text)) {
			duplicate_problem(c, map, i, j, path);
			return 1;
		}
	return 0;
}

static void type_problem(struct ctx *c, const struct ynode *n, const char *path, const char *expected)
{
	char got[128];
	if (n->kind == YN_SCALAR && ynode_type(n) == YS_BADTAG)
		problem(c, n, path, "unsupported tag '%s' for '%s'", n->tag, n->text);
	else
		problem(c, n, path, "expected %s, got %s", expected, ynode_describe(n, got, sizeof(got)));
}

/* ---- scalar conversion ---- */

static void expected_number(const struct field *f, char *buf, size_t len)
{
	int is_int = f->type == F_INT;
	const char *what = is_int ? "an integer" : "a number";

	if (f->type == F_U64) {
		snprintf(buf, len, "a non-negative integer");
	} else if (is_int && f->min == 1 && f->max >= INT_MAX / 2) {
		snprintf(buf, len, "a positive integer");
	} else if (is_int && f->min == 0 && f->max >= INT_MAX / 2) {
		snprintf(buf, len, "a non-negative integer");
	} else if (is_int) {
		snprintf(buf, len, "an integer from %.0f to %.0f", f->min, f->max);
	} else if (f->max >= 1e6 && f->min <= -1e6) {
		snprintf(buf, len, "%s", what);
	} else if (f->max >= 1e6) {
		snprintf(buf, len, "%s %s %g", what, f->flags & MIN_EXCL ? ">" : ">=", f->min);
	} else {
		snprintf(buf, len, "%s in %s%g, %g%s", what, f->flags & MIN_EXCL ? "(" : "[", f->min, f->max,
		         f->flags & MAX_EXCL ? ")" : "]");
	}
}

static int in_range(const struct field *f, double v)
{
	if (isnan(v) || v < f->min || v > f->max)
		return 0;
	if ((f->flags & MIN_EXCL) && v == f->min)
		return 0;
	if ((f->flags & MAX_EXCL) && v == f->max)
		return 0;
	return 1;
}

static int lookup_name(const char *const *names, const char *s)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

static void names_list(const char *const *names, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (int i = 0; names[i] && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
}

/* Converts one scalar into the field at ptr; reports and returns -1 when it does not fit. */
static int convert_scalar(struct ctx *c, const struct field *f, const struct ynode *n, void *ptr, const char *path)
{
	char exp[200], why[256], shown[80], list[160], sug[96];
	enum yscalar_type t = n->kind == YN_SCALAR ? ynode_type(n) : YS_STR;
	long long i;
	double d;

	if (t == YS_BADTAG)
		return type_problem(c, n, path, ""), -1;
	switch (f->type) {
	case F_INT:
	case F_U64:
	case F_DOUBLE:
	case F_FLOAT:
		expected_number(f, exp, sizeof(exp));
		if (n->kind != YN_SCALAR)
			return type_problem(c, n, path, exp), -1;
		if (f->type == F_U64) {
			char *end;
			const char *s = n->text;
			int base = 10;
			if (t != YS_INT || *s == '-')
				return type_problem(c, n, path, exp), -1;
			if (!strncmp(s, "0x", 2))
				s += 2, base = 16;
			else if (!strncmp(s, "0o", 2))
				s += 2, base = 8;
			errno = 0;
			unsigned long long u = strtoull(s, &end, base);
			if (errno || *end)
				return type_problem(c, n, path, exp), -1;
			*(unsigned long long *)ptr = u;
			return 0;
		}
		if (f->type == F_INT) {
			if (ynode_int(n, &i) || !in_range(f, (double)i)) {
				/* "a positive integer" says enough unless the value is too large */
				if (f->min == 1 && (ynode_int(n, &i) || i < 1))
					snprintf(exp, sizeof(exp), "a positive integer");
				else if (f->min == 0 && (ynode_int(n, &i) || i < 0))
					snprintf(exp, sizeof(exp), "a non-negative integer");
				return type_problem(c, n, path, exp), -1;
			}
			*(int *)ptr = (int)i;
			return 0;
		}
		if (ynode_float(n, &d) || !isfinite(d) || !in_range(f, d))
			return type_problem(c, n, path, exp), -1;
		if (f->type == F_FLOAT)
			*(float *)ptr = (float)d;
		else
			*(double *)ptr = d;
		return 0;
	case F_BOOL:
		if (n->kind != YN_SCALAR || t != YS_BOOL)
			return type_problem(c, n, path, "true or false"), -1;
		*(int *)ptr = n->text[0] == 't' || n->text[0] == 'T';
		return 0;
	case F_BYTES:
		if (n->kind != YN_SCALAR || (t != YS_STR && t != YS_INT))
			return type_problem(c, n, path, "a size in bytes (like 8Gi or 500M)"), -1;
		if (parse_bytes(n->text, &i, why, sizeof(why))) {
			shown_text(shown, sizeof(shown), n->text);
			problem(c, n, path, "'%s' %s", shown, why);
			return -1;
		}
		if ((f->min || f->max) && !in_range(f, (double)i)) {
			shown_text(shown, sizeof(shown), n->text);
			problem(c, n, path, "'%s' is outside %.0f to %.0f bytes", shown, f->min, f->max);
			return -1;
		}
		*(long long *)ptr = i;
		return 0;
	case F_ENUM:
	case F_STR:
		if (n->kind != YN_SCALAR || !(t == YS_STR || ((f->flags & ANY_SCALAR) && t != YS_NULL))) {
			if (f->names) {
				names_list(f->names, list, sizeof(list));
				snprintf(exp, sizeof(exp), "one of %s", list);
			}
			return type_problem(c, n, path, f->names ? exp : "a string"), -1;
		}
		shown_text(shown, sizeof(shown), n->text);
		if (f->names) {
			int k = lookup_name(f->names, n->text);
			if (k < 0) {
				names_list(f->names, list, sizeof(list));
				suggest_suffix(sug, sizeof(sug), n->text, f->names, (size_t)n_names(f->names));
				problem(c, n, path, "unknown value '%s' (expected %s)%s", shown, list, sug);
				return -1;
			}
			if (f->type == F_ENUM) {
				*(int *)ptr = k;
				return 0;
			}
		}
		if (f->check && f->check(n->text, why, sizeof(why))) {
			if (!strncmp(why, "expected ", 9))
				problem(c, n, path, "%s, got '%s'", why, shown);
			else
				problem(c, n, path, "'%s' %s", shown, why);
			return -1;
		}
		free(*(char **)ptr);
		*(char **)ptr = xstrdup(n->text);
		return 0;
	default:
		return -1;
	}
}

/* ---- mappings ---- */

static void parse_fields(struct ctx *c, const struct field *fields, const struct ynode *node, void *base,
                         const char *path);

static void parse_value(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	void *ptr = (char *)base + f->off;

	if (f->type == F_MAP) {
		/* csv, optimizer, lr_schedule and checkpoint are YAML sections over their parent's
		 * struct (offset 0): marking them would hide where the parent was given */
		if (f->off)
			mark_given(c, ptr, GIVEN_MAP, val);
		if (f->scalar_key && val->kind == YN_SCALAR) {
			/* "optimizer: adam" is short for "optimizer: {name: adam}" */
			const struct field *sf = f->sub;
			while (strcmp(sf->key, f->scalar_key))
				sf++;
			if (!convert_scalar(c, sf, val, (char *)ptr + sf->off, path))
				mark_given(c, (char *)ptr + sf->off, GIVEN_VALUE, val);
			return;
		}
		parse_fields(c, f->sub, val, ptr, path);
	} else if (f->type == F_CUSTOM) {
		mark_given(c, ptr, GIVEN_CUSTOM, val);
		f->custom->parse(c, f, val, base, path);
	} else if (!convert_scalar(c, f, val, ptr, path)) {
		mark_given(c, ptr, GIVEN_VALUE, val);
	}
}

/* Walks a mapping against its field table: every key is known, no key twice, required keys
 * present. A null node is an empty mapping (the YAML "training:" with nothing under it). */
static void parse_fields(struct ctx *c, const struct field *fields, const struct ynode *node, void *base,
                         const char *path)
{
	const char *cands[32];
	int first[32];          /* where each field's key was first seen, -1 if not yet */
	size_t n_cands = 0;
	int listed = 0;
	char p[512], sug[640];

	if (ynode_is_null(node))
		node = NULL;
	for (const struct field *f = fields; f->key && n_cands < DLK_ARRAY_SIZE(cands); f++) {
		first[n_cands] = -1;
		cands[n_cands++] = f->key;
	}
	if (node && node->kind != YN_MAP)
		return type_problem(c, node, path, "a mapping");
	/* linear in the mapping's size: a hostile file may hold 100000 keys */
	for (int i = 0; node && i < node->n; i++) {
		const struct ynode *k = node->keys[i], *v = node->vals[i];
		const struct field *f;
		join_path(p, sizeof(p), path, k->text);
		/* the sweep: section is the sweep's (lib/sweep/spec.c), not part of what a run trains */
		if (fields == root_fields && !strcmp(k->text, "sweep"))
			continue;
		for (f = fields; f->key && strcmp(f->key, k->text); f++)
			;
		if (f->key && first[f - fields] >= 0) {
			duplicate_problem(c, node, i, first[f - fields], path);
			continue;
		}
		if (f->key)
			first[f - fields] = i;
		if (!f->key) {
			char shown[80];
			shown_text(shown, sizeof(shown), k->text);
			/* a key that belongs elsewhere beats a near miss here ("lr" is optimizer.lr, not lr_schedule) */
			suggest_elsewhere(sug, sizeof(sug), k->text);
			/* the keys of a mapping are listed once, at its first unknown key with no near match */
			if (!sug[0] && !listed++)
				dlk_suggest_or_list(sug, sizeof(sug), k->text, cands, n_cands, "keys here are");
			else if (!sug[0])
				suggest_suffix(sug, sizeof(sug), k->text, cands, n_cands);
			problem(c, k, p, "unknown key '%s'%s", shown, sug);
			continue;
		}
		if (ynode_is_null(v)) {
			if (f->flags & REQ)
				problem(c, k, p, "'%s' is required but has no value", f->key);
			continue;
		}
		parse_value(c, f, v, base, p);
	}
	for (const struct field *f = fields; f->key; f++) {
		if (!(f->flags & REQ))
			continue;
		if (first[f - fields] < 0) {
			join_path(p, sizeof(p), path, f->key);
			if (node)
				problem(c, node, p, "missing required key '%s'", f->key);
			else
				problem(c, NULL, p, "missing required key '%s'", f->key);
		}
	}
}

/* ---- dumping values ---- */

/* A double-quoted YAML string; anything YAML could not carry printable is escaped. */
static void dump_str(struct dlk_buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!s) {
		dlk_buf_adds(b, "null");
		return;
	}
	dlk_buf_addc(b, '"');
	while (*p) {
		unsigned cp = *p;
		size_t n = 1;
		if (cp >= 0xc0) {
			n = cp >= 0xf0 ? 4 : cp >= 0xe0 ? 3 : 2;
			cp &= n == 4 ? 0x07 : n == 3 ? 0x0f : 0x1f;
			for (size_t i = 1; i < n && p[i]; i++)
				cp = (cp << 6) | (p[i] & 0x3f);
		}
		if (cp == '"' || cp == '\\')
			dlk_buf_addf(b, "\\%c", (char)cp);
		else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0xfeff ||
		         cp == 0xfffe || cp == 0xffff)
			dlk_buf_addf(b, "\\u%04x", cp);
		else
			dlk_buf_add(b, p, n);
		for (size_t i = 0; i < n && *p; i++)
			p++;
	}
	dlk_buf_addc(b, '"');
}

void project_dump_string(struct dlk_buf *b, const char *s)
{
	dump_str(b, s);
}

/* The shortest text that reads back to exactly this value through the loader's own path. */
static void dump_double(struct dlk_buf *b, double v, int is_float)
{
	char t[64];
	if (v == 0)
		v = 0; /* -0 would read back as the integer 0 */
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(t, sizeof(t), "%.*g", prec, v);
		double back = strtod(t, NULL);
		if (is_float ? (float)back == (float)v : back == v)
			break;
	}
	dlk_buf_adds(b, t);
}

static void dump_value(struct dlk_buf *b, const struct field *f, const void *ptr)
{
	switch (f->type) {
	case F_INT:
		dlk_buf_addf(b, "%d", *(const int *)ptr);
		break;
	case F_U64:
		dlk_buf_addf(b, "%llu", *(const unsigned long long *)ptr);
		break;
	case F_BYTES:
		dlk_buf_addf(b, "%lld", *(const long long *)ptr);
		break;
	case F_DOUBLE:
		dump_double(b, *(const double *)ptr, 0);
		break;
	case F_FLOAT:
		dump_double(b, *(const float *)ptr, 1);
		break;
	case F_BOOL:
		dlk_buf_adds(b, *(const int *)ptr ? "true" : "false");
		break;
	case F_ENUM: {
		int v = *(const int *)ptr;
		dlk_buf_adds(b, v >= 0 && v < n_names(f->names) ? f->names[v] : "null");
		break;
	}
	case F_STR:
		dump_str(b, *(char *const *)ptr);
		break;
	default:
		break;
	}
}

/* {key: value, ...} of a table's plain fields */
static void dump_flow(struct dlk_buf *b, const struct field *fields, const void *base)
{
	dlk_buf_addc(b, '{');
	for (const struct field *f = fields; f->key; f++) {
		dlk_buf_addf(b, "%s%s: ", f == fields ? "" : ", ", f->key);
		if (f->type == F_CUSTOM) /* a layer's list (reshape's shape): its dump writes it inline */
			f->custom->dump(b, f, base, 0);
		else
			dump_value(b, f, (const char *)base + f->off);
	}
	dlk_buf_addc(b, '}');
}

static void dump_fields(struct dlk_buf *b, const struct field *fields, const void *base, int indent)
{
	for (const struct field *f = fields; f->key; f++) {
		const void *ptr = (const char *)base + f->off;
		/* a project whose program: is the workload may have no model: its absence reads back */
		if (f->sub == model_fields && !((const struct dlk_model *)ptr)->n_layers)
			continue;
		dlk_buf_addf(b, "%*s%s:", indent, "", f->key);
		if (f->type == F_MAP) {
			dlk_buf_addc(b, '\n');
			dump_fields(b, f->sub, ptr, indent + 2);
		} else if (f->type == F_CUSTOM) {
			f->custom->dump(b, f, base, indent);
		} else {
			dlk_buf_addc(b, ' ');
			dump_value(b, f, ptr);
			dlk_buf_addc(b, '\n');
		}
	}
}

static void free_fields(const struct field *fields, void *base)
{
	for (const struct field *f = fields; f->key; f++) {
		void *ptr = (char *)base + f->off;
		if (f->type == F_MAP)
			free_fields(f->sub, ptr);
		else if (f->type == F_CUSTOM)
			f->custom->free(f, base);
		else if (f->type == F_STR) {
			free(*(char **)ptr);
			*(char **)ptr = NULL;
		}
	}
}

/* ---- custom fields ---- */

static void no_free(const struct field *f, void *base)
{
	(void)f;
	(void)base;
}

/* source: "URL" or {url, sha256} */
static void source_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_source *src = (void *)((char *)base + f->off);

	if (val->kind == YN_SCALAR) {
		if (!convert_scalar(c, &source_fields[0], val, &src->url, path))
			mark_given(c, &src->url, GIVEN_VALUE, val);
		return;
	}
	if (val->kind != YN_MAP)
		return type_problem(c, val, path, "a URL or a mapping {url, sha256}");
	parse_fields(c, source_fields, val, src, path);
	for (char *p = src->sha256; p && *p; p++)
		*p = (char)tolower((unsigned char)*p);
}

static void source_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_source *src = (const void *)((const char *)base + f->off);
	(void)indent;
	dlk_buf_addc(b, ' ');
	if (src->url)
		dump_flow(b, source_fields, src);
	else
		dlk_buf_adds(b, "null");
	dlk_buf_addc(b, '\n');
}

static void source_free(const struct field *f, void *base)
{
	free_fields(source_fields, (char *)base + f->off);
}

static const char *const source_subkeys[] = { ".url", ".sha256", NULL };
static const struct custom c_source = { source_parse, source_dump, source_free, source_subkeys };

/* shards: a list of sources, each "URL" or {url, sha256} */
#define SPEC_MAX_SHARDS 100000
static void shards_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_split *sp = base;
	static const struct field one = { .key = "shards", .type = F_CUSTOM, .off = 0, .custom = &c_source };
	char p[512];
	(void)f;

	if (val->kind != YN_SEQ)
		return type_problem(c, val, path, "a list of shard archives (URLs or {url, sha256})");
	if (val->n > SPEC_MAX_SHARDS) {
		problem(c, val, path, "has %d shards, more than the limit of %d", val->n, SPEC_MAX_SHARDS);
		return;
	}
	if (!val->n) {
		problem(c, val, path, "must name at least one shard (or leave it out)");
		return;
	}
	sp->shards = xcalloc((size_t)val->n, sizeof(*sp->shards));
	sp->n_shards = val->n;
	for (int i = 0; i < val->n; i++) {
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		source_parse(c, &one, val->vals[i], &sp->shards[i], p);
	}
}

static void shards_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_split *sp = base;
	(void)f, (void)indent;
	if (!sp->shards) {
		dlk_buf_adds(b, " null\n");
		return;
	}
	dlk_buf_adds(b, " [");
	for (int i = 0; i < sp->n_shards; i++) {
		if (i)
			dlk_buf_adds(b, ", ");
		dump_flow(b, source_fields, &sp->shards[i]);
	}
	dlk_buf_adds(b, "]\n");
}

static void shards_free(const struct field *f, void *base)
{
	struct dlk_split *sp = base;
	(void)f;
	for (int i = 0; i < sp->n_shards; i++)
		free_fields(source_fields, &sp->shards[i]);
	free(sp->shards);
	sp->shards = NULL;
	sp->n_shards = 0;
}

static const char *const shards_subkeys[] = { "[].url", "[].sha256", NULL };
static const struct custom c_shards = { shards_parse, shards_dump, shards_free, shards_subkeys };

/* data.dataset: "sha256:<id>", "NAME@TAG", "NAME" or {id, tag} */
static void dataset_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_data *d = base;
	struct dlk_dataset_ref r;
	char why[160];

	(void)f;
	if (val->kind == YN_SCALAR) {
		if (ynode_type(val) != YS_STR)
			return type_problem(c, val, path, "a dataset: sha256:<id>, NAME@TAG or {id, tag}");
		if (dlk_dataset_ref_parse(val->text, 0, &r, why, sizeof(why)))
			return problem(c, val, path, "'%s' names no dataset: %s", val->text, why);
		if (r.kind == DLK_REF_ID) {
			d->dataset.id = xasprintf("sha256:%s", r.id);
			mark_given(c, &d->dataset.id, GIVEN_VALUE, val);
		} else {
			d->dataset.tag = xstrdup(r.tag);
			mark_given(c, &d->dataset.tag, GIVEN_VALUE, val);
		}
		return;
	}
	if (val->kind != YN_MAP)
		return type_problem(c, val, path, "a dataset: sha256:<id>, NAME@TAG or {id, tag}");
	parse_fields(c, dataset_fields, val, d, path);
	if (d->dataset.id)
		for (char *p = d->dataset.id + 7; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	if (d->dataset.tag && !strchr(d->dataset.tag, '@')) {
		char *t = xasprintf("%s@latest", d->dataset.tag);
		free(d->dataset.tag);
		d->dataset.tag = t;
	}
	if (!d->dataset.id && !d->dataset.tag)
		problem(c, val, path, "names neither an id nor a tag");
}

static void dataset_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_data *d = base;

	(void)f, (void)indent;
	dlk_buf_addc(b, ' ');
	if (d->dataset.id && d->dataset.tag)
		dump_flow(b, dataset_fields, d);
	else if (d->dataset.id || d->dataset.tag)
		dump_str(b, d->dataset.id ? d->dataset.id : d->dataset.tag);
	else
		dlk_buf_adds(b, "null");
	dlk_buf_addc(b, '\n');
}

static void dataset_free(const struct field *f, void *base)
{
	(void)f;
	free_fields(dataset_fields, base);
}

static const char *const dataset_subkeys[] = { ".id", ".tag", NULL };
static const struct custom c_dataset = { dataset_parse, dataset_dump, dataset_free, dataset_subkeys };

/* csv.header: auto | true | false */
static void csv_header_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	int *h = (int *)((char *)base + f->off);
	enum yscalar_type t = ynode_type(val);

	if (val->kind == YN_SCALAR && t == YS_BOOL)
		*h = val->text[0] == 't' || val->text[0] == 'T';
	else if (val->kind == YN_SCALAR && t == YS_STR && !strcmp(val->text, "auto"))
		*h = -1;
	else
		type_problem(c, val, path, "auto, true or false");
}

static void csv_header_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	int h = *(const int *)((const char *)base + f->off);
	(void)indent;
	dlk_buf_adds(b, h < 0 ? " auto\n" : h ? " true\n" : " false\n");
}

static const struct custom c_csv_header = { csv_header_parse, csv_header_dump, no_free, NULL };

/* labels and node_selector: a mapping of label keys to label values */
/* What the keys and values of a mapping of strings must be: labels, node selectors, librdkafka
 * properties. Each check returns 0, or -1 with why. */
struct kv_rules {
	const char *what;                         /* "a mapping of label keys to values" */
	const char *key_name, *value_name;        /* "label key", "label value" */
	int (*key)(const char *s, char *why, size_t len);
	int (*value)(const char *s, char *why, size_t len);
};

static const struct kv_rules label_rules = { "a mapping of label keys to values", "label key", "label value",
	                                     check_label_key, check_label_value };

static void kv_parse(struct ctx *c, const struct ynode *val, struct dlk_kv **out, int *n_out, const char *path,
                     const struct kv_rules *r)
{
	char p[512], why[256], shown[80];

	if (val->kind != YN_MAP)
		return type_problem(c, val, path, r->what);
	if (val->n > SPEC_MAX_KV) {
		problem(c, val, path, "has %d entries, more than the limit of %d", val->n, SPEC_MAX_KV);
		return;
	}
	*out = xcalloc((size_t)val->n + 1, sizeof(**out));
	for (int i = 0; i < val->n; i++) {
		const struct ynode *k = val->keys[i], *v = val->vals[i];
		join_path(p, sizeof(p), path, k->text);
		if (duplicate_key(c, val, i, path))
			continue;
		shown_text(shown, sizeof(shown), k->text);
		if (r->key(k->text, why, sizeof(why))) {
			problem(c, k, p, "invalid %s '%s': %s", r->key_name, shown, why);
			continue;
		}
		if (v->kind != YN_SCALAR || ynode_is_null(v) || ynode_type(v) == YS_BADTAG) {
			type_problem(c, v, p, "a string");
			continue;
		}
		shown_text(shown, sizeof(shown), v->text);
		if (r->value(v->text, why, sizeof(why))) {
			problem(c, v, p, "invalid %s '%s': %s", r->value_name, shown, why);
			continue;
		}
		(*out)[*n_out].key = xstrdup(k->text);
		(*out)[*n_out].value = xstrdup(v->text);
		(*n_out)++;
	}
}

static void kv_dump(struct dlk_buf *b, const struct dlk_kv *kv, int n)
{
	dlk_buf_adds(b, " {");
	for (int i = 0; i < n; i++) {
		if (i)
			dlk_buf_adds(b, ", ");
		dump_str(b, kv[i].key);
		dlk_buf_adds(b, ": ");
		dump_str(b, kv[i].value);
	}
	dlk_buf_adds(b, "}\n");
}

static void kv_free(struct dlk_kv **kv, int *n)
{
	for (int i = 0; i < *n; i++) {
		free((*kv)[i].key);
		free((*kv)[i].value);
	}
	free(*kv);
	*kv = NULL;
	*n = 0;
}

static void labels_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_project *s = base;
	(void)f;
	kv_parse(c, val, &s->labels, &s->n_labels, path, &label_rules);
}
static void labels_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_project *s = base;
	(void)f, (void)indent;
	kv_dump(b, s->labels, s->n_labels);
}
static void labels_free(const struct field *f, void *base)
{
	struct dlk_project *s = base;
	(void)f;
	kv_free(&s->labels, &s->n_labels);
}
static const char *const kv_subkeys[] = { ".KEY", NULL };
static const struct custom c_labels = { labels_parse, labels_dump, labels_free, kv_subkeys };

static void node_selector_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_resources *r = base;
	(void)f;
	kv_parse(c, val, &r->node_selector, &r->n_node_selector, path, &label_rules);
}
static void node_selector_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_resources *r = base;
	(void)f, (void)indent;
	kv_dump(b, r->node_selector, r->n_node_selector);
}
static void node_selector_free(const struct field *f, void *base)
{
	struct dlk_resources *r = base;
	(void)f;
	kv_free(&r->node_selector, &r->n_node_selector);
}
static const struct custom c_node_selector = { node_selector_parse, node_selector_dump, node_selector_free, kv_subkeys };

/* serving.stream.properties: librdkafka property names (lowercase, digits, '.', '_') to values */
static int check_kafka_prop(const char *s, char *why, size_t len)
{
	if (!*s || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._") != strlen(s))
		return snprintf(why, len, "lowercase letters, digits, '.' and '_' only"), -1;
	return 0;
}
static int check_one_line(const char *s, char *why, size_t len)
{
	if (strchr(s, '\n'))
		return snprintf(why, len, "one line only"), -1;
	return 0;
}
static const struct kv_rules kafka_prop_rules = { "a mapping of librdkafka property names to values",
	                                          "librdkafka property name", "librdkafka property value",
	                                          check_kafka_prop, check_one_line };

static void kafka_props_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base,
                              const char *path)
{
	struct dlk_stream_spec *s = base;
	(void)f;
	kv_parse(c, val, &s->properties, &s->n_properties, path, &kafka_prop_rules);
}
static void kafka_props_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_stream_spec *s = base;
	(void)f, (void)indent;
	kv_dump(b, s->properties, s->n_properties);
}
static void kafka_props_free(const struct field *f, void *base)
{
	struct dlk_stream_spec *s = base;
	(void)f;
	kv_free(&s->properties, &s->n_properties);
}
static const struct custom c_kafka_props = { kafka_props_parse, kafka_props_dump, kafka_props_free, kv_subkeys };

/* program: and serving.program: (lib/project/program.c) */
static void program_problem(void *ctx, const struct ynode *at, const char *path, const char *msg)
{
	problem(ctx, at, path, "%s", msg);
}
static void program_section_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base,
                                  const char *path)
{
	const struct program_problems pp = { program_problem, c };
	(void)f;
	program_parse(val, path, &((struct dlk_project *)base)->program, &pp);
}
static void program_section_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	(void)f;
	program_dump(b, &((const struct dlk_project *)base)->program, indent);
}
static void program_section_free(const struct field *f, void *base)
{
	(void)f;
	program_release(&((struct dlk_project *)base)->program);
}
static const struct custom c_program = { program_section_parse, program_section_dump, program_section_free,
	                                 program_subkeys };
static void program_server_section_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base,
                                         const char *path)
{
	const struct program_problems pp = { program_problem, c };
	(void)f;
	program_server_parse(val, path, &((struct dlk_serving *)base)->program, &pp);
}
static void program_server_section_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	(void)f;
	program_server_dump(b, &((const struct dlk_serving *)base)->program, indent);
}
static void program_server_section_free(const struct field *f, void *base)
{
	(void)f;
	program_server_release(&((struct dlk_serving *)base)->program);
}
static const struct custom c_program_server = { program_server_section_parse, program_server_section_dump,
	                                        program_server_section_free, program_server_subkeys };

/* data.classes: a list of names */
static void classes_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_data *d = base;
	char p[512];
	(void)f;

	if (val->kind != YN_SEQ)
		return type_problem(c, val, path, "a list of class names");
	if (val->n > SPEC_MAX_CLASSES) {
		problem(c, val, path, "has %d classes, more than the limit of %d", val->n, SPEC_MAX_CLASSES);
		return;
	}
	if (!val->n) {
		problem(c, val, path, "must name at least one class (or leave it out)");
		return;
	}
	d->classes = xcalloc((size_t)val->n, sizeof(*d->classes));
	for (int i = 0; i < val->n; i++) {
		const struct ynode *v = val->vals[i];
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if (v->kind != YN_SCALAR || ynode_is_null(v) || ynode_type(v) == YS_BADTAG) {
			type_problem(c, v, p, "a class name");
			continue;
		}
		char why[64];
		if (check_nonempty(v->text, why, sizeof(why))) {
			problem(c, v, p, "class name %s", why);
			continue;
		}
		d->classes[d->n_classes++] = xstrdup(v->text);
	}
}
static void classes_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_data *d = base;
	(void)f, (void)indent;
	if (!d->classes) {
		dlk_buf_adds(b, " null\n");
		return;
	}
	dlk_buf_adds(b, " [");
	for (int i = 0; i < d->n_classes; i++) {
		if (i)
			dlk_buf_adds(b, ", ");
		dump_str(b, d->classes[i]);
	}
	dlk_buf_adds(b, "]\n");
}
static void classes_free(const struct field *f, void *base)
{
	struct dlk_data *d = base;
	(void)f;
	for (int i = 0; i < d->n_classes; i++)
		free(d->classes[i]);
	free(d->classes);
	d->classes = NULL;
	d->n_classes = 0;
}
static const struct custom c_classes = { classes_parse, classes_dump, classes_free, NULL };

/* data.images.mean / std: a number (every channel) or a list of one per channel */
static void channel_values_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	static const struct field one = { .key = "value", .type = F_FLOAT, .min = -1e30, .max = 1e30 };
	struct dlk_channel_values *cv = (struct dlk_channel_values *)((char *)base + f->off);
	int is_std = !strcmp(f->key, "std");
	char p[512];

	if (val->kind == YN_SCALAR) {
		if (convert_scalar(c, &one, val, &cv->v[0], path))
			return;
		cv->n = 1;
	} else if (val->kind != YN_SEQ) {
		return type_problem(c, val, path, "a number or a list of one number per channel");
	} else if (val->n < 1 || val->n > DLK_MAX_CHANNELS) {
		problem(c, val, path, "expected 1 to %d numbers (one per channel), got %d", DLK_MAX_CHANNELS, val->n);
		return;
	} else {
		for (int i = 0; i < val->n; i++) {
			snprintf(p, sizeof(p), "%s[%d]", path, i);
			if (convert_scalar(c, &one, val->vals[i], &cv->v[i], p))
				return;
		}
		cv->n = val->n;
	}
	for (int i = 0; is_std && i < cv->n; i++)
		if (!(cv->v[i] > 0)) {
			problem(c, val, path, "a standard deviation must be positive, not %g", (double)cv->v[i]);
			cv->n = 0;
			return;
		}
}
static void channel_values_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_channel_values *cv = (const struct dlk_channel_values *)((const char *)base + f->off);
	(void)indent;
	if (!cv->n) {
		dlk_buf_adds(b, " null\n");
		return;
	}
	dlk_buf_adds(b, " [");
	for (int i = 0; i < cv->n; i++)
		dlk_buf_addf(b, "%s%.9g", i ? ", " : "", (double)cv->v[i]);
	dlk_buf_adds(b, "]\n");
}
static const struct custom c_channel_values = { channel_values_parse, channel_values_dump, no_free, NULL };

/* model.input: [C, H, W] or [F] */
static void input_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	static const struct field dim = { .key = "input", .type = F_INT, .min = 1, .max = 1 << 24 };
	struct dlk_model *m = base;
	int dims[3];
	char p[512];
	(void)f;

	if (val->kind != YN_SEQ)
		return type_problem(c, val, path, "a list [C, H, W] or [features]");
	if (val->n != 1 && val->n != 3) {
		problem(c, val, path, "expected [C, H, W] or [features], got %d numbers", val->n);
		return;
	}
	for (int i = 0; i < val->n; i++) {
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if (convert_scalar(c, &dim, val->vals[i], &dims[i], p))
			return;
	}
	m->input_rank = val->n;
	if (val->n == 1) {
		m->input[0] = m->input[1] = 1;
		m->input[2] = dims[0];
	} else {
		memcpy(m->input, dims, sizeof(dims));
	}
}
static void input_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_model *m = base;
	(void)f, (void)indent;
	if (m->input_rank == 1)
		dlk_buf_addf(b, " [%d]\n", m->input[2]);
	else
		dlk_buf_addf(b, " [%d, %d, %d]\n", m->input[0], m->input[1], m->input[2]);
}
static const struct custom c_input = { input_parse, input_dump, no_free, NULL };

/* A layer's graph keys: "name: NAME" and "inputs: [NAME, ...]" (or one NAME), each name that of
 * an earlier layer or "input" (the model's input). Takes them out of params' keys (the caller
 * restores them). */
/* reshape's sizes: "reshape: [2, -1]" or "reshape: {shape: [2, -1]}" */
static void reshape_target_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base,
                                 const char *path)
{
	struct dlk_layer_spec *l = base;
	int frees = 0;
	(void)f;
	if (val->kind != YN_SEQ || val->n < 1 || val->n > 3) {
		problem(c, val, path, "expected one to three sizes (like 'reshape: [4, -1]'; -1 once: what is left)");
		return;
	}
	l->target_rank = val->n;
	for (int d = 0; d < val->n; d++) {
		long long v;
		const struct ynode *e = val->vals[d];
		if (e->kind != YN_SCALAR || ynode_type(e) != YS_INT || ynode_int(e, &v) || (v < 1 && v != -1) ||
		    v > (1 << 30) || (v == -1 && frees++)) {
			problem(c, e, path, "expected positive sizes up to 2^30 and at most one -1 (like 'reshape: [4, -1]')");
			l->target_rank = 0;
			return;
		}
		l->target[d] = (int)v;
	}
}
static void reshape_target_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_layer_spec *l = base;
	(void)f;
	(void)indent;
	dlk_buf_addc(b, '[');
	for (int d = 0; d < l->target_rank; d++)
		dlk_buf_addf(b, "%s%d", d ? ", " : "", l->target[d]);
	dlk_buf_addc(b, ']');
}
/* What names mean where a layer is written: at the top level every earlier layer's name, and
 * `input` the model's input; in a use of a block the names of the layers of this repetition
 * (stored as prefix + name) and `input` the block's input. */
struct layer_scope {
	int lo;             /* the first layer names may refer to */
	int in;             /* what `input` means: a layer's index, -1 the model's input */
	const char *prefix; /* "" at the top level; "NAME.R." in a block */
};
static const struct layer_scope top_scope = { 0, -1, "" };

static int layer_name_ok(const char *s)
{
	return s[0] && strlen(s) < sizeof(((struct dlk_layer_spec *)0)->name) &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == strlen(s) &&
	       strcmp(s, "input");
}

static void layer_graph_parse(struct ctx *c, struct ynode *params, struct dlk_model *m, int i, const char *path,
                              const struct layer_scope *sc)
{
	struct dlk_layer_spec *l = &m->layers[i];
	char p[700], shown[80];
	int k = 0;

	for (int j = 0; j < params->n; j++) {
		const struct ynode *key = params->keys[j], *val = params->vals[j];
		if (!strcmp(key->text, "name")) {
			snprintf(p, sizeof(p), "%s.name", path);
			char full[96];
			if (val->kind != YN_SCALAR || !layer_name_ok(val->text)) {
				shown_text(shown, sizeof(shown), val->kind == YN_SCALAR ? val->text : "");
				problem(c, val, p, "'%s' is not a layer name (letters, digits, '_', '-' and '.', at most %zu, not "
				        "'input')", shown, sizeof(l->name) - 1);
				continue;
			}
			snprintf(full, sizeof(full), "%s%s", sc->prefix, val->text);
			if (strlen(full) >= sizeof(l->name)) {
				problem(c, val, p, "'%s' makes the layer name '%s' (the block's use, its repetition and this name), "
				        "longer than %zu: use shorter names", val->text, full, sizeof(l->name) - 1);
				continue;
			}
			for (int e = 0; e < i; e++)
				if (!strcmp(m->layers[e].name, full)) {
					char w[160];
					dlk_layer_path(w, sizeof(w), e, &m->layers[e]);
					problem(c, val, p, "'%s' already names %s", full, w);
				}
			memcpy(l->name, full, strlen(full) + 1); /* shorter than l->name: checked above */
		} else if (!strcmp(key->text, "tie") && l->kind == DLK_LAYER_DENSE) {
			/* weight tying: the head's weight is an earlier embedding's table */
			int found = -1;
			snprintf(p, sizeof(p), "%s.tie", path);
			char tfull[96];
			snprintf(tfull, sizeof(tfull), "%s%s", sc->prefix, val->kind == YN_SCALAR ? val->text : "");
			for (int q = i - 1; found < 0 && val->kind == YN_SCALAR && q >= 0; q--)
				if (!strcmp(m->layers[q].name, tfull))
					found = q;
			shown_text(shown, sizeof(shown), val->kind == YN_SCALAR ? val->text : "");
			if (found < 0)
				problem(c, val, p, "no layer before this one is named '%s' (name the embedding with 'name: ...')",
				        shown);
			else if (m->layers[found].kind != DLK_LAYER_EMBEDDING)
				problem(c, val, p, "'%s' is a %s layer; a dense layer ties its weight to an embedding's table",
				        shown, dlk_layer_names[m->layers[found].kind]);
			else
				l->tie = found + 1;
		} else if (!strcmp(key->text, "inputs")) {
			snprintf(p, sizeof(p), "%s.inputs", path);
			int n = val->kind == YN_SEQ ? val->n : 1;
			if ((val->kind != YN_SEQ && val->kind != YN_SCALAR) || n < 1 || n > 2) {
				problem(c, val, p, "expected one or two layer names (like 'inputs: [block1, skip]')");
				continue;
			}
			l->n_inputs = n;
			for (int e = 0; e < n; e++) {
				const struct ynode *v = val->kind == YN_SEQ ? val->vals[e] : val;
				int found = -2;
				char full[96];
				if (v->kind == YN_SCALAR && !strcmp(v->text, "input"))
					found = sc->in;
				if (v->kind == YN_SCALAR)
					snprintf(full, sizeof(full), "%s%s", sc->prefix, v->text);
				for (int q = i - 1; found == -2 && v->kind == YN_SCALAR && q >= sc->lo; q--)
					if (!strcmp(m->layers[q].name, full))
						found = q;
				if (found == -2) {
					shown_text(shown, sizeof(shown), v->kind == YN_SCALAR ? v->text : "");
					problem(c, v, p, "no layer before this one is named '%s' (name one with 'name: ...', or "
					        "say 'input' for %s)", shown, sc->lo ? "the block's input" : "the model's input");
				}
				l->inputs[e] = found < -1 ? -1 : found;
			}
		} else {
			params->keys[k] = params->keys[j];
			params->vals[k] = params->vals[j];
			k++;
		}
	}
	params->n = k;
}

/* model.layers: "- relu" or "- dense: {units: 10}" */
static void layer_parse(struct ctx *c, const struct ynode *item, struct dlk_model *m, int i, const char *path,
                        const struct layer_scope *sc)
{
	struct dlk_layer_spec *l = &m->layers[i];
	const struct ynode *name_node = item, *params = NULL;
	char sug[640], p[600], shown[80];
	int kind;

	l->line = item->line;
	l->column = item->col;
	mark_given(c, l, GIVEN_CUSTOM, item); /* its position for check_shapes(), --set origin included */
	l->kind = (enum dlk_layer_kind)-1;
	if (item->kind == YN_MAP) {
		if (item->n != 1) {
			problem(c, item, path, "expected one layer per list item (like '- dense: {units: 10}'), got %d keys",
			        item->n);
			return;
		}
		name_node = item->keys[0];
		params = ynode_is_null(item->vals[0]) ? NULL : item->vals[0];
	} else if (item->kind != YN_SCALAR || ynode_type(item) != YS_STR) {
		type_problem(c, item, path, "a layer (like 'relu' or 'dense: {units: 10}')");
		return;
	}
	kind = lookup_name(dlk_layer_names, name_node->text);
	if (kind < 0) {
		shown_text(shown, sizeof(shown), name_node->text);
		dlk_suggest_or_list(sug, sizeof(sug), name_node->text, dlk_layer_names, (size_t)N_LAYER_KINDS,
		                    "layers are");
		problem(c, name_node, path, "unknown layer '%s'%s", shown, sug);
		return;
	}
	l->kind = (enum dlk_layer_kind)kind;
	snprintf(p, sizeof(p), "%s.%s", path, dlk_layer_names[kind]);
	if (params && params->kind == YN_MAP) {
		/* name and inputs are any kind's; the kind's own table judges the rest */
		struct ynode *pm = (struct ynode *)params;
		int n = pm->n;
		struct ynode **keys = xcalloc((size_t)n + 1, sizeof(*keys)), **vals = xcalloc((size_t)n + 1, sizeof(*vals));
		if (n) { /* an empty map {} has no arrays */
			memcpy(keys, pm->keys, sizeof(*keys) * (size_t)n);
			memcpy(vals, pm->vals, sizeof(*vals) * (size_t)n);
		}
		layer_graph_parse(c, pm, m, i, p, sc);
		parse_fields(c, layer_params[kind], pm, l, p);
		if (n) {
			memcpy(pm->keys, keys, sizeof(*keys) * (size_t)n);
			memcpy(pm->vals, vals, sizeof(*vals) * (size_t)n);
		}
		pm->n = n;
		free(keys);
		free(vals);
	} else if (params && kind == DLK_LAYER_RESHAPE && params->kind == YN_SEQ) {
		char sp[700];
		snprintf(sp, sizeof(sp), "%s.shape", p);
		mark_given(c, l->target, GIVEN_CUSTOM, params);
		reshape_target_parse(c, NULL, params, l, sp);
	} else if (params)
		parse_fields(c, layer_params[kind], params, l, p);
	else
		for (const struct field *f = layer_params[kind]; f->key; f++)
			if (f->flags & REQ)
				problem(c, name_node, path, "%s needs '%s' (like '- %s: {%s: ...}')", dlk_layer_names[kind],
				        f->key, dlk_layer_names[kind], f->key);
	if (dlk_layer_arity(l->kind) == 2 && l->n_inputs != 2)
		problem(c, name_node, path, "%s needs two inputs (like '- %s: {inputs: [a, b]}')", dlk_layer_names[kind],
		        dlk_layer_names[kind]);
	else if (dlk_layer_arity(l->kind) == 1 && l->n_inputs > 1)
		problem(c, name_node, path, "%s reads one input, not %d", dlk_layer_names[kind], l->n_inputs);
}

static void model_layers_build(struct ctx *c, struct dlk_model *m);

static void layers_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	(void)f;
	(void)base;
	if (val->kind != YN_SEQ)
		return type_problem(c, val, path, "a list of layers");
	if (!val->n) {
		problem(c, val, path, "the model needs at least one layer");
		return;
	}
	c->layers_val = val;
	snprintf(c->layers_path, sizeof(c->layers_path), "%s", path);
	model_layers_build(c, base);
}

/* ---- blocks: model.blocks.NAME is a list of layers; "- block: NAME" in model.layers uses it ---- */

/* root's model.blocks, or NULL */
static const struct ynode *model_blocks_node(const struct ynode *root)
{
	for (int i = 0; root->kind == YN_MAP && i < root->n; i++) {
		const struct ynode *m = root->vals[i];
		if (strcmp(root->keys[i]->text, "model") || m->kind != YN_MAP)
			continue;
		for (int j = 0; j < m->n; j++)
			if (!strcmp(m->keys[j]->text, "blocks") && m->vals[j]->kind == YN_MAP)
				return m->vals[j];
	}
	return NULL;
}

static int is_block_use(const struct ynode *item)
{
	for (int j = 0; item->kind == YN_MAP && j < item->n; j++)
		if (!strcmp(item->keys[j]->text, "block"))
			return 1;
	return 0;
}

/* "$filters" (plain, not quoted): a value each use of the block gives; NULL for any other node */
static const char *placeholder(const struct ynode *v)
{
	return v && v->kind == YN_SCALAR && !v->quoted && v->text[0] == '$' && v->text[1] ? v->text + 1 : NULL;
}

/* The parameter map of a block's layer ("- conv2d: {...}"), or NULL */
static struct ynode *block_layer_params(const struct ynode *item)
{
	if (item->kind == YN_MAP && item->n == 1 && item->vals[0]->kind == YN_MAP)
		return item->vals[0];
	return NULL;
}

/* a definition model_layers_build() can expand (blocks_parse() says what is wrong with another) */
static int block_def_ok(const struct ynode *def)
{
	if (def->kind != YN_SEQ || !def->n || def->n > SPEC_MAX_LAYERS)
		return 0;
	for (int j = 0; j < def->n; j++)
		if ((block_layer_params(def->vals[j]) && block_layer_params(def->vals[j])->n > SPEC_MAX_USE_KEYS) ||
		    is_block_use(def->vals[j]))
			return 0;
	return 1;
}

static const char *const block_use_keys[] = { "block", "repeat", "name", "inputs", NULL };

static void blocks_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_model *m = base;
	char p[600], shown[80];
	(void)f;

	if (val->kind != YN_MAP)
		return type_problem(c, val, path, "a mapping of block names to lists of layers");
	if (val->n > SPEC_MAX_LAYERS) /* the checks below are quadratic: a hostile file may hold 100000 */
		return problem(c, val, path, "has %d blocks, more than the limit of %d", val->n, SPEC_MAX_LAYERS);
	for (int b = 0; b < val->n; b++) {
		const struct ynode *k = val->keys[b], *v = val->vals[b];
		join_path(p, sizeof(p), path, k->text);
		if (!layer_name_ok(k->text) || strchr(k->text, '.')) {
			shown_text(shown, sizeof(shown), k->text);
			problem(c, k, p, "'%s' is not a block name (letters, digits, '_' and '-')", shown);
		}
		for (int e = 0; e < b; e++)
			if (!strcmp(val->keys[e]->text, k->text))
				problem(c, k, p, "block '%s' is defined twice (first at line %d)", k->text, val->keys[e]->line);
		if (v->kind != YN_SEQ || !v->n) {
			problem(c, v, p, "expected a list of layers (like '%s: [conv2d: {filters: $filters}, relu]')",
			        k->text);
			continue;
		}
		if (v->n > SPEC_MAX_LAYERS) {
			problem(c, v, p, "has %d layers, more than the limit of %d", v->n, SPEC_MAX_LAYERS);
			continue;
		}
		for (int j = 0; j < v->n; j++)
			if (block_layer_params(v->vals[j]) && block_layer_params(v->vals[j])->n > SPEC_MAX_USE_KEYS) {
				snprintf(p, sizeof(p), "%s.%s[%d]", path, k->text, j);
				problem(c, v->vals[j], p, "a layer has at most %d keys", SPEC_MAX_USE_KEYS);
			} else if (is_block_use(v->vals[j])) {
				snprintf(p, sizeof(p), "%s.%s[%d]", path, k->text, j);
				problem(c, v->vals[j], p, "a block cannot use another block: list its layers here");
			}
	}
	m->n_blocks = val->n;
}
static void blocks_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	(void)f;
	(void)base;
	(void)indent;
	dlk_buf_adds(b, " {}\n"); /* the layers are dumped with every use expanded */
}
static const struct custom c_blocks = { blocks_parse, blocks_dump, no_free, NULL };

struct block_use {
	const struct ynode *item;  /* the "- block: NAME" map */
	const struct ynode *def;   /* model.blocks.NAME: the list of its layers */
	const char *block;         /* NAME */
	int repeat;
	const struct ynode *name, *inputs;
};

/* The value a use gives for placeholder `key`, or NULL */
static const struct ynode *use_value(const struct block_use *u, const char *key)
{
	for (int j = 0; j < u->item->n; j++)
		if (!strcmp(u->item->keys[j]->text, key) && lookup_name(block_use_keys, key) < 0)
			return u->item->vals[j];
	return NULL;
}

static int block_uses_placeholder(const struct ynode *def, const char *key)
{
	for (int j = 0; j < def->n; j++) {
		const struct ynode *pm = block_layer_params(def->vals[j]);
		for (int k = 0; pm && k < pm->n; k++)
			if (placeholder(pm->vals[k]) && !strcmp(placeholder(pm->vals[k]), key))
				return 1;
	}
	return 0;
}

/* Reads "- block: NAME" with its repeat, name, inputs and placeholder values; 0 or -1 (reported) */
static int block_use_read(struct ctx *c, const struct ynode *item, int i, struct block_use *u)
{
	const struct ynode *blocks = c->blocks_val;
	char p[600], shown[80];
	int before = c->n_problems;

	memset(u, 0, sizeof(*u));
	u->item = item;
	u->repeat = 1;
	if (item->n > SPEC_MAX_USE_KEYS) {
		snprintf(p, sizeof(p), "%s[%d]", c->layers_path, i);
		problem(c, item, p, "a use of a block has at most %d keys", SPEC_MAX_USE_KEYS);
		return -1;
	}
	for (int j = 0; j < item->n; j++) {
		const struct ynode *k = item->keys[j], *v = item->vals[j];
		snprintf(p, sizeof(p), "%s[%d].%s", c->layers_path, i, k->text);
		if (!strcmp(k->text, "block")) {
			if (v->kind != YN_SCALAR || ynode_is_null(v)) {
				type_problem(c, v, p, "the name of a block of model.blocks");
				continue;
			}
			int named = 0;
			u->block = v->text;
			for (int b = 0; blocks && b < blocks->n; b++)
				if (!strcmp(blocks->keys[b]->text, v->text)) {
					named = 1; /* a broken definition has its own message */
					if (block_def_ok(blocks->vals[b]))
						u->def = blocks->vals[b];
				}
			if (!named) {
				shown_text(shown, sizeof(shown), v->text);
				problem(c, v, p, "no block named '%s' in model.blocks (define it there: 'blocks: {%s: [layers...]}')",
				        shown, shown);
			}
		} else if (!strcmp(k->text, "repeat")) {
			long long n;
			if (v->kind != YN_SCALAR || ynode_type(v) != YS_INT || ynode_int(v, &n) || n < 1 || n > SPEC_MAX_LAYERS)
				problem(c, v, p, "expected how many times the block follows itself, 1 to %d", SPEC_MAX_LAYERS);
			else
				u->repeat = (int)n;
		} else if (!strcmp(k->text, "name")) {
			if (v->kind != YN_SCALAR || !layer_name_ok(v->text)) {
				shown_text(shown, sizeof(shown), v->kind == YN_SCALAR ? v->text : "");
				problem(c, v, p, "'%s' is not a layer name (letters, digits, '_', '-' and '.', at most 31, not "
				        "'input')", shown);
			} else
				u->name = v;
		} else if (!strcmp(k->text, "inputs")) {
			const struct ynode *one = v->kind == YN_SEQ && v->n == 1 ? v->vals[0] : v;
			if (one->kind != YN_SCALAR || ynode_is_null(one))
				problem(c, v, p, "a block reads one input: expected one layer name (like 'inputs: [stem]')");
			else
				u->inputs = one;
		}
	}
	if (!u->block) {
		snprintf(p, sizeof(p), "%s[%d]", c->layers_path, i);
		problem(c, item, p, "expected 'block: NAME'");
	}
	if (!u->def)
		return -1;
	/* every value the use gives fills a placeholder; every placeholder gets a value */
	for (int j = 0; j < item->n; j++) {
		const char *key = item->keys[j]->text;
		if (lookup_name(block_use_keys, key) >= 0 || block_uses_placeholder(u->def, key))
			continue;
		snprintf(p, sizeof(p), "%s[%d].%s", c->layers_path, i, key);
		shown_text(shown, sizeof(shown), key);
		problem(c, item->keys[j], p, "block '%s' has no $%s for this value to fill (a use gives 'block', 'repeat', "
		        "'name', 'inputs' and the values of the block's $placeholders)", u->block, shown);
	}
	for (int j = 0; j < u->def->n; j++) {
		const struct ynode *pm = block_layer_params(u->def->vals[j]);
		for (int k = 0; pm && k < pm->n; k++) {
			const char *key = placeholder(pm->vals[k]);
			int seen = 0;
			if (!key || use_value(u, key))
				continue;
			for (int jj = 0; jj <= j && !seen; jj++) { /* one message per placeholder */
				const struct ynode *q = block_layer_params(u->def->vals[jj]);
				for (int kk = 0; q && kk < (jj == j ? k : q->n); kk++)
					if (placeholder(q->vals[kk]) && !strcmp(placeholder(q->vals[kk]), key))
						seen = 1;
			}
			if (seen)
				continue;
			snprintf(p, sizeof(p), "%s[%d]", c->layers_path, i);
			shown_text(shown, sizeof(shown), key);
			problem(c, item, p, "block '%s' needs a value for $%s (used at line %d): add '%s: ...' to this use",
			        u->block, shown, pm->vals[k]->line, shown);
		}
	}
	return c->n_problems > before ? -1 : 0;
}

/* Parses use u of a block at model.layers[i] into m->layers from m->n_layers on: each repetition
 * is the block's layers with the use's values in its placeholders, names local to the repetition
 * (stored as "USE.R.NAME", USE the use's name or "layers.I"), `input` its input. */
static int block_use_expand(struct ctx *c, struct dlk_model *m, int i, const struct block_use *u)
{
	char base[48], pre[64], p[600], shown[80];
	int in = m->n_layers - 1, before = c->n_problems;

	if (u->inputs) {
		int found = -2;
		if (!strcmp(u->inputs->text, "input"))
			found = -1;
		for (int q = m->n_layers - 1; found == -2 && q >= 0; q--)
			if (!strcmp(m->layers[q].name, u->inputs->text))
				found = q;
		if (found == -2) {
			snprintf(p, sizeof(p), "%s[%d].inputs", c->layers_path, i);
			shown_text(shown, sizeof(shown), u->inputs->text);
			problem(c, u->inputs, p, "no layer before this one is named '%s' (name one with 'name: ...', or say "
			        "'input' for the model's input)", shown);
			return -1;
		}
		in = found;
	}
	if (u->name)
		snprintf(base, sizeof(base), "%s", u->name->text);
	else
		snprintf(base, sizeof(base), "layers.%d", i);
	for (int r = 0; r < u->repeat; r++) {
		struct layer_scope sc = { m->n_layers, in, pre };
		snprintf(pre, sizeof(pre), "%s.%d.", base, r);
		for (int j = 0; j < u->def->n; j++) {
			const struct ynode *item = u->def->vals[j];
			struct ynode *pm = block_layer_params(item);
			struct ynode **saved = NULL;
			int f = m->n_layers;
			if (pm && pm->n) { /* the use's values in place of the placeholders, for this parse */
				saved = xcalloc((size_t)pm->n, sizeof(*saved));
				memcpy(saved, pm->vals, sizeof(*saved) * (size_t)pm->n);
				for (int k = 0; k < pm->n; k++)
					if (placeholder(pm->vals[k]))
						pm->vals[k] = (struct ynode *)use_value(u, placeholder(pm->vals[k]));
			}
			snprintf(p, sizeof(p), "model.blocks.%s[%d]", u->block, j);
			m->n_layers++;
			layer_parse(c, item, m, f, p, &sc);
			if (saved) {
				memcpy(pm->vals, saved, sizeof(*saved) * (size_t)pm->n);
				free(saved);
			}
			struct dlk_layer_spec *l = &m->layers[f];
			l->use = i + 1;
			snprintf(l->block, sizeof(l->block), "%s", u->block);
			l->block_pos = j;
			l->rep = r;
			l->reps = u->repeat;
			if (j == 0 && !l->n_inputs && in != f - 1) {
				l->n_inputs = 1;
				l->inputs[0] = in;
			}
			if (c->n_problems > before)
				return -1; /* once, not once per repetition */
		}
		in = m->n_layers - 1;
	}
	if (u->name) { /* the use's name names its output: the last layer of its last repetition */
		for (int e = 0; e < m->n_layers - 1; e++)
			if (!strcmp(m->layers[e].name, u->name->text)) {
				char w[160];
				dlk_layer_path(w, sizeof(w), e, &m->layers[e]);
				snprintf(p, sizeof(p), "%s[%d].name", c->layers_path, i);
				problem(c, u->name, p, "'%s' already names %s", u->name->text, w);
				return -1;
			}
		snprintf(m->layers[m->n_layers - 1].name, sizeof(m->layers[0].name), "%s", u->name->text);
	}
	return 0;
}

/* model.layers with every use of a block expanded: the flat list the engine runs */
static void model_layers_build(struct ctx *c, struct dlk_model *m)
{
	const struct ynode *val = c->layers_val;
	struct block_use *uses;
	long long total = 0;
	char p[600];
	int bad = 0;

	if (!val)
		return;
	uses = xcalloc((size_t)val->n, sizeof(*uses));
	for (int i = 0; i < val->n; i++) {
		if (!is_block_use(val->vals[i]))
			total++;
		else if (block_use_read(c, val->vals[i], i, &uses[i]))
			bad = 1;
		else
			total += (long long)uses[i].repeat * uses[i].def->n;
	}
	if (!bad && total > SPEC_MAX_LAYERS)
		problem(c, val, c->layers_path, "has %lld layers%s, more than the limit of %d", total,
		        total > val->n ? " (its blocks repeated)" : "", SPEC_MAX_LAYERS);
	if (bad || total > SPEC_MAX_LAYERS) {
		free(uses);
		return;
	}
	m->layers = xcalloc((size_t)total, sizeof(*m->layers));
	m->n_layers = 0;
	for (int i = 0; i < val->n; i++) {
		if (uses[i].def) {
			if (block_use_expand(c, m, i, &uses[i]))
				break;
			continue;
		}
		snprintf(p, sizeof(p), "%s[%d]", c->layers_path, i);
		int f = m->n_layers++;
		layer_parse(c, val->vals[i], m, f, p, &top_scope);
		m->layers[f].use = i + 1;
	}
	free(uses);
	/* a layer another reads by index has a name, so that the dumped list reads back the same */
	for (int i = 0; i < m->n_layers; i++)
		for (int e = 0; e < m->layers[i].n_inputs; e++) {
			struct dlk_layer_spec *q = m->layers[i].inputs[e] >= 0 ? &m->layers[m->layers[i].inputs[e]] : NULL;
			if (!q || q->name[0])
				continue;
			snprintf(q->name, sizeof(q->name), "_%d", m->layers[i].inputs[e]);
			for (int o = 0; o < m->n_layers; o++)
				if (&m->layers[o] != q && !strcmp(m->layers[o].name, q->name)) {
					dlk_layer_path(p, sizeof(p), o, &m->layers[o]);
					problem(c, given_at(c, &m->layers[o], GIVEN_CUSTOM), p,
					        "names starting with '_' are the loader's: rename '%s'", q->name);
				}
		}
}
static void layers_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_model *m = base;
	(void)f;
	dlk_buf_addc(b, '\n');
	for (int i = 0; i < m->n_layers; i++) {
		const struct dlk_layer_spec *l = &m->layers[i];
		dlk_buf_addf(b, "%*s- %s", indent + 2, "", dlk_layer_name(l->kind));
		if ((int)l->kind >= 0 && (int)l->kind < N_LAYER_KINDS && layer_params[l->kind][0].key) {
			dlk_buf_adds(b, ": ");
			dump_flow(b, layer_params[l->kind], l);
			if (l->name[0] || l->n_inputs || l->tie)
				b->len--; /* the graph keys go inside the braces */
		} else if (l->name[0] || l->n_inputs) {
			dlk_buf_adds(b, ": {");
		}
		if (l->name[0] || l->n_inputs || l->tie) {
			int first = !layer_params[l->kind][0].key;
			if (l->tie)
				dlk_buf_addf(b, "%stie: %s", first ? "" : ", ", m->layers[l->tie - 1].name), first = 0;
			if (l->name[0])
				dlk_buf_addf(b, "%sname: %s", first ? "" : ", ", l->name), first = 0;
			if (l->n_inputs) {
				dlk_buf_addf(b, "%sinputs: [", first ? "" : ", ");
				for (int e = 0; e < l->n_inputs; e++)
					dlk_buf_addf(b, "%s%s", e ? ", " : "",
					             l->inputs[e] < 0 ? "input" : m->layers[l->inputs[e]].name);
				dlk_buf_adds(b, "]");
			}
			dlk_buf_addc(b, '}');
		}
		dlk_buf_addc(b, '\n');
	}
}
static void layers_free(const struct field *f, void *base)
{
	struct dlk_model *m = base;
	(void)f;
	free(m->layers);
	m->layers = NULL;
	m->n_layers = 0;
}
static const struct custom c_layers = { layers_parse, layers_dump, layers_free, NULL };

/* A list of mappings read into an array of structs (resources.tolerations, serving.gate). */
struct map_list {
	const char *list;          /* what the list is, for its type problem: "a list of tolerations" */
	const char *items;         /* the items' plural, for the limit: "tolerations" */
	const char *item;          /* what an item is: "a mapping {key, operator, value, effect}" */
	int max;                   /* the most items */
	const struct field *fields;
	size_t size;               /* one item's struct */
	/* the checks of one item after its fields were read: elem is its struct, p its path */
	void (*check)(struct ctx *c, const struct ynode *item, void *elem, const char *p);
};

/* val read by ml: *arr gets n + 1 zeroed items (the last a terminator) and *n their number; an
 * item that is not a mapping is a problem and stays zeroed. */
static void map_list_parse(struct ctx *c, const struct map_list *ml, const struct ynode *val, const char *path,
                           void **arr, int *n)
{
	char p[512];

	if (val->kind != YN_SEQ)
		return type_problem(c, val, path, ml->list);
	if (val->n > ml->max) {
		problem(c, val, path, "has %d %s, more than the limit of %d", val->n, ml->items, ml->max);
		return;
	}
	*arr = xcalloc((size_t)val->n + 1, ml->size);
	*n = val->n;
	for (int i = 0; i < val->n; i++) {
		void *elem = (char *)*arr + (size_t)i * ml->size;
		const struct ynode *item = val->vals[i];
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if (item->kind != YN_MAP) {
			type_problem(c, item, p, ml->item);
			continue;
		}
		parse_fields(c, ml->fields, item, elem, p);
		if (ml->check)
			ml->check(c, item, elem, p);
	}
}

static void map_list_free(const struct map_list *ml, void **arr, int *n)
{
	for (int i = 0; *arr && i < *n; i++)
		free_fields(ml->fields, (char *)*arr + (size_t)i * ml->size);
	free(*arr);
	*arr = NULL;
	*n = 0;
}

/* resources.tolerations: a list of {key, operator, value, effect} */
static void toleration_check(struct ctx *c, const struct ynode *item, void *elem, const char *p)
{
	const struct dlk_toleration *t = elem;
	if (t->op && !strcmp(t->op, "Exists") && t->value && *t->value)
		problem(c, item, p, "operator Exists takes no value");
	if (!t->key && !(t->op && !strcmp(t->op, "Exists")))
		problem(c, item, p, "a toleration without a key needs operator Exists");
}
static const struct map_list toleration_list = { "a list of tolerations", "tolerations",
	"a mapping {key, operator, value, effect}", SPEC_MAX_TOLERATIONS, toleration_fields,
	sizeof(struct dlk_toleration), toleration_check };
static void tolerations_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_resources *r = base;
	void *arr = NULL;
	(void)f;
	map_list_parse(c, &toleration_list, val, path, &arr, &r->n_tolerations);
	r->tolerations = arr;
}
static void tolerations_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_resources *r = base;
	(void)f;
	if (!r->n_tolerations) {
		dlk_buf_adds(b, " []\n");
		return;
	}
	dlk_buf_addc(b, '\n');
	for (int i = 0; i < r->n_tolerations; i++) {
		dlk_buf_addf(b, "%*s- ", indent + 2, "");
		dump_flow(b, toleration_fields, &r->tolerations[i]);
		dlk_buf_addc(b, '\n');
	}
}
static void tolerations_free(const struct field *f, void *base)
{
	struct dlk_resources *r = base;
	void *arr = r->tolerations;
	(void)f;
	map_list_free(&toleration_list, &arr, &r->n_tolerations);
	r->tolerations = NULL;
}
static const char *const toleration_subkeys[] = { "[].key", "[].operator", "[].value", "[].effect", NULL };
static const struct custom c_tolerations = { tolerations_parse, tolerations_dump, tolerations_free, toleration_subkeys };

/* serving.gate: a list of {metric, min, max} */
static const char *const gate_metric_names[] = { "accuracy", "loss", "r2", "rmse", "mae", "f1_micro", "f1_macro",
	"subset_accuracy", "psnr", "ssim", "perplexity", NULL };
static const struct field gate_fields[] = {
	/* a model's metrics are gate_metric_names; a program's, whatever it reports (check_spec) */
	FIELD("metric", struct dlk_gate_rule, F_STR, metric, .flags = REQ),
	FIELD("min", struct dlk_gate_rule, F_DOUBLE, min, .min = -1e30, .max = 1e30),
	FIELD("max", struct dlk_gate_rule, F_DOUBLE, max, .min = -1e30, .max = 1e30),
	END
};
#define SPEC_MAX_GATE 32

static void gate_check(struct ctx *c, const struct ynode *item, void *elem, const char *p)
{
	struct dlk_gate_rule *g = elem;
	for (int k = 0; k < item->n; k++) {
		g->has_min |= !strcmp(item->keys[k]->text, "min") && !ynode_is_null(item->vals[k]);
		g->has_max |= !strcmp(item->keys[k]->text, "max") && !ynode_is_null(item->vals[k]);
	}
	if (!g->has_min && !g->has_max)
		problem(c, item, p, "a rule needs min, max or both");
	else if (g->has_min && g->has_max && g->min > g->max)
		problem(c, item, p, "min %g is above max %g: no model passes", g->min, g->max);
}
static const struct map_list gate_list = { "a list of rules {metric, min, max}", "rules",
	"a mapping {metric, min, max}", SPEC_MAX_GATE, gate_fields, sizeof(struct dlk_gate_rule), gate_check };
static void gate_parse(struct ctx *c, const struct field *f, const struct ynode *val, void *base, const char *path)
{
	struct dlk_serving *sv = base;
	void *arr = NULL;
	(void)f;
	map_list_parse(c, &gate_list, val, path, &arr, &sv->n_gate);
	sv->gate = arr;
}
static void gate_dump(struct dlk_buf *b, const struct field *f, const void *base, int indent)
{
	const struct dlk_serving *sv = base;
	(void)f;
	if (!sv->n_gate) {
		dlk_buf_adds(b, " []\n");
		return;
	}
	dlk_buf_addc(b, '\n');
	for (int i = 0; i < sv->n_gate; i++) {
		const struct dlk_gate_rule *g = &sv->gate[i];
		dlk_buf_addf(b, "%*s- {metric: %s", indent + 2, "", g->metric ? g->metric : "");
		if (g->has_min)
			dlk_buf_addf(b, ", min: %.17g", g->min);
		if (g->has_max)
			dlk_buf_addf(b, ", max: %.17g", g->max);
		dlk_buf_adds(b, "}\n");
	}
}
static void gate_free(const struct field *f, void *base)
{
	struct dlk_serving *sv = base;
	void *arr = sv->gate;
	(void)f;
	map_list_free(&gate_list, &arr, &sv->n_gate);
	sv->gate = NULL;
}
static const char *const gate_subkeys[] = { "[].metric", "[].min", "[].max", NULL };
static const struct custom c_gate = { gate_parse, gate_dump, gate_free, gate_subkeys };

/* ---- defaults: the one place they are applied ---- */

static void defaults_walk(struct ctx *c, const struct field *fields, void *base)
{
	for (const struct field *f = fields; f->key; f++) {
		void *ptr = (char *)base + f->off;
		if (f->type == F_MAP) {
			defaults_walk(c, f->sub, ptr);
		} else if (f->type != F_CUSTOM && f->def && !given_at(c, ptr, GIVEN_VALUE)) {
			struct ynode def = { .kind = YN_SCALAR, .text = (char *)f->def, .set_index = -1 };
			convert_scalar(c, f, &def, ptr, f->key);
		}
	}
}

/* Fills every value the file left out: the static defaults of the field tables (their .def),
 * then the ones that depend on other values. */
static void apply_defaults(struct ctx *c, struct dlk_project *s)
{
	struct dlk_training *t = &s->training;
	int image_given = given_at(c, &s->image, GIVEN_VALUE) != NULL; /* before the walk fills it */

	defaults_walk(c, root_fields, s);
	if (!given_at(c, &s->data.csv_header, GIVEN_CUSTOM))
		s->data.csv_header = -1;
	if (!given_at(c, &s->data.scale, GIVEN_VALUE))
		s->data.scale = s->data.format == DLK_DATA_CSV || s->data.format == DLK_DATA_TEXT ? 1.0f : (float)(1.0 / 255.0);
	if (!given_at(c, &t->lr, GIVEN_VALUE))
		t->lr = t->optimizer == DLK_OPT_SGD ? 0.01 : 1e-3;
	if (!given_at(c, &s->model.loss, GIVEN_VALUE))
		s->model.loss = s->model.task == DLK_TASK_CLASSIFICATION ? DLK_LOSS_SOFTMAX_CE :
		                s->model.task == DLK_TASK_MULTILABEL     ? DLK_LOSS_BCE :
		                s->model.task == DLK_TASK_LM             ? DLK_LOSS_TOKEN_CE :
		                                                           DLK_LOSS_MSE;
	/* a transformer (GPT or BERT) starts as GPT-2 does, anything else as PyTorch's modules */
	if (!s->model.init) {
		int attention = 0;
		for (int i = 0; i < s->model.n_layers; i++)
			attention |= s->model.layers[i].kind == DLK_LAYER_ATTENTION;
		s->model.init = xstrdup(attention ? "gpt2" : "torch");
	}
	if (!given_at(c, &t->weight_decay, GIVEN_VALUE))
		t->weight_decay = t->optimizer == DLK_OPT_ADAMW ? 0.01 : 0.0;
	/* GPU workers need the CUDA backend and its libraries: the CUDA image */
	if (!image_given && s->resources.gpus > 0) {
		free(s->image);
		s->image = xstrdup(DLK_DEFAULT_CUDA_IMAGE);
	}
	if (s->serving.program.present && !s->serving.program.port)
		s->serving.program.port = s->serving.port;
	if (!given_at(c, &t->checkpoint_dir, GIVEN_VALUE))
		t->checkpoint_dir = xasprintf(".dlk/checkpoints/%s", s->name ? s->name : "project");
	for (int i = 0; i < s->model.n_layers; i++) {
		struct dlk_layer_spec *l = &s->model.layers[i];
		if ((int)l->kind < 0 || (int)l->kind >= N_LAYER_KINDS)
			continue;
		defaults_walk(c, layer_params[l->kind], l);
		if ((l->kind == DLK_LAYER_MAXPOOL || l->kind == DLK_LAYER_AVGPOOL) && !given_at(c, &l->stride, GIVEN_VALUE))
			l->stride = l->size;
	}
}

/* ---- checks across fields ---- */

static const struct ynode *pos_or(const struct ctx *c, const void *ptr, int container, const struct ynode *fallback)
{
	const struct ynode *n = given_at(c, ptr, container);
	return n ? n : fallback;
}

static void check_split(struct ctx *c, struct dlk_split *sp, const char *name, int required, const struct ynode *data_node)
{
	const struct ynode *at = pos_or(c, sp, GIVEN_MAP, data_node);
	if (at->kind != YN_MAP && !ynode_is_null(at))
		return; /* already reported: not a mapping */
	int idx = c->spec->data.format == DLK_DATA_IDX;
	const char *fmt = project_format_name(c->spec->data.format);
	char p[128];

	if (!required && !sp->images.url && !sp->labels.url && !sp->source.url && !sp->shards)
		return;
	if (sp->shards && c->spec->data.format != DLK_DATA_TAR && c->spec->data.format != DLK_DATA_IMAGES) {
		snprintf(p, sizeof(p), "data.%s.shards", name);
		problem(c, pos_or(c, &sp->shards, GIVEN_CUSTOM, at), p, "'shards' is for formats tar and images; format %s uses %s", fmt,
		        idx ? "images and labels" : "'source'");
		return;
	}
	if (sp->shards) {
		if (sp->source.url) {
			snprintf(p, sizeof(p), "data.%s.source", name);
			problem(c, pos_or(c, &sp->source, GIVEN_CUSTOM, at), p,
			        "give either 'source' (one archive) or 'shards' (several), not both");
		}
		return;
	}
	if (idx) {
		if (!sp->images.url && !given_at(c, &sp->images, GIVEN_CUSTOM)) {
			snprintf(p, sizeof(p), "data.%s.images", name);
			problem(c, at, p, "missing required key 'images' (format idx needs images and labels)");
		}
		if (!sp->labels.url && !given_at(c, &sp->labels, GIVEN_CUSTOM)) {
			snprintf(p, sizeof(p), "data.%s.labels", name);
			problem(c, at, p, "missing required key 'labels' (format idx needs images and labels)");
		}
		if (sp->source.url) {
			snprintf(p, sizeof(p), "data.%s.source", name);
			problem(c, pos_or(c, &sp->source, GIVEN_CUSTOM, at), p,
			        "'source' is for formats csv and tar; format idx uses images and labels");
		}
	} else {
		if (!sp->source.url && !given_at(c, &sp->source, GIVEN_CUSTOM)) {
			snprintf(p, sizeof(p), "data.%s.source", name);
			problem(c, at, p, "missing required key 'source' (format %s reads one source per split)", fmt);
		}
		if (sp->images.url || sp->labels.url) {
			snprintf(p, sizeof(p), "data.%s.%s", name, sp->images.url ? "images" : "labels");
			problem(c, pos_or(c, sp->images.url ? (void *)&sp->images : (void *)&sp->labels, GIVEN_CUSTOM, at), p,
			        "images and labels are for format idx; format %s uses 'source'", fmt);
		}
	}
}

/* The shape checks the project file alone decides, made here so that `--dry-run` and a submit
 * refuse what a pod would (the engine makes the same ones again when it builds the model, and for
 * a model.json): conv2d and maxpool see a 3-D input their window fits, dense a flat one, flatten
 * stays countable, no output is too large, and the model ends with one value per class. */
static void check_shapes(struct ctx *c, const struct dlk_model *m, int n_classes)
{
	long long shape[3] = { m->input[0], m->input[1], m->input[2] };
	int rank = m->input_rank;
	int last_dense = -1;
	int seq_dense_at = -1;             /* the first dense that ran over rows (a sequence) */
	long long seq_dense_in[3] = { 0 };
	char p[200];

	if (!m->n_layers || !rank)
		return;
	long long (*outs)[3] = xcalloc((size_t)m->n_layers, sizeof(*outs));
	int *ranks = xcalloc((size_t)m->n_layers, sizeof(*ranks));
	for (int i = 0; i < m->n_layers; i++) {
		const struct dlk_layer_spec *l = &m->layers[i];
		const struct ynode *pos = given_at(c, l, GIVEN_CUSTOM);
		const char *name = dlk_layer_name(l->kind);
		dlk_layer_path(p, sizeof(p), i, l);
		if (i > 0) {
			memcpy(outs[i - 1], shape, sizeof(shape));
			ranks[i - 1] = rank;
		}
		if ((int)l->kind < 0)
			break;
		if (l->n_inputs) { /* the graph: this layer reads named layers, not the one before it */
			int a = l->inputs[0];
			memcpy(shape, a < 0 ? (long long[3]){ m->input[0], m->input[1], m->input[2] } : outs[a], sizeof(shape));
			rank = a < 0 ? m->input_rank : ranks[a];
		}
		if (l->n_inputs == 2) {
			int b = l->inputs[1];
			long long s2[3] = { m->input[0], m->input[1], m->input[2] };
			if (b >= 0)
				memcpy(s2, outs[b], sizeof(s2));
			if (dlk_layer_shape2(l, shape, s2, shape) < 0) {
				problem(c, pos, p, "%s's inputs do not fit together: %lldx%lldx%lld and %lldx%lldx%lld (%s)", name,
				        shape[0], shape[1], shape[2], s2[0], s2[1], s2[2],
				        l->kind == DLK_LAYER_ADD ? "add needs one shape" : "concat needs one height and width");
				break;
			}
			continue;
		}
		if ((l->kind == DLK_LAYER_CONV2D || l->kind == DLK_LAYER_MAXPOOL || l->kind == DLK_LAYER_GLOBALAVGPOOL ||
		     l->kind == DLK_LAYER_AVGPOOL || l->kind == DLK_LAYER_CONVTRANSPOSE2D) &&
		    rank != 3) {
			problem(c, pos, p, "%s needs a 3-D input [C, H, W], but its input is flat", name);
			break;
		}
		if (l->kind == DLK_LAYER_CONV2D && (shape[0] % l->groups || l->filters % l->groups)) {
			problem(c, pos, p, "conv2d's groups %d must divide its %lld input channels and its %d filters", l->groups,
			        shape[0], l->filters);
			break;
		}
		if (l->kind == DLK_LAYER_CONVTRANSPOSE2D && l->output_padding >= l->stride) {
			problem(c, pos, p, "convtranspose2d's output_padding %d must be less than its stride %d", l->output_padding,
			        l->stride);
			break;
		}
		if (l->kind == DLK_LAYER_AVGPOOL && 2 * l->padding > l->size) {
			problem(c, pos, p, "avgpool's padding %d must be at most half its size %d (as PyTorch's)", l->padding,
			        l->size);
			break;
		}
		if (l->kind == DLK_LAYER_RESHAPE && dlk_layer_shape(l, shape, shape) < 0) {
			problem(c, pos, p, "reshape cannot make its %lldx%lldx%lld input (%lld values) into the shape it names",
			        shape[0], shape[1], shape[2], shape[0] * shape[1] * shape[2]);
			break;
		}
		if (l->kind == DLK_LAYER_RESHAPE) {
			rank = shape[0] == 1 && shape[1] == 1 && l->target_rank == 1 ? 1 : 3;
			continue;
		}
		if (l->kind == DLK_LAYER_DENSE && shape[0] != 1) {
			problem(c, pos, p, "dense expects a flat input or a sequence [1, T, D] but gets %lldx%lldx%lld (add "
			        "'flatten' before it)", shape[0], shape[1], shape[2]);
			break;
		}
		if (l->kind == DLK_LAYER_ATTENTION) {
			if (shape[0] != 1) {
				problem(c, pos, p, "attention expects a sequence [1, T, D] but gets %lldx%lldx%lld (put an "
				        "embedding before it)", shape[0], shape[1], shape[2]);
				break;
			}
			if (l->heads > 0 && (shape[2] % l->heads || (l->rotary && (shape[2] / l->heads) % 2))) {
				problem(c, pos, p, "heads (%d) must divide the width D = %lld%s", l->heads, shape[2],
				        l->rotary ? " into an even head width (rotary)" : "");
				break;
			}
		}
		if (l->kind == DLK_LAYER_MEANPOOL && shape[0] != 1) {
			problem(c, pos, p, "meanpool expects a sequence [1, T, D] but gets %lldx%lldx%lld (put an embedding "
			        "before it, or use globalavgpool over channels)", shape[0], shape[1], shape[2]);
			break;
		}
		if (l->kind == DLK_LAYER_EMBEDDING && l->positions &&
		    (double)l->positions < (double)shape[0] * (double)shape[1] * (double)shape[2]) {
			problem(c, pos, p, "positions (%d) must cover the %lld ids of a sample", l->positions,
			        shape[0] * shape[1] * shape[2]);
			break;
		}
		int seq_dense = l->kind == DLK_LAYER_DENSE && shape[1] != 1; /* per position: keeps its rank */
		if (seq_dense && seq_dense_at < 0) {
			seq_dense_at = i;
			memcpy(seq_dense_in, shape, sizeof(shape));
		}
		if (dlk_layer_shape(l, shape, shape) < 0) {
			int pad = l->kind != DLK_LAYER_MAXPOOL ? l->padding : 0;
			problem(c, pos, p, "%s window %d does not fit its %lldx%lld input (padding %d)", name,
			        l->kind == DLK_LAYER_CONV2D || l->kind == DLK_LAYER_CONVTRANSPOSE2D ? l->kernel : l->size, shape[1],
			        shape[2], pad);
			break;
		}
		if (l->kind == DLK_LAYER_FLATTEN || (l->kind == DLK_LAYER_DENSE && !seq_dense) ||
		    l->kind == DLK_LAYER_GLOBALAVGPOOL || l->kind == DLK_LAYER_MEANPOOL)
			rank = 1;
		if (l->kind == DLK_LAYER_DENSE)
			last_dense = i;
		if (l->kind == DLK_LAYER_FLATTEN && shape[2] > INT_MAX) {
			problem(c, pos, p, "flatten gives %lld features, too many", shape[2]);
			break;
		}
		/* the engine's bound (lib/nn/net.c): an activation of one sample fits an int */
		if ((double)shape[0] * (double)shape[1] * (double)shape[2] > (double)(1u << 30)) {
			problem(c, pos, p, "%s's output of %lldx%lldx%lld values per sample is too large", name, shape[0],
			        shape[1], shape[2]);
			break;
		}
	}
	free(outs);
	free(ranks);
	if (!c->n_problems) { /* a model with a broken layer has no end worth judging */
		int last = m->n_layers - 1;
		const struct ynode *pos = given_at(c, &m->layers[last], GIVEN_CUSTOM);
		dlk_layer_path(p, sizeof(p), last, &m->layers[last]);
		if (m->task == DLK_TASK_IMAGE)
			return; /* dense prediction: any output shape; the targets must have it */
		if (m->task == DLK_TASK_LM) {
			/* logits per position: [1, T, V], T the input's tokens */
			long long T = (long long)m->input[0] * m->input[1] * m->input[2];
			if (shape[0] != 1 || shape[1] != T || shape[2] < 2)
				problem(c, pos, p, "task lm needs the model to end with [1, %lld, VOCAB] logits (one row of "
				        "vocabulary logits per input token), not %lldx%lldx%lld", T, shape[0], shape[1], shape[2]);
			return;
		}
		if ((shape[0] != 1 || shape[1] != 1) && seq_dense_at >= 0) {
			/* an image's rows taken for a sequence: the forgotten flatten is where the dense is */
			const struct dlk_layer_spec *l = &m->layers[seq_dense_at];
			snprintf(p, sizeof(p), "model.layers[%d]", seq_dense_at);
			problem(c, given_at(c, l, GIVEN_CUSTOM), p, "dense runs over each of the %lld rows of its %lldx%lldx%lld "
			        "input (a sequence), so the model ends with a %lldx%lldx%lld output, not one value per class "
			        "(add 'flatten' before it)", seq_dense_in[1], seq_dense_in[0], seq_dense_in[1], seq_dense_in[2],
			        shape[0], shape[1], shape[2]);
			return;
		}
		if (shape[0] != 1 || shape[1] != 1) {
			problem(c, pos, p, "the model ends with a %lldx%lldx%lld output, not one value per class (end it with "
			        "'flatten' and a dense layer of %d units)", shape[0], shape[1], shape[2],
			        n_classes ? n_classes : 10);
			return;
		}
		if (shape[2] < 2 && m->task == DLK_TASK_CLASSIFICATION) {
			problem(c, pos, p, "the model ends with %lld output; softmax cross-entropy needs at least 2 classes",
			        shape[2]);
			return;
		}
	}
	if (n_classes && last_dense >= 0 && m->layers[last_dense].units != n_classes) {
		const struct dlk_layer_spec *l = &m->layers[last_dense];
		dlk_layer_path(p, sizeof(p), last_dense, l);
		problem(c, given_at(c, l, GIVEN_CUSTOM), p, "the last dense layer has %d units but data.classes names %d classes",
		        l->units, n_classes);
	}
}

/* With a dataset, every source is a path inside it, pinned by its manifest. */
static void check_dataset_sources(struct ctx *c, const struct dlk_data *d, const struct ynode *root)
{
	const struct { const struct dlk_source *src; const char *path; } srcs[] = {
		{ &d->train.images, "data.train.images" }, { &d->train.labels, "data.train.labels" },
		{ &d->train.source, "data.train.source" }, { &d->test.images, "data.test.images" },
		{ &d->test.labels, "data.test.labels" }, { &d->test.source, "data.test.source" },
		{ &d->train.targets, "data.train.targets" }, { &d->test.targets, "data.test.targets" },
	};
	char why[128];

	for (size_t i = 0; i < DLK_ARRAY_SIZE(srcs); i++) {
		const struct dlk_source *src = srcs[i].src;
		const struct ynode *at = pos_or(c, &src->url, GIVEN_VALUE, root);
		if (!src->url)
			continue;
		/* an image folder may be the whole dataset (its class folders at the top) */
		if (d->format == DLK_DATA_IMAGES && (src == &d->train.source || src == &d->test.source) &&
		    !strcmp(src->url, "."))
			continue;
		if (dlk_manifest_check_path(src->url, strlen(src->url), why, sizeof(why)))
			problem(c, at, srcs[i].path,
			        "with data.dataset a source is a path inside the dataset, and '%s' has %s", src->url, why);
		else if (src->sha256)
			problem(c, pos_or(c, &src->sha256, GIVEN_VALUE, at), srcs[i].path,
			        "the dataset's manifest pins every file: leave sha256 out");
	}
}

/* whether a source's name is a tar archive's (query and fragment left out) */
static int tar_name(const char *url)
{
	static const char *const ext[] = { ".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar.zst" };
	size_t n = strcspn(url, "?#");
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);
		if (n > e && !strncasecmp(url + n - e, ext[i], e))
			return 1;
	}
	return 0;
}

/* Paired images (format images, task image): each split's 'targets' folder beside its 'source'
 * folder, or tar shards holding both (KEY.png + KEY.target.png: a 'shards' list, a 'source' named
 * .tar, or a dataset's shards), and no augmentation, which would move an input away from its
 * target. Text has no image targets. */
static void check_paired(struct ctx *c, struct dlk_project *s, const struct ynode *root)
{
	const struct dlk_data *d = &s->data;
	const struct dlk_split *sp[2] = { &d->train, &d->test };
	const char *names[2] = { "train", "test" };
	int image = s->model.task == DLK_TASK_IMAGE, noise = d->images.noise > 0;
	int paired = project_paired_images(d, s->model.task);
	char p[64];

	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "data.%s.targets", names[i]);
		if (sp[i]->targets.url && noise && image)
			problem(c, pos_or(c, &sp[i]->targets, GIVEN_CUSTOM, root), p,
			        "with data.images.noise the targets are the images themselves (the inputs get the noise): "
			        "leave 'targets' out (paired folders are without data.images.noise)");
		else if (sp[i]->targets.url && !paired)
			problem(c, pos_or(c, &sp[i]->targets, GIVEN_CUSTOM, root), p,
			        "a folder of target images is for format images with model.task image, not format %s "
			        "with task %s", project_format_name(d->format), task_names[s->model.task]);
		else if (paired && sp[i]->source.url && !sp[i]->targets.url && !tar_name(sp[i]->source.url))
			problem(c, pos_or(c, sp[i], GIVEN_MAP, root), p,
			        "task image reads paired images: give 'targets', the folder of target images whose names "
			        "match the inputs' in 'source', or give tar shards of KEY.png and KEY.target.png members "
			        "('shards', or a 'source' named .tar)");
		else if (paired && sp[i]->shards && sp[i]->targets.url)
			problem(c, pos_or(c, &sp[i]->targets, GIVEN_CUSTOM, root), p,
			        "tar shards hold their targets (KEY.target.png beside KEY.png): leave 'targets' out, or "
			        "give 'source' and 'targets' as two folders");
	}
	if (d->format == DLK_DATA_TEXT && s->model.task == DLK_TASK_IMAGE)
		problem(c, pos_or(c, &s->model.task, GIVEN_VALUE, root), "model.task",
		        "format text reads labels (classification, multilabel) or numbers (regression), not images");
	if (noise && !image)
		problem(c, pos_or(c, &d->images.noise, GIVEN_VALUE, root), "data.images.noise",
		        "noise makes a denoiser's data (model.task image: noisy inputs, the images themselves as "
		        "targets), not task %s's: leave it out, or set model.task: image", task_names[s->model.task]);
	if (image && d->images.flip)
		problem(c, pos_or(c, &d->images.flip, GIVEN_VALUE, root), "data.images.flip",
		        "flipping would move an input but not its target image: leave it out with task image");
	if (image && d->images.crop_padding)
		problem(c, pos_or(c, &d->images.crop_padding, GIVEN_VALUE, root), "data.images.crop_padding",
		        "random crops would move an input but not its target image: leave it out with task image");
}

/* data.images (per-channel normalisation, flip, random crops) acts on 8-bit images [C, H, W]:
 * image folders, IDX files and tar shards of raw bytes, not CSV rows or text. */
static void check_image_options(struct ctx *c, struct dlk_project *s, const struct ynode *root)
{
	const struct dlk_data *d = &s->data;
	const struct dlk_images_spec *im = &d->images;
	int images = project_format_has_images(d->format);

	if (!images && (im->flip || im->crop_padding || im->noise > 0 || im->mean.n || im->std.n || im->decode != DLK_DECODE_AUTO))
		problem(c, pos_or(c, im, GIVEN_MAP, root), "data.images",
		        "normalisation per channel and augmentation are for images (format images, idx or tar), not "
		        "format %s: leave data.images out (data.mean and data.std scale every value)",
		        project_format_name(d->format));
	else if (images && (im->flip || im->crop_padding) && s->model.input_rank != 3)
		problem(c, pos_or(c, im->flip ? (const void *)&im->flip : &im->crop_padding, GIVEN_VALUE, root),
		        im->flip ? "data.images.flip" : "data.images.crop_padding",
		        "augmentation moves the pixels of images [channels, height, width], but model.input has %d "
		        "axis%s: give model.input as [C, H, W] or leave it out", s->model.input_rank,
		        s->model.input_rank == 1 ? "" : "es");
	/* idx files and tar shards hold their samples whole: decoded once as they are read */
	if (images && im->decode != DLK_DECODE_AUTO && d->format != DLK_DATA_IMAGES)
		problem(c, pos_or(c, &im->decode, GIVEN_VALUE, root), "data.images.decode",
		        "decode chooses when image folders' files are decoded (format images); format %s is decoded as "
		        "it is read: leave data.images.decode out", project_format_name(d->format));
}

/* The loss, the targets and the options of a task belong to it. */
static void check_task(struct ctx *c, struct dlk_project *s, const struct ynode *root)
{
	const struct dlk_model *m = &s->model;
	const char *task = task_names[m->task], *loss = loss_names[m->loss];
	int ce = m->loss == DLK_LOSS_SOFTMAX_CE, bce = m->loss == DLK_LOSS_BCE;
	const struct ynode *at = pos_or(c, &s->model.loss, GIVEN_VALUE, pos_or(c, &s->model.task, GIVEN_VALUE, root));

	if (m->task == DLK_TASK_CLASSIFICATION && !ce)
		problem(c, at, "model.loss", "task classification trains with softmax_cross_entropy, not %s", loss);
	else if ((m->task == DLK_TASK_LM) != (m->loss == DLK_LOSS_TOKEN_CE))
		problem(c, at, "model.loss", "task %s trains with %s, not %s", task,
		        m->task == DLK_TASK_LM ? "token_cross_entropy" : "another loss", loss);
	else if (m->task == DLK_TASK_MULTILABEL && !bce)
		problem(c, at, "model.loss", "task multilabel trains with binary_cross_entropy, not %s", loss);
	else if ((m->task == DLK_TASK_REGRESSION || m->task == DLK_TASK_IMAGE) && (ce || bce || m->loss == DLK_LOSS_TOKEN_CE))
		problem(c, at, "model.loss", "task %s trains with mse, l1 or huber, not %s", task, loss);
	if (s->training.label_smoothing > 0 && m->task != DLK_TASK_CLASSIFICATION)
		problem(c, pos_or(c, &s->training.label_smoothing, GIVEN_VALUE, root), "training.label_smoothing",
		        "label smoothing is for task classification, not %s", task);
	if (s->data.format == DLK_DATA_CSV && m->task == DLK_TASK_CLASSIFICATION && s->data.csv_targets > 0)
		problem(c, pos_or(c, &s->data.csv_targets, GIVEN_VALUE, root), "data.csv.targets",
		        "float target columns are for tasks multilabel, regression and image; classification reads "
		        "data.csv.label_column (or set model.task)");
	else if (s->data.format == DLK_DATA_CSV && m->task != DLK_TASK_CLASSIFICATION && s->data.csv_targets <= 0)
		problem(c, pos_or(c, &s->model.task, GIVEN_VALUE, root), "data.csv.targets",
		        "task %s needs float targets: set data.csv.targets to how many last columns hold them", task);
	if (s->data.format != DLK_DATA_TEXT && m->task == DLK_TASK_LM)
		problem(c, pos_or(c, &s->model.task, GIVEN_VALUE, root), "data.format",
		        "task lm reads plain text corpora: set data.format to text, not %s", project_format_name(s->data.format));
	if (s->data.validation > 0 && m->task != DLK_TASK_LM)
		problem(c, pos_or(c, &s->data.validation, GIVEN_VALUE, root), "data.validation",
		        "a validation fraction of the corpus is for task lm, not %s (give data.test instead)", task);
	else if (s->data.validation > 0 && (s->data.test.source.url || s->data.test.shards))
		problem(c, pos_or(c, &s->data.validation, GIVEN_VALUE, root), "data.validation",
		        "give either a validation fraction of the training corpus or data.test, not both");
	if (s->serving.max_val_loss > 0 && m->task != DLK_TASK_LM)
		problem(c, pos_or(c, &s->serving.max_val_loss, GIVEN_VALUE, root), "serving.max_val_loss",
		        "a maximum validation loss is for task lm, not %s (serving.gate takes {metric: loss, max: X})", task);
	check_paired(c, s, root);
	check_image_options(c, s, root);
}

/* Which task has each gate metric: the rules of serving.gate name metrics the model's evaluation
 * gives (lib/train/eval.h) */
static int gate_metric_fits(const char *metric, enum dlk_task task)
{
	static const struct { const char *name; unsigned tasks; } m[] = {
		{ "accuracy", 1u << DLK_TASK_CLASSIFICATION },
		{ "loss", ~0u },
		{ "perplexity", 1u << DLK_TASK_LM },
		{ "r2", 1u << DLK_TASK_REGRESSION | 1u << DLK_TASK_IMAGE },
		{ "rmse", 1u << DLK_TASK_REGRESSION | 1u << DLK_TASK_IMAGE },
		{ "mae", 1u << DLK_TASK_REGRESSION | 1u << DLK_TASK_IMAGE },
		{ "f1_micro", 1u << DLK_TASK_MULTILABEL },
		{ "f1_macro", 1u << DLK_TASK_MULTILABEL },
		{ "subset_accuracy", 1u << DLK_TASK_MULTILABEL },
		{ "psnr", 1u << DLK_TASK_IMAGE },
		{ "ssim", 1u << DLK_TASK_IMAGE },
	};
	for (size_t i = 0; i < DLK_ARRAY_SIZE(m); i++)
		if (!strcmp(m[i].name, metric))
			return !!(m[i].tasks & (1u << task));
	return 0;
}

static void check_spec(struct ctx *c, struct dlk_project *s, const struct ynode *root)
{
	const struct ynode *data_node = given_at(c, &s->data, GIVEN_MAP);
	int format_ok = 1;

	/* with a format that did not parse, which split keys are needed is unknowable */
	for (int i = 0; data_node && data_node->kind == YN_MAP && i < data_node->n; i++)
		if (!strcmp(data_node->keys[i]->text, "format") && !ynode_is_null(data_node->vals[i]))
			format_ok = !!given_at(c, &s->data.format, GIVEN_VALUE);
	if (data_node && format_ok) {
		check_split(c, &s->data.train, "train", 1, data_node);
		check_split(c, &s->data.test, "test", 0, data_node);
	}
	{
		/* a GPT-2 pair is two files, and only a BPE reads them */
		const struct dlk_text_spec *ts = &s->data.text;
		const void *field = ts->vocab ? (const void *)&ts->vocab : (const void *)&ts->merges;
		const struct ynode *at = pos_or(c, field, GIVEN_VALUE, pos_or(c, ts, GIVEN_MAP, root));
		if (!ts->vocab != !ts->merges)
			problem(c, at, ts->vocab ? "data.text.vocab" : "data.text.merges",
			        "give both vocab and merges (a GPT-2 vocab.json and merges.txt), or neither");
		else if (ts->vocab && ts->tokenizer != DLK_TOKENIZER_BPE)
			problem(c, at, "data.text.vocab", "vocab and merges are read by tokenizer: bpe, not byte");
	}
	if (s->data.dataset.id || s->data.dataset.tag) {
		const struct ynode *at = pos_or(c, &s->data.dataset, GIVEN_CUSTOM, root);
		int store_written = 0;
		/* a store that is written but wrong has its own problem already */
		for (int i = 0; data_node && data_node->kind == YN_MAP && i < data_node->n; i++)
			if (!strcmp(data_node->keys[i]->text, "store") && !ynode_is_null(data_node->vals[i]))
				store_written = 1;
		if (!s->data.store && !store_written)
			problem(c, at, "data.dataset", "a dataset needs data.store, the store it was pushed to");
		check_dataset_sources(c, &s->data, root);
	}
	if (s->data.node_cache.volume == DLK_CACHE_CHECKPOINT && !s->storage.claim && !s->storage.size)
		problem(c, pos_or(c, &s->data.node_cache.volume, GIVEN_VALUE, root), "data.node_cache.volume",
		        "the checkpoint volume holds the cache only when there is one: set storage.claim or storage.size");
	if (s->storage.claim && s->storage.size)
		problem(c, pos_or(c, &s->storage.size, GIVEN_VALUE, root), "storage.size",
		        "set either claim (an existing volume) or size (a new one), not both");
	if (s->storage.storage_class && !s->storage.size)
		problem(c, pos_or(c, &s->storage.storage_class, GIVEN_VALUE, root), "storage.storage_class",
		        "storage_class applies only to a volume dlk creates (set size)");
	if (s->serving.stream.brokers && (!s->serving.stream.input || !s->serving.stream.output))
		problem(c, pos_or(c, &s->serving.stream.brokers, GIVEN_VALUE, root), "serving.stream",
		        "a stream needs input and output topics beside brokers");
	else if (!s->serving.stream.brokers && (s->serving.stream.input || s->serving.stream.output))
		problem(c, pos_or(c, s->serving.stream.input ? (void *)&s->serving.stream.input :
		                  (void *)&s->serving.stream.output, GIVEN_VALUE, root), "serving.stream.brokers",
		        "topics need the brokers that hold them (host:port[,host:port...])");
	/* the user's own program needs no model of dlk's: without one there is nothing to check, and
	 * the gate's metrics are whatever the program reports */
	int has_model = given_at(c, &s->model, GIVEN_MAP) != NULL;
	if (!has_model && !s->program.present)
		problem(c, root, "model", "missing required key 'model' (or a program: section that runs your own code)");
	if (has_model)
		check_task(c, s, root);
	for (int i = 0; (has_model || s->program.present) && i < s->serving.n_gate; i++) {
		const struct dlk_gate_rule *g = &s->serving.gate[i];
		const void *at = pos_or(c, &s->serving.gate, GIVEN_CUSTOM, root);
		char p[64], list[512], sug[128];
		snprintf(p, sizeof(p), "serving.gate[%d].metric", i);
		if (!g->metric)
			continue;
		if (s->program.present) {
			/* the program's run: any metric its reports may carry (docs/program.md, the protocol) */
			if (!program_protocol_name_ok(g->metric))
				problem(c, at, p, "'%s' is no metric a program reports: 1 to %d letters, digits, '_', '.', '-' or '/'",
				        dlk_visible(g->metric), PROGRAM_PROTOCOL_MAX_NAME);
			continue;
		}
		if (lookup_name(gate_metric_names, g->metric) < 0) {
			names_list(gate_metric_names, list, sizeof(list));
			suggest_suffix(sug, sizeof(sug), g->metric, gate_metric_names, (size_t)n_names(gate_metric_names));
			problem(c, at, p, "unknown value '%s' (expected %s)%s", dlk_visible(g->metric), list, sug);
		} else if (!gate_metric_fits(g->metric, s->model.task))
			problem(c, at, p,
			        "a model of task %s has no test metric '%s'", task_names[s->model.task], g->metric);
	}
	if (has_model)
		check_shapes(c, &s->model, s->data.n_classes);
}

/* ---- --set ---- */

static void set_release(struct set_arg *s)
{
	for (int i = 0; i < s->n_comps; i++)
		free(s->comps[i]);
	free(s->comps);
	free(s->path);
	ynode_free(s->value);
}

static void mark_set(struct ynode *n, int idx)
{
	n->set_index = idx;
	n->line = n->col = 0;
	for (int i = 0; i < n->n; i++) {
		if (n->keys)
			mark_set(n->keys[i], idx);
		mark_set(n->vals[i], idx);
	}
}

static int is_index(const char *s)
{
	return *s && strlen(s) <= 6 && strspn(s, "0123456789") == strlen(s);
}

/* Splits "a.b\.c.3=value" into components and a value node; -1 with why when malformed. */
static int set_parse(const char *arg, int idx, struct set_arg *s, char *why, size_t why_len)
{
	const char *eq = strchr(arg, '='), *v;
	struct dlk_buf comp = DLK_BUF_INIT, norm = DLK_BUF_INIT;
	int rc = -1;

	memset(s, 0, sizeof(*s));
	s->arg = arg;
	if (!eq || eq == arg) {
		snprintf(why, why_len, "expected KEY.PATH=VALUE (like training.epochs=3)");
		goto out;
	}
	if (!dlk_utf8_valid(arg, strlen(arg))) {
		snprintf(why, why_len, "is not valid UTF-8");
		goto out;
	}
	for (const char *p = arg;; p++) {
		if (p < eq && *p == '\\' && p + 1 < eq) {
			dlk_buf_addc(&comp, *++p);
			continue;
		}
		if (p == eq || *p == '.') {
			if (!comp.len) {
				snprintf(why, why_len, "has an empty key in '%.*s'", (int)(eq - arg), arg);
				goto out;
			}
			if (s->n_comps >= yaml_opts.max_depth) {
				snprintf(why, why_len, "has a key path deeper than %d levels", yaml_opts.max_depth);
				goto out;
			}
			s->comps = xrealloc(s->comps, (size_t)(s->n_comps + 1) * sizeof(*s->comps));
			s->comps[s->n_comps] = dlk_buf_detach(&comp, NULL);
			if (is_index(s->comps[s->n_comps]))
				dlk_buf_addf(&norm, "[%s]", s->comps[s->n_comps]);
			else
				dlk_buf_addf(&norm, "%s%s", norm.len ? "." : "", s->comps[s->n_comps]);
			s->n_comps++;
			if (p == eq)
				break;
			continue;
		}
		dlk_buf_addc(&comp, *p);
	}
	s->path = dlk_buf_detach(&norm, NULL);
	v = eq + 1;
	if (*v && strchr("[{\"'", *v)) {
		char msg[512];
		struct ytree_error ye;
		if (ytree_parse(v, strlen(v), &yaml_opts, &s->value, &ye)) {
			yaml_problem_text(&ye, msg, sizeof(msg));
			snprintf(why, why_len, "the value is not valid YAML: %s",
			         !strncmp(msg, "invalid YAML: ", 14) ? msg + 14 : msg);
			goto out;
		}
		if (!s->value)
			s->value = ynode_scalar("", 0, 0, 0, idx);
		mark_set(s->value, idx);
	} else {
		s->value = ynode_scalar(v, 0, 0, 0, idx);
	}
	rc = 0;
out:
	dlk_buf_release(&comp);
	dlk_buf_release(&norm);
	return rc;
}

static void set_problem(struct ctx *c, int idx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_problem(struct ctx *c, int idx, const char *fmt, ...)
{
	struct ynode at = { .kind = YN_SCALAR, .set_index = idx };
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	problem(c, &at, NULL, "%s", text);
}

/* The long form of a short-form scalar, so a --set can reach inside it: "images: URL" is
 * {url: URL}, "optimizer: adam" is {name: adam}, a list item "- maxpool" is {maxpool: null}.
 * parent is the key (or index) the scalar sits under; NULL when there is no long form. */
static struct ynode *expand_short_form(const struct ynode *cur, const char *parent, const char *comp, int idx)
{
	static const struct { const char *parent, *key; } forms[] = {
		{ "images", "url" }, { "labels", "url" }, { "source", "url" },
		{ "optimizer", "name" }, { "lr_schedule", "name" },
	};
	struct ynode *map;

	if (cur->kind != YN_SCALAR || ynode_type(cur) != YS_STR || !parent)
		return NULL;
	map = ynode_new(YN_MAP, cur->line, cur->col, cur->set_index);
	if (is_index(parent) && !strcmp(cur->text, comp)) {
		struct ynode *key = ynode_scalar(cur->text, 0, cur->line, cur->col, cur->set_index);
		ynode_append(map, key, ynode_scalar("", 0, cur->line, cur->col, idx));
		return map;
	}
	for (size_t i = 0; i < DLK_ARRAY_SIZE(forms); i++)
		if (!strcmp(parent, forms[i].parent)) {
			struct ynode *val = ynode_scalar(cur->text, cur->quoted, cur->line, cur->col, cur->set_index);
			ynode_append(map, ynode_scalar(forms[i].key, 0, 0, 0, idx), val);
			return map;
		}
	ynode_free(map);
	return NULL;
}

/* Grafts one --set onto the tree, creating the mappings (and list items) it passes through. */
static void set_apply(struct ctx *c, struct ynode **root, struct set_arg *s, int idx)
{
	struct ynode **slot = root;

	if (!*root || ynode_is_null(*root)) {
		ynode_free(*root);
		*root = ynode_new(YN_MAP, 1, 1, -1);
	}
	for (int i = 0; i < s->n_comps; i++) {
		struct ynode *cur = *slot;
		const char *comp = s->comps[i];
		int last = i == s->n_comps - 1;
		int next_index = !last && is_index(s->comps[i + 1]);

		if (cur->kind == YN_SCALAR && ynode_is_null(cur) && cur != *root) {
			/* "data:" with nothing under it: becomes the mapping (or list) being set */
			int line = cur->line, col = cur->col, si = cur->set_index;
			ynode_free(cur);
			cur = *slot = ynode_new(is_index(comp) ? YN_SEQ : YN_MAP, line, col, si);
		}
		if (cur->kind == YN_MAP) {
			int k = -1;
			for (int j = 0; j < cur->n; j++)
				if (!strcmp(cur->keys[j]->text, comp))
					k = j;
			if (k < 0) {
				struct ynode *val = last ? s->value : ynode_new(next_index ? YN_SEQ : YN_MAP, 0, 0, idx);
				if (last)
					s->value = NULL;
				ynode_append(cur, ynode_scalar(comp, 0, 0, 0, idx), val);
				if (last)
					return;
				k = cur->n - 1;
			}
			slot = &cur->vals[k];
		} else if (cur->kind == YN_SEQ) {
			long n;
			if (!is_index(comp)) {
				set_problem(c, idx, "'%s' is not an index into the list (it has %d items)", comp, cur->n);
				return;
			}
			n = atol(comp);
			if (n > cur->n) {
				set_problem(c, idx, "index %s is out of range (the list has %d items)", comp, cur->n);
				return;
			}
			if (n == cur->n) {
				struct ynode *val = last ? s->value : ynode_new(next_index ? YN_SEQ : YN_MAP, 0, 0, idx);
				if (last)
					s->value = NULL;
				ynode_append(cur, NULL, val);
				if (last)
					return;
			}
			slot = &cur->vals[n];
		} else {
			struct ynode *map = expand_short_form(cur, i ? s->comps[i - 1] : NULL, comp, idx);
			if (!map) {
				set_problem(c, idx, "cannot set '%s' inside a single value", comp);
				return;
			}
			ynode_free(cur);
			*slot = map;
			i--; /* walk into the long form with the same component */
			continue;
		}
		if (last) {
			ynode_free(*slot);
			*slot = s->value;
			s->value = NULL;
		}
	}
}

/* ---- loading ---- */

struct dlk_project *project_load_mem(const char *text, size_t len, const char *name,
                               const char *const *sets, size_t n_sets, struct dlk_err *err)
{
	struct ctx c;
	struct ynode *root = NULL;
	struct dlk_project *spec = NULL;
	char msg[1024];
	struct ytree_error ye;
	int code = DLK_EXIT_CONFIG;
	size_t n_parsed = 0;

	memset(&c, 0, sizeof(c));
	c.out = (struct dlk_buf)DLK_BUF_INIT;
	c.file = name && *name ? name : "dlk.yaml";
	if (!text)
		text = "", len = 0;
	if (n_sets > SPEC_MAX_SETS) {
		dlk_errf(err, DLK_EXIT_USAGE, "too many --set options (%zu, the limit is %d)", n_sets, SPEC_MAX_SETS);
		return NULL;
	}
	c.sets = xcalloc(n_sets + 1, sizeof(*c.sets));
	for (size_t i = 0; i < n_sets; i++, n_parsed++) {
		if (set_parse(sets[i], (int)i, &c.sets[i], msg, sizeof(msg))) {
			struct ynode at = { .kind = YN_SCALAR, .set_index = (int)i };
			if (!c.sets[i].path)
				c.sets[i].path = xstrdup("");
			problem(&c, &at, NULL, "%s", msg);
			code = DLK_EXIT_USAGE;
		}
	}
	if (c.n_problems)
		goto out;
	if (len > SPEC_MAX_FILE) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is %zu bytes, more than the limit of %d", c.file, len, SPEC_MAX_FILE);
		goto out_err_set;
	}
	if (ytree_parse(text, len, &yaml_opts, &root, &ye)) {
		struct ynode at = { .kind = YN_SCALAR, .line = ye.line, .col = ye.col, .set_index = -1 };
		problem(&c, &at, NULL, "%s", yaml_problem_text(&ye, msg, sizeof(msg)));
		goto out;
	}
	for (size_t i = 0; i < n_sets; i++)
		set_apply(&c, &root, &c.sets[i], (int)i);

	spec = xcalloc(1, sizeof(*spec));
	spec->path = xstrdup(c.file);
	c.spec = spec;
	if (!root || ynode_is_null(root)) {
		struct ynode at = { .kind = YN_SCALAR, .line = 1, .col = 1, .set_index = -1 };
		problem(&c, &at, NULL, "the file is empty: a project needs at least name, data and model");
	} else if (root->kind != YN_MAP) {
		type_problem(&c, root, NULL, "a mapping at the top level");
	} else {
		c.blocks_val = model_blocks_node(root); /* model.layers may use blocks defined after it */
		parse_fields(&c, root_fields, root, spec, "");
	}
	apply_defaults(&c, spec);
	if (root && root->kind == YN_MAP)
		check_spec(&c, spec, root);
out:
	if (c.n_problems) {
		project_free(spec);
		spec = NULL;
		finish_problems(&c, code, err);
	}
out_err_set:
	for (size_t i = 0; i < n_parsed; i++)
		set_release(&c.sets[i]);
	free(c.sets);
	free(c.given);
	dlk_buf_release(&c.out);
	ynode_free(root);
	return spec;
}

struct dlk_project *project_load(const char *path, const char *const *sets, size_t n_sets, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_project *spec;
	char msg[512];

	if (dlk_buf_read_file(&b, path, SPEC_MAX_FILE, msg, sizeof(msg))) {
		dlk_buf_release(&b);
		dlk_errf(err, DLK_EXIT_CONFIG, "%s", msg);
		return NULL;
	}
	spec = project_load_mem(b.data, b.len, path, sets, n_sets, err);
	dlk_buf_release(&b);
	return spec;
}

void project_free(struct dlk_project *spec)
{
	if (!spec)
		return;
	free_fields(root_fields, spec);
	free(spec->path);
	free(spec);
}

char *project_dump_yaml(const struct dlk_project *spec)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_adds(&b, "# dlk project, every default explicit\n");
	dump_fields(&b, root_fields, spec, 0);
	return dlk_buf_detach(&b, NULL);
}

void project_digest(const struct dlk_project *spec, char hex[65])
{
	char *y = project_dump_yaml(spec);
	dlk_sha256_hex(y, strlen(y), hex);
	free(y);
}

/* the serving section as a document of its own */
struct serving_only {
	struct dlk_serving serving;
};
static const struct field serving_only_fields[] = {
	FIELD("serving", struct serving_only, F_MAP, serving, .sub = serving_fields),
	END
};

int project_serving_load(const char *const *sets, size_t n_sets, struct dlk_serving *out, struct dlk_err *err)
{
	struct ctx c;
	struct ynode *root = NULL;
	struct serving_only so;
	char msg[1024];
	int code = DLK_EXIT_USAGE, ret = -1;
	size_t n_parsed = 0;

	memset(&c, 0, sizeof(c));
	memset(&so, 0, sizeof(so));
	memset(out, 0, sizeof(*out));
	c.file = "--set";
	if (n_sets > SPEC_MAX_SETS)
		return dlk_errf(err, DLK_EXIT_USAGE, "too many --set options (%zu, the limit is %d)", n_sets, SPEC_MAX_SETS);
	c.sets = xcalloc(n_sets + 1, sizeof(*c.sets));
	for (size_t i = 0; i < n_sets; i++, n_parsed++) {
		struct ynode at = { .kind = YN_SCALAR, .set_index = (int)i };
		if (set_parse(sets[i], (int)i, &c.sets[i], msg, sizeof(msg))) {
			if (!c.sets[i].path)
				c.sets[i].path = xstrdup("");
			problem(&c, &at, NULL, "%s", msg);
		} else if (c.sets[i].n_comps < 2 || strcmp(c.sets[i].comps[0], "serving")) {
			problem(&c, &at, NULL, "without a project file only serving.* can be set");
		}
	}
	if (!c.n_problems) {
		for (size_t i = 0; i < n_sets; i++)
			set_apply(&c, &root, &c.sets[i], (int)i);
		if (root && root->kind == YN_MAP)
			parse_fields(&c, serving_only_fields, root, &so, "");
		defaults_walk(&c, serving_only_fields, &so);
		if (so.serving.program.present && !so.serving.program.port)
			so.serving.program.port = so.serving.port;
	}
	if (c.n_problems) {
		finish_problems(&c, code, err);
		free_fields(serving_only_fields, &so);
	} else {
		*out = so.serving;
		ret = 0;
	}
	for (size_t i = 0; i < n_parsed; i++)
		set_release(&c.sets[i]);
	free(c.sets);
	free(c.given);
	dlk_buf_release(&c.out);
	ynode_free(root);
	return ret;
}

void project_serving_release(struct dlk_serving *s)
{
	free_fields(serving_fields, s);
}

/* ---- known keys ---- */

static const char **known_keys;
static size_t n_known, cap_known;
static pthread_once_t known_once = PTHREAD_ONCE_INIT;

static void known_add(const char *prefix, const char *key, const char *suffix)
{
	if (n_known + 2 > cap_known) {
		cap_known = cap_known ? cap_known * 2 : 256;
		known_keys = xrealloc(known_keys, cap_known * sizeof(*known_keys));
	}
	known_keys[n_known++] = xasprintf("%s%s%s%s", prefix, *prefix ? "." : "", key, suffix);
	known_keys[n_known] = NULL;
}

static void known_walk(const struct field *fields, const char *prefix)
{
	for (const struct field *f = fields; f->key; f++) {
		known_add(prefix, f->key, "");
		if (f->type == F_MAP) {
			char *p = xasprintf("%s%s%s", prefix, *prefix ? "." : "", f->key);
			known_walk(f->sub, p);
			free(p);
		} else if (f->custom == &c_layers) {
			for (int k = 0; k < N_LAYER_KINDS; k++) {
				char *p = xasprintf("%s%s%s[].%s", prefix, *prefix ? "." : "", f->key, dlk_layer_names[k]);
				known_add("", p, "");
				known_walk(layer_params[k], p);
				free(p);
			}
		} else if (f->type == F_CUSTOM && f->custom->subkeys) {
			for (int i = 0; f->custom->subkeys[i]; i++)
				known_add(prefix, f->key, f->custom->subkeys[i]);
		}
	}
}

static void known_build(void)
{
	known_walk(root_fields, "");
}

const char *const *project_known_keys(void)
{
	pthread_once(&known_once, known_build);
	return (const char *const *)known_keys;
}
