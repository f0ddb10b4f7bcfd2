#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/data/bpe.h"
#include "lib/nn/layer_ops.h"
#include "lib/nn/loss.h"
#include "lib/project/layers.h"
#include "lib/train/bundle.h"
#include "lib/util/suggest.h"
#include "lib/jobs/podenv.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"
#include "lib/util/safetensors.h"
#include "lib/util/jsonprint.h"
#include "lib/util/utf8.h"

#ifndef DLK_VERSION
#define DLK_VERSION "unknown"
#endif

/* ---- tensors of a layer: names and PyTorch shapes ---- */

static int tensor_shape(const struct dlk_layer *L, int t, long long shape[4])
{
	int bias = t == DLK_TENSOR_BIAS;

	if (t == DLK_TENSOR_NUM_BATCHES)
		return 0; /* a scalar */
	switch (L->spec.kind) {
	case DLK_LAYER_BATCHNORM: /* nn.BatchNorm1d/2d: weight, bias and the running statistics [C] */
		shape[0] = (long long)L->n_w;
		return 1;
	case DLK_LAYER_LAYERNORM: /* nn.LayerNorm: weight and bias [W] */
		shape[0] = L->in[2];
		return 1;
	case DLK_LAYER_EMBEDDING: /* nn.Embedding: weight [vocab, dim]; positions: bias [positions, dim] (wpe) */
		shape[0] = bias ? L->spec.positions : L->spec.vocab;
		shape[1] = L->spec.dim;
		return 2;
	case DLK_LAYER_ATTENTION: /* in_proj then out_proj: weight [4D, D], bias [4D] */
		shape[0] = 4 * (long long)L->in[2];
		if (bias)
			return 1;
		shape[1] = L->in[2];
		return 2;
	default:
		break;
	}
	if (L->spec.kind == DLK_LAYER_DENSE) {
		shape[0] = L->out[2];
		if (bias)
			return 1;
		shape[1] = L->in[2];
		return 2;
	}
	shape[0] = L->out[0];
	if (bias)
		return 1;
	shape[1] = L->in[0] / (L->spec.groups > 1 ? L->spec.groups : 1); /* nn.Conv2d: [F, C/groups, k, k] */
	if (L->spec.kind == DLK_LAYER_CONVTRANSPOSE2D) { /* nn.ConvTranspose2d: [C, F, k, k] */
		shape[0] = L->in[0];
		shape[1] = L->out[0];
	}
	shape[2] = shape[3] = L->spec.kernel;
	return 4;
}

/* safetensors stores little-endian floats */
static void to_le(float *f, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &f[i], 4);
		u = __builtin_bswap32(u);
		memcpy(&f[i], &u, 4);
	}
#else
	(void)f;
	(void)n;
#endif
}

/* the whole safetensors file in memory: every tensor of every layer, in layer order (weight, bias,
 * state), which is the order of the flat parameter array */
static void safetensors_build(const struct dlk_net *net, const float *host, struct dlk_buf *out)
{
	struct dlk_st_list l = { NULL, 0, 0 };

	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		for (int tk = 0; tk < DLK_TENSOR_KINDS; tk++) {
			size_t off, n = dlk_layer_tensor(L, tk, &off);
			if (!n)
				continue;
			char name[64];
			long long shape[4];
			int rank = tensor_shape(L, tk, shape);
			snprintf(name, sizeof(name), "layers.%d.%s", i, dlk_tensor_names[tk]);
			dlk_st_add(&l, name, host + off, rank, shape, 0);
		}
	}
	dlk_st_write(&l, out);
	dlk_st_list_release(&l);
}

static cJSON *layer_json(const struct dlk_layer_spec *ls)
{
	cJSON *l = cJSON_CreateObject();
	cJSON_AddStringToObject(l, "kind", dlk_layer_name(ls->kind));
	if (ls->name[0])
		cJSON_AddStringToObject(l, "name", ls->name);
	if (ls->n_inputs) { /* the graph: layer indices, -1 the model's input */
		cJSON *in = cJSON_AddArrayToObject(l, "inputs");
		for (int e = 0; e < ls->n_inputs; e++)
			cJSON_AddItemToArray(in, cJSON_CreateNumber(ls->inputs[e]));
	}
	switch (ls->kind) {
	case DLK_LAYER_DENSE:
		cJSON_AddNumberToObject(l, "units", ls->units);
		if (ls->tie) /* the index of the embedding whose table is its weight */
			cJSON_AddNumberToObject(l, "tie", ls->tie - 1);
		break;
	case DLK_LAYER_CONV2D:
		cJSON_AddNumberToObject(l, "filters", ls->filters);
		cJSON_AddNumberToObject(l, "kernel", ls->kernel);
		cJSON_AddNumberToObject(l, "stride", ls->stride);
		cJSON_AddNumberToObject(l, "padding", ls->padding);
		if (ls->groups > 1)
			cJSON_AddNumberToObject(l, "groups", ls->groups);
		break;
	case DLK_LAYER_MAXPOOL:
		cJSON_AddNumberToObject(l, "size", ls->size);
		cJSON_AddNumberToObject(l, "stride", ls->stride);
		break;
	case DLK_LAYER_RESHAPE: {
		cJSON *sh = cJSON_AddArrayToObject(l, "shape");
		for (int d = 0; d < ls->target_rank; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber(ls->target[d]));
		break;
	}
	case DLK_LAYER_AVGPOOL:
		cJSON_AddNumberToObject(l, "size", ls->size);
		cJSON_AddNumberToObject(l, "stride", ls->stride);
		cJSON_AddNumberToObject(l, "padding", ls->padding);
		break;
	case DLK_LAYER_CONVTRANSPOSE2D:
		cJSON_AddNumberToObject(l, "filters", ls->filters);
		cJSON_AddNumberToObject(l, "kernel", ls->kernel);
		cJSON_AddNumberToObject(l, "stride", ls->stride);
		cJSON_AddNumberToObject(l, "padding", ls->padding);
		cJSON_AddNumberToObject(l, "output_padding", ls->output_padding);
		break;
	case DLK_LAYER_DROPOUT:
		cJSON_AddNumberToObject(l, "rate", ls->rate);
		break;
	case DLK_LAYER_LAYERNORM:
		cJSON_AddNumberToObject(l, "eps", ls->eps);
		break;
	case DLK_LAYER_BATCHNORM:
		cJSON_AddNumberToObject(l, "eps", ls->eps);
		cJSON_AddNumberToObject(l, "momentum", ls->momentum);
		break;
	case DLK_LAYER_GELU:
		cJSON_AddStringToObject(l, "approximate", ls->approximate == DLK_GELU_TANH ? "tanh" : "none");
		break;
	case DLK_LAYER_EMBEDDING:
		cJSON_AddNumberToObject(l, "vocab", ls->vocab);
		cJSON_AddNumberToObject(l, "dim", ls->dim);
		if (ls->positions)
			cJSON_AddNumberToObject(l, "positions", ls->positions);
		break;
	case DLK_LAYER_ATTENTION:
		cJSON_AddNumberToObject(l, "heads", ls->heads);
		cJSON_AddBoolToObject(l, "causal", ls->causal);
		cJSON_AddBoolToObject(l, "rotary", ls->rotary);
		cJSON_AddNumberToObject(l, "pad_id", ls->pad_id);
		cJSON_AddNumberToObject(l, "rate", ls->rate);
		break;
	case DLK_LAYER_MEANPOOL:
		cJSON_AddNumberToObject(l, "pad_id", ls->pad_id);
		break;
	case DLK_LAYER_UPSAMPLE:
		cJSON_AddNumberToObject(l, "scale", ls->scale);
		cJSON_AddStringToObject(l, "mode", ls->mode == DLK_UPSAMPLE_BILINEAR ? "bilinear" : "nearest");
		break;
	default:
		break;
	}
	return l;
}

static const char *optim_str(enum dlk_optim o)
{
	return o == DLK_OPT_SGD ? "sgd" : o == DLK_OPT_ADAM ? "adam" : "adamw";
}

cJSON *dlk_bundle_meta_json(const struct dlk_bundle_info *in)
{
	const struct dlk_net *net = in->net;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "format", "dlk-model");
	cJSON_AddNumberToObject(j, "format_version", DLK_BUNDLE_FORMAT_VERSION);
	cJSON_AddStringToObject(j, "name", in->name ? in->name : "model");

	cJSON *a = cJSON_AddObjectToObject(j, "architecture");
	cJSON *inp = cJSON_AddArrayToObject(a, "input");
	for (int d = 0; d < 3; d++)
		cJSON_AddItemToArray(inp, cJSON_CreateNumber(net->input[d]));
	cJSON_AddNumberToObject(a, "input_rank", in->model->input_rank == 1 ? 1 : 3);
	cJSON *layers = cJSON_AddArrayToObject(a, "layers");
	for (int i = 0; i < net->n_layers; i++)
		cJSON_AddItemToArray(layers, layer_json(&net->layers[i].spec));
	cJSON_AddStringToObject(a, "task", dlk_task_name(in->model->task));
	cJSON_AddStringToObject(a, "loss", dlk_loss_name(in->model->loss));
	if (in->model->loss == DLK_LOSS_HUBER)
		cJSON_AddNumberToObject(a, "huber_delta", in->model->huber_delta);
	if (in->model->task == DLK_TASK_MULTILABEL)
		cJSON_AddNumberToObject(a, "threshold", in->model->threshold);
	cJSON_AddStringToObject(a, "init", in->model->init ? in->model->init : "torch");
	cJSON_AddNumberToObject(a, "n_classes", net->n_classes);
	cJSON_AddNumberToObject(a, "parameters", (double)net->n_params);

	if (in->classes) {
		cJSON *c = cJSON_AddArrayToObject(j, "classes");
		for (int i = 0; i < net->n_classes; i++)
			cJSON_AddItemToArray(c, cJSON_CreateString(in->classes[i] ? in->classes[i] : ""));
	}

	if (in->data) {
		/* what a server needs to turn raw values (pixels 0..255, CSV columns) into the inputs
		 * the network was trained on */
		cJSON *sc = cJSON_AddObjectToObject(j, "input_scaling");
		cJSON_AddNumberToObject(sc, "scale", (double)in->data->scale);
		cJSON_AddNumberToObject(sc, "mean", (double)in->data->mean);
		cJSON_AddNumberToObject(sc, "std", (double)in->data->std);
		/* images with per-channel values: channel c's mean and std (one value: all) */
		const struct dlk_channel_values *cv[2] = { &in->data->images.mean, &in->data->images.std };
		for (int k = 0; k < 2 && project_format_has_images(in->data->format); k++) {
			if (!cv[k]->n)
				continue;
			cJSON *arr = cJSON_AddArrayToObject(sc, k ? "channel_std" : "channel_mean");
			for (int c = 0; c < cv[k]->n; c++)
				cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)cv[k]->v[c]));
		}
	}

	cJSON *m = cJSON_AddObjectToObject(j, "metrics");
	cJSON_AddNumberToObject(m, "train_loss", in->train_loss);
	if (in->eval && in->eval->n) {
		const struct dlk_eval *e = in->eval;
		int k = e->n_classes;
		cJSON_AddNumberToObject(m, "test_samples", (double)e->n);
		cJSON_AddNumberToObject(m, "test_loss", e->loss);
		/* the task's named metrics, what serving.gate and `dlk status` read; classification's
		 * accuracy is also test_accuracy, with its per-class numbers */
		cJSON *tm = cJSON_AddObjectToObject(m, "test");
		for (int i = 0; i < e->n_metrics; i++)
			cJSON_AddNumberToObject(tm, e->metrics[i].name, e->metrics[i].value);
		if (e->f1)
			cJSON_AddItemToObject(m, "f1", cJSON_CreateDoubleArray(e->f1, k));
		if (e->n_samples > 0) {
			/* the report page's grid: a few test images as the model saw and made them */
			cJSON *sm = cJSON_AddObjectToObject(m, "samples");
			cJSON_AddItemToObject(sm, "shape", cJSON_CreateIntArray(e->sample_shape, 3));
			const char *names[3] = { "input", "output", "target" };
			const float *src[3] = { e->sample_in, e->sample_out, e->sample_target };
			for (int w = 0; w < 3; w++) {
				if (!src[w])
					continue;
				cJSON *arr = cJSON_AddArrayToObject(sm, names[w]);
				for (int i = 0; i < e->n_samples; i++) {
					/* 4 decimals are more than a grey level shows, and keep model.json short */
					cJSON *img = cJSON_CreateArray();
					for (int j = 0; j < k; j++)
						cJSON_AddItemToArray(img, cJSON_CreateNumber(round(src[w][(size_t)i * k + j] * 1e4) / 1e4));
					cJSON_AddItemToArray(arr, img);
				}
			}
		}
	}
	if (in->eval && in->eval->n && in->eval->task == DLK_TASK_CLASSIFICATION && in->eval->precision) {
		const struct dlk_eval *e = in->eval;
		int k = e->n_classes;
		cJSON_AddNumberToObject(m, "test_accuracy", e->accuracy);
		cJSON_AddItemToObject(m, "precision", cJSON_CreateDoubleArray(e->precision, k));
		cJSON_AddItemToObject(m, "recall", cJSON_CreateDoubleArray(e->recall, k));
		cJSON *cm = cJSON_AddArrayToObject(m, "confusion_matrix");
		for (int r = 0; r < k; r++) {
			cJSON *row = cJSON_CreateArray();
			for (int c = 0; c < k; c++)
				cJSON_AddItemToArray(row, cJSON_CreateNumber((double)e->confusion[(size_t)r * k + c]));
			cJSON_AddItemToArray(cm, row);
		}
	}

	if (in->training) {
		const struct dlk_training *t = in->training;
		cJSON *tj = cJSON_AddObjectToObject(j, "training");
		cJSON_AddNumberToObject(tj, "epochs", t->epochs);
		cJSON_AddNumberToObject(tj, "batch_size", t->batch_size);
		cJSON_AddStringToObject(tj, "optimizer", optim_str(t->optimizer));
		cJSON_AddNumberToObject(tj, "lr", t->lr);
		cJSON_AddNumberToObject(tj, "weight_decay", t->weight_decay);
	}

	cJSON *p = cJSON_AddObjectToObject(j, "provenance");
	cJSON *data = cJSON_AddArrayToObject(p, "data");
	const struct dlk_dataset *sets[2] = { in->train, in->test };
	const char *split[2] = { "train", "test" };
	for (int s = 0; s < 2; s++)
		for (int i = 0; sets[s] && i < sets[s]->n_sources; i++) {
			cJSON *d = cJSON_CreateObject();
			cJSON_AddStringToObject(d, "split", split[s]);
			cJSON_AddStringToObject(d, "url", sets[s]->sources[i].url ? sets[s]->sources[i].url : "");
			cJSON_AddStringToObject(d, "sha256", sets[s]->sources[i].sha256);
			cJSON_AddItemToArray(data, d);
		}
	if (in->dataset_id) {
		/* the dataset the sources are files of: what `dlk lineage` and `dlk data get` need */
		cJSON *ds = cJSON_AddObjectToObject(p, "dataset");
		cJSON_AddStringToObject(ds, "id", in->dataset_id);
		if (in->dataset_tag)
			cJSON_AddStringToObject(ds, "tag", in->dataset_tag);
		if (in->data_store)
			cJSON_AddStringToObject(ds, "store", in->data_store);
	}
	if (in->project_digest)
		cJSON_AddStringToObject(p, "spec_sha256", in->project_digest);
	if (in->run_id && *in->run_id)
		cJSON_AddStringToObject(p, "run_id", in->run_id);
	cJSON_AddStringToObject(p, "dlk_version", DLK_VERSION);
	cJSON_AddStringToObject(p, "build", net->be && net->be->name ? net->be->name : "cpu");
	char seed[32];
	snprintf(seed, sizeof(seed), "%llu", in->seed);
	cJSON_AddStringToObject(p, "seed", seed); /* a string: a 64-bit seed does not fit a double */
	if (in->started_at)
		cJSON_AddStringToObject(p, "started_at", in->started_at);
	if (in->finished_at)
		cJSON_AddStringToObject(p, "finished_at", in->finished_at);
	const char *image = getenv(DLK_ENV_IMAGE);
	if (image && *image)
		cJSON_AddStringToObject(p, "image", image);
	if (in->git_commit && *in->git_commit) {
		cJSON_AddStringToObject(p, "git_commit", in->git_commit);
		cJSON_AddBoolToObject(p, "git_dirty", in->git_dirty);
	}
	if (in->history)
		cJSON_AddItemToObject(j, "history", dlk_history_json(in->history, 0));
	return j;
}

static char *model_json(const struct dlk_bundle_info *in, const char *weights_sha, size_t weights_bytes)
{
	cJSON *j = dlk_bundle_meta_json(in);
	cJSON *w = cJSON_AddObjectToObject(j, "weights");
	cJSON_AddStringToObject(w, "file", "weights.safetensors");
	cJSON_AddStringToObject(w, "sha256", weights_sha);
	cJSON_AddNumberToObject(w, "bytes", (double)weights_bytes);

	char *s = dlk_json_print(j);
	cJSON_Delete(j);
	return s;
}

static int add_member(struct archive *a, const char *name, const void *data, size_t len, time_t mtime)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, mtime, 0);
	int r = archive_write_header(a, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return -1;
	const char *p = data;
	while (len) {
		la_ssize_t n = archive_write_data(a, p, len > (1u << 20) ? 1u << 20 : len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int dlk_bundle_write(const char *path, const struct dlk_bundle_info *in, struct dlk_err *err)
{
	const struct dlk_net *net = in->net;
	struct dlk_buf st = DLK_BUF_INIT, tok = DLK_BUF_INIT;
	struct archive *a = NULL;
	char *tmp = NULL, *json = NULL, *dir = NULL;
	float *host = NULL;
	int fd = -1, ret = -1;
	char sha[65];

	if (in->classes && in->n_class_names && in->n_class_names != net->n_classes)
		return dlk_errf(err, DLK_EXIT_CONFIG, "data.classes names %d classes but the model has %d outputs",
		                in->n_class_names, net->n_classes);
	host = xmalloc(sizeof(float) * (net->n_params ? net->n_params : 1));
	net->be->to_host(host, net->params, sizeof(float) * net->n_params);
	safetensors_build(net, host, &st);
	dlk_sha256_hex(st.data, st.len, sha);
	json = model_json(in, sha, st.len);

	tmp = xasprintf("%s.tmp.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", tmp, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	fchmod(fd, 0644);
	a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	time_t now = time(NULL);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK || add_member(a, "model.json", json, strlen(json), now) ||
	    add_member(a, "weights.safetensors", st.data, st.len, now) ||
	    (in->tokenizer && (dlk_tokenizer_save(in->tokenizer, &tok), add_member(a, "tokenizer.txt", tok.data, tok.len, now))) ||
	    archive_write_close(a) != ARCHIVE_OK) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", path, archive_error_string(a) ? archive_error_string(a) : "write failed");
		goto out;
	}
	if (fsync(fd)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': fsync: %s", path, strerror(errno));
		goto out;
	}
	if (close(fd)) {
		fd = -1;
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	/* the rename itself is durable only once the directory is synced */
	dir = xstrdup(path);
	int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	ret = 0;
out:
	if (a)
		archive_write_free(a);
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(dir);
	free(json);
	free(host);
	dlk_buf_release(&st);
	dlk_buf_release(&tok);
	return ret;
}

/* ---- reading ---- */

/* an integer field in [lo, hi]; absent gives def */
static int int_field(const cJSON *o, const char *key, int def, int lo, int hi, int *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v) {
		*out = def;
		return 0;
	}
	/* the range first: converting 1e300 to an integer type to test it is undefined */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
	    v->valuedouble != floor(v->valuedouble))
		return -1;
	*out = (int)v->valuedouble;
	return 0;
}

/* input_scaling.channel_mean / channel_std: lists of 1 or C finite numbers (std not 0), resolved
 * to C values as lib/data/load.c resolves data.images.mean / std for training */
static int channel_scaling(const char *path, const cJSON *sc, struct dlk_bundle *b, struct dlk_err *err)
{
	static const char *const keys[2] = { "channel_mean", "channel_std" };
	int C = b->model.input[0];

	for (int k = 0; k < 2; k++) {
		const cJSON *arr = cJSON_GetObjectItemCaseSensitive(sc, keys[k]);
		float *dst = k ? b->channel_std : b->channel_mean;
		int n;
		if (!arr)
			continue;
		n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
		if (C < 1 || C > DLK_MAX_CHANNELS)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: input_scaling.%s is given, but the input has %d "
			                "channels (per-channel values are for 1 to %d)", path, keys[k], C, DLK_MAX_CHANNELS);
		if (n != 1 && n != C)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: input_scaling.%s must list 1 or %d numbers (one "
			                "for every channel, or one a channel)", path, keys[k], C);
		for (int c = 0; c < n; c++) {
			const cJSON *v = cJSON_GetArrayItem(arr, c);
			if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 1e30 ||
			    (k && (float)v->valuedouble == 0.0f))
				return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: input_scaling.%s[%d] is not a finite number%s",
				                path, keys[k], c, k ? " other than 0" : "");
		}
		for (int c = 0; c < C; c++)
			dst[c] = (float)cJSON_GetArrayItem(arr, n > 1 ? c : 0)->valuedouble;
		b->n_channel_scaling = C;
	}
	if (b->n_channel_scaling) {
		/* the list not recorded is the one-value mean or std, for every channel */
		if (!cJSON_GetObjectItemCaseSensitive(sc, keys[0]))
			for (int c = 0; c < C; c++)
				b->channel_mean[c] = b->mean;
		if (!cJSON_GetObjectItemCaseSensitive(sc, keys[1]))
			for (int c = 0; c < C; c++)
				b->channel_std[c] = b->std;
	}
	return 0;
}

static int parse_meta(const char *path, struct dlk_bundle *b, struct dlk_err *err)
{
	const cJSON *j = b->meta, *a, *v;
	if (!cJSON_IsObject(j) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "format")) ||
	    strcmp(cJSON_GetObjectItemCaseSensitive(j, "format")->valuestring, "dlk-model"))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json is not a dlk model description", path);
	v = cJSON_GetObjectItemCaseSensitive(j, "format_version");
	if (!cJSON_IsNumber(v) || v->valuedouble != DLK_BUNDLE_FORMAT_VERSION) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json has format_version %g; this dlk reads version %d", path,
		         cJSON_IsNumber(v) ? v->valuedouble : -1.0, DLK_BUNDLE_FORMAT_VERSION);
		return dlk_err_hint(err, "use the dlk version that wrote the bundle");
	}
	a = cJSON_GetObjectItemCaseSensitive(j, "architecture");
	const cJSON *inp = cJSON_GetObjectItemCaseSensitive(a, "input");
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(a, "layers");
	if (!cJSON_IsArray(inp) || cJSON_GetArraySize(inp) != 3 || !cJSON_IsArray(layers))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.input or architecture.layers is missing", path);
	for (int d = 0; d < 3; d++) {
		v = cJSON_GetArrayItem(inp, d);
		if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > (1 << 24))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.input[%d] is not a size", path, d);
		b->model.input[d] = (int)v->valuedouble;
	}
	int rank;
	if (int_field(a, "input_rank", 3, 1, 3, &rank))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.input_rank is not 1 or 3", path);
	b->model.input_rank = rank;
	int n = cJSON_GetArraySize(layers);
	if (n < 1 || n > DLK_NET_MAX_LAYERS)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: %d layers (must be 1..%d)", path, n, DLK_NET_MAX_LAYERS);
	b->model.layers = xcalloc((size_t)n, sizeof(*b->model.layers));
	b->model.n_layers = n;
	for (int i = 0; i < n; i++) {
		const cJSON *l = cJSON_GetArrayItem(layers, i);
		struct dlk_layer_spec *ls = &b->model.layers[i];
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(l, "kind");
		int kind = cJSON_IsString(k) ? dlk_layer_kind_of(k->valuestring) : -1;
		if (kind < 0) {
			char kinds[256];
			dlk_suggest_or_list(kinds, sizeof(kinds), "", dlk_layer_names, DLK_LAYER_KINDS, "this dlk knows");
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d] has an unknown kind%s", path, i,
			         kinds);
			return dlk_err_hint(err, "a bundle written by a newer dlk may use layers this one does not have");
		}
		ls->kind = (enum dlk_layer_kind)kind;
		const cJSON *rate = cJSON_GetObjectItemCaseSensitive(l, "rate");
		if (rate && (!cJSON_IsNumber(rate) || !(rate->valuedouble >= 0 && rate->valuedouble < 1)))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].rate is not in [0, 1)",
			                path, i);
		ls->rate = rate ? (float)rate->valuedouble : ls->kind == DLK_LAYER_ATTENTION ? 0.0f : 0.5f;
		const cJSON *causal = cJSON_GetObjectItemCaseSensitive(l, "causal"), *rot = cJSON_GetObjectItemCaseSensitive(l, "rotary");
		if ((causal && !cJSON_IsBool(causal)) || (rot && !cJSON_IsBool(rot)))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].causal or .rotary is not "
			                "true or false", path, i);
		ls->causal = !causal || cJSON_IsTrue(causal);
		ls->rotary = cJSON_IsTrue(rot);
		const cJSON *eps = cJSON_GetObjectItemCaseSensitive(l, "eps");
		if (eps && (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0 && eps->valuedouble <= 1)))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].eps is not in (0, 1]",
			                path, i);
		ls->eps = eps ? (float)eps->valuedouble : 1e-5f;
		const cJSON *tsh = cJSON_GetObjectItemCaseSensitive(l, "shape");
		if (ls->kind == DLK_LAYER_RESHAPE) {
			int r = cJSON_IsArray(tsh) ? cJSON_GetArraySize(tsh) : 0, ok = r >= 1 && r <= 3;
			for (int d = 0; ok && d < r; d++) {
				const cJSON *v = cJSON_GetArrayItem(tsh, d);
				ok = cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
				     (v->valuedouble == -1 || (v->valuedouble >= 1 && v->valuedouble <= (1 << 30)));
				if (ok)
					ls->target[d] = (int)v->valuedouble;
			}
			if (!ok)
				return dlk_errf(err, DLK_EXIT_CONFIG,
				                "'%s': model.json: architecture.layers[%d].shape is not a list of 1 to 3 sizes", path, i);
			ls->target_rank = r;
		}
		const cJSON *mom = cJSON_GetObjectItemCaseSensitive(l, "momentum");
		if (mom && (!cJSON_IsNumber(mom) || !(mom->valuedouble >= 0 && mom->valuedouble <= 1)))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].momentum is not in [0, 1]",
			                path, i);
		ls->momentum = mom ? (float)mom->valuedouble : 0.1f;
		const cJSON *ap = cJSON_GetObjectItemCaseSensitive(l, "approximate");
		if (ap && (!cJSON_IsString(ap) || (strcmp(ap->valuestring, "none") && strcmp(ap->valuestring, "tanh"))))
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': model.json: architecture.layers[%d].approximate is not \"none\" or \"tanh\"", path, i);
		ls->approximate = ap && !strcmp(ap->valuestring, "tanh") ? DLK_GELU_TANH : DLK_GELU_ERF;
		const cJSON *mode = cJSON_GetObjectItemCaseSensitive(l, "mode");
		if (mode && (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "nearest") && strcmp(mode->valuestring, "bilinear"))))
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': model.json: architecture.layers[%d].mode is not \"nearest\" or \"bilinear\"", path, i);
		ls->mode = mode && !strcmp(mode->valuestring, "bilinear") ? DLK_UPSAMPLE_BILINEAR : DLK_UPSAMPLE_NEAREST;
		if (int_field(l, "units", 0, 0, 1 << 24, &ls->units) || int_field(l, "filters", 0, 0, 65536, &ls->filters) ||
		    int_field(l, "kernel", 3, 1, 1024, &ls->kernel) || int_field(l, "padding", 0, 0, 1024, &ls->padding) ||
		    int_field(l, "size", 2, 1, 1024, &ls->size) || int_field(l, "vocab", 0, 0, 1 << 24, &ls->vocab) ||
		    int_field(l, "dim", 0, 0, 1 << 16, &ls->dim) || int_field(l, "scale", 2, 1, 64, &ls->scale) ||
		    int_field(l, "positions", 0, 0, 1 << 20, &ls->positions) ||
		    int_field(l, "heads", 0, 0, 4096, &ls->heads) || int_field(l, "pad_id", -1, -1, 1 << 24, &ls->pad_id) ||
		    int_field(l, "groups", 1, 1, 65536, &ls->groups) ||
		    int_field(l, "output_padding", 0, 0, 1023, &ls->output_padding) ||
		    int_field(l, "stride", ls->kind == DLK_LAYER_MAXPOOL || ls->kind == DLK_LAYER_AVGPOOL ? ls->size : 1, 1, 1024,
		              &ls->stride))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d] has a bad size field", path, i);
		const cJSON *tie = cJSON_GetObjectItemCaseSensitive(l, "tie");
		if (tie) {
			if (!cJSON_IsNumber(tie) || tie->valuedouble != (int)tie->valuedouble || tie->valuedouble < 0 ||
			    tie->valuedouble >= i || ls->kind != DLK_LAYER_DENSE)
				return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].tie is not the index "
				                "of an earlier layer of a dense layer", path, i);
			ls->tie = (int)tie->valuedouble + 1;
		}
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(l, "name");
		if (cJSON_IsString(name))
			snprintf(ls->name, sizeof(ls->name), "%s", name->valuestring);
		const cJSON *in = cJSON_GetObjectItemCaseSensitive(l, "inputs");
		int arity = dlk_layer_arity(ls->kind);
		if (in) {
			int n_in = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
			if (n_in != arity)
				return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].inputs is not a list "
				                "of %d layer indices", path, i, arity);
			ls->n_inputs = n_in;
			for (int e = 0; e < n_in; e++) {
				const cJSON *v = cJSON_GetArrayItem(in, e);
				if (!cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble || v->valuedouble < -1 ||
				    v->valuedouble >= i)
					return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d].inputs[%d] is "
					                "not the index of an earlier layer (or -1)", path, i, e);
				ls->inputs[e] = (int)v->valuedouble;
			}
		} else if (arity != 1) {
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.layers[%d] (%s) has no inputs",
			                path, i, dlk_layer_name(ls->kind));
		}
	}
	/* a bundle of an older dlk names no task: it is a classifier */
	const cJSON *task = cJSON_GetObjectItemCaseSensitive(a, "task"), *loss = cJSON_GetObjectItemCaseSensitive(a, "loss");
	int tk = task ? dlk_task_from_name(cJSON_IsString(task) ? task->valuestring : NULL) : DLK_TASK_CLASSIFICATION;
	int lk = loss ? dlk_loss_from_name(cJSON_IsString(loss) ? loss->valuestring : NULL) : DLK_LOSS_SOFTMAX_CE;
	if (tk < 0 || lk < 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.%s is not one this dlk knows", path,
		                tk < 0 ? "task" : "loss");
	b->model.task = (enum dlk_task)tk;
	b->model.loss = (enum dlk_loss)lk;
	b->model.huber_delta = 1.0;
	b->model.threshold = 0.5;
	const cJSON *thr = cJSON_GetObjectItemCaseSensitive(a, "threshold");
	if (cJSON_IsNumber(thr) && thr->valuedouble > 0 && thr->valuedouble < 1)
		b->model.threshold = thr->valuedouble;
	int min_out = tk == DLK_TASK_CLASSIFICATION ? 2 : 1;
	if (int_field(a, "n_classes", 0, min_out, 1 << 24, &b->n_classes) || b->n_classes < min_out)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: architecture.n_classes is missing or below %d", path,
		                min_out);
	const cJSON *init = cJSON_GetObjectItemCaseSensitive(a, "init");
	b->model.init = xstrdup(cJSON_IsString(init) ? init->valuestring : "torch");
	const cJSON *classes = cJSON_GetObjectItemCaseSensitive(j, "classes");
	if (classes) {
		if (!cJSON_IsArray(classes) || cJSON_GetArraySize(classes) != b->n_classes)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: classes must list %d names", path, b->n_classes);
		b->classes = xcalloc((size_t)b->n_classes, sizeof(char *));
		for (int i = 0; i < b->n_classes; i++) {
			const cJSON *c = cJSON_GetArrayItem(classes, i);
			b->classes[i] = xstrdup(cJSON_IsString(c) ? c->valuestring : "");
			/* a label goes into JSON answers and pages as it is: it must be text */
			if (!dlk_utf8_valid(b->classes[i], strlen(b->classes[i])))
				return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: classes[%d] is not UTF-8 text", path, i);
		}
	}
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(j, "input_scaling");
	if (sc) {
		const cJSON *v_scale = cJSON_GetObjectItemCaseSensitive(sc, "scale");
		const cJSON *v_mean = cJSON_GetObjectItemCaseSensitive(sc, "mean");
		const cJSON *v_std = cJSON_GetObjectItemCaseSensitive(sc, "std");
		if (!cJSON_IsNumber(v_scale) || !cJSON_IsNumber(v_mean) || !cJSON_IsNumber(v_std) ||
		    !isfinite(v_scale->valuedouble) || !isfinite(v_mean->valuedouble) || !isfinite(v_std->valuedouble) ||
		    fabs(v_scale->valuedouble) > 1e30 || fabs(v_mean->valuedouble) > 1e30 ||
		    fabs(v_std->valuedouble) > 1e30 || (float)v_std->valuedouble == 0.0f)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': model.json: input_scaling needs finite numbers scale, mean and std (std not 0)", path);
		b->has_scaling = 1;
		b->scale = (float)v_scale->valuedouble;
		b->mean = (float)v_mean->valuedouble;
		b->std = (float)v_std->valuedouble;
		if (channel_scaling(path, sc, b, err))
			return -1;
	}
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "weights");
	const cJSON *sha = cJSON_GetObjectItemCaseSensitive(w, "sha256");
	if (!cJSON_IsString(sha) || !dlk_sha256_is_hex(sha->valuestring))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json: weights.sha256 is missing", path);
	memcpy(b->weights_sha256, sha->valuestring, 65);
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "provenance"), "build");
	snprintf(b->build, sizeof(b->build), "%s", cJSON_IsString(build) ? build->valuestring : "");
	return 0;
}

struct span {
	uint64_t begin, end;
	size_t flat; /* where the tensor goes in the flat array */
};

static int cmp_span(const void *x, const void *y)
{
	const struct span *a = x, *b = y;
	return a->begin < b->begin ? -1 : a->begin > b->begin;
}

/* checks the safetensors file against the net's layout and copies the data into b->weights */

/* "layers.N.weight" or "layers.N.bias" with N a layer of the model, written in decimal digits
 * only: sscanf's %d took "+1", " 1" and an index past 2^32 (wrapped to another layer). */
static int parse_tensor_name(const char *s, int n_layers, int *li, int *kind)
{
	long long n = 0;
	const char *p;

	if (strncmp(s, "layers.", 7))
		return -1;
	p = s + 7;
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (*p - '0');
		if (n >= n_layers)
			return -1;
	}
	if (*p++ != '.')
		return -1;
	for (int t = 0; t < DLK_TENSOR_KINDS; t++)
		if (!strcmp(p, dlk_tensor_names[t])) {
			*li = (int)n;
			*kind = t;
			return 0;
		}
	return -1;
}

static int parse_safetensors(const char *path, const unsigned char *buf, size_t len, const struct dlk_net *net,
                             struct dlk_bundle *b, struct dlk_err *err)
{
	const char *who = "weights.safetensors";
	cJSON *h = NULL;
	struct span *spans = NULL;
	int n_spans = 0, ret = -1;
	if (len < 8)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: truncated at byte %zu (no header length)", path, who, len);
	uint64_t hl = 0;
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)buf[i] << (8 * i);
	if (hl > DLK_BUNDLE_MAX_HEADER || hl > len - 8)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: header length %llu at byte 0 runs past the end of the %zu-byte file",
		                path, who, (unsigned long long)hl, len);
	h = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hl);
	if (!cJSON_IsObject(h)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: the header (bytes 8..%llu) is not a JSON object", path, who,
		         (unsigned long long)(8 + hl));
		goto out;
	}
	uint64_t data_len = len - 8 - hl;
	const unsigned char *data = buf + 8 + hl;
	spans = xcalloc((size_t)cJSON_GetArraySize(h) + 1, sizeof(*spans));
	for (const cJSON *t = h->child; t; t = t->next) {
		if (!strcmp(t->string, "__metadata__"))
			continue;
		int li, kind;
		size_t flat = 0;
		if (parse_tensor_name(t->string, net->n_layers, &li, &kind) ||
		    !dlk_layer_tensor(&net->layers[li], kind, &flat)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: tensor '%s' is not a parameter of this model", path, who, t->string);
			goto out;
		}
		const struct dlk_layer *L = &net->layers[li];
		long long want[4];
		int rank = tensor_shape(L, kind, want);
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
		const cJSON *of = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
		if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "F32")) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: tensor '%s' has dtype %s, not F32", path, who, t->string,
			         cJSON_IsString(dt) ? dt->valuestring : "(none)");
			goto out;
		}
		int shape_ok = cJSON_IsArray(sh) && cJSON_GetArraySize(sh) == rank;
		for (int d = 0; shape_ok && d < rank; d++) {
			const cJSON *x = cJSON_GetArrayItem(sh, d);
			shape_ok = cJSON_IsNumber(x) && x->valuedouble == (double)want[d];
		}
		if (!shape_ok) {
			char ws[96];
			if (rank == 0)
				snprintf(ws, sizeof(ws), "[]");
			else if (rank == 1)
				snprintf(ws, sizeof(ws), "[%lld]", want[0]);
			else if (rank == 2)
				snprintf(ws, sizeof(ws), "[%lld, %lld]", want[0], want[1]);
			else
				snprintf(ws, sizeof(ws), "[%lld, %lld, %lld, %lld]", want[0], want[1], want[2], want[3]);
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: tensor '%s' does not have the shape %s the architecture gives it",
			         path, who, t->string, ws);
			goto out;
		}
		const cJSON *o0 = cJSON_GetArrayItem(of, 0), *o1 = cJSON_GetArrayItem(of, 1);
		size_t n = dlk_layer_tensor(L, kind, &flat);
		if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !cJSON_IsNumber(o0) || !cJSON_IsNumber(o1) ||
		    o0->valuedouble < 0 || o0->valuedouble != floor(o0->valuedouble) || o1->valuedouble < o0->valuedouble ||
		    o1->valuedouble > (double)data_len ||
		    o1->valuedouble - o0->valuedouble != (double)n * 4) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: tensor '%s' has data_offsets outside the %llu data bytes or not "
			         "%zu bytes long", path, who, t->string, (unsigned long long)data_len, n * 4);
			goto out;
		}
		for (int s = 0; s < n_spans; s++)
			if (spans[s].flat == flat) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: tensor '%s' appears twice", path, who, t->string);
				goto out;
			}
		spans[n_spans].begin = (uint64_t)o0->valuedouble;
		spans[n_spans].end = (uint64_t)o1->valuedouble;
		spans[n_spans].flat = flat;
		n_spans++;
	}
	int expected = 0;
	for (int i = 0; i < net->n_layers; i++)
		for (int tk = 0; tk < DLK_TENSOR_KINDS; tk++) {
			size_t off;
			expected += dlk_layer_tensor(&net->layers[i], tk, &off) ? 1 : 0;
		}
	if (n_spans != expected) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: holds %d tensors but the architecture has %d", path, who, n_spans, expected);
		goto out;
	}
	qsort(spans, (size_t)n_spans, sizeof(*spans), cmp_span);
	uint64_t at = 0;
	for (int s = 0; s < n_spans; s++) {
		if (spans[s].begin != at) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: tensor data %s at data byte %llu", path, who,
			         spans[s].begin < at ? "overlaps" : "leaves a gap", (unsigned long long)at);
			goto out;
		}
		at = spans[s].end;
	}
	if (at != data_len) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s: %llu bytes follow the last tensor", path, who,
		         (unsigned long long)(data_len - at));
		goto out;
	}
	b->n_weights = net->n_params;
	b->weights = xmalloc(sizeof(float) * (net->n_params ? net->n_params : 1));
	for (int s = 0; s < n_spans; s++) {
		size_t n = (size_t)(spans[s].end - spans[s].begin) / 4;
		memcpy(b->weights + spans[s].flat, data + spans[s].begin, n * 4);
		to_le(b->weights + spans[s].flat, n);
	}
	ret = 0;
out:
	cJSON_Delete(h);
	free(spans);
	return ret;
}

/* reads the current member fully; bounded by max; errors name the member and byte offset */
static int read_member(struct archive *a, struct archive_entry *e, const char *path, size_t max,
                       unsigned long long file_size, unsigned char **out, size_t *len, struct dlk_err *err)
{
	const char *name = archive_entry_pathname(e);
	la_int64_t size = archive_entry_size(e), at = archive_filter_bytes(a, -1);
	if (size < 0 || (uint64_t)size > max)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s' is %lld bytes, over the limit of %zu", path, name,
		                (long long)size, max);
	/* a bundle is an uncompressed tar: a member cannot hold more bytes than the file has left, so a
	 * header claiming gigabytes is refused before anything is allocated for it */
	if (at >= 0 && (unsigned long long)size > file_size - ((unsigned long long)at < file_size ? (unsigned long long)at : file_size))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s' claims %lld bytes but only %llu remain after byte %lld: "
		                "the bundle is truncated or damaged", path, name, (long long)size,
		                file_size - ((unsigned long long)at < file_size ? (unsigned long long)at : file_size), (long long)at);
	unsigned char *buf = xmalloc((size_t)size + 1);
	size_t got = 0;
	while (got < (size_t)size) {
		la_ssize_t n = archive_read_data(a, buf + got, (size_t)size - got);
		if (n <= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s' is truncated: %zu of %lld bytes (archive byte %lld)%s%s",
			         path, name, got, (long long)size, (long long)archive_filter_bytes(a, -1),
			         n < 0 ? ": " : "", n < 0 ? archive_error_string(a) : "");
			free(buf);
			return -1;
		}
		got += (size_t)n;
	}
	buf[size] = 0;
	*out = buf;
	*len = (size_t)size;
	return 0;
}

int dlk_bundle_read(const char *path, struct dlk_bundle *b, struct dlk_err *err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	unsigned char *json = NULL, *wts = NULL, *tok = NULL;
	size_t json_len = 0, wts_len = 0, tok_len = 0;
	struct dlk_net net = DLK_NET_INIT;
	int ret = -1, r, fd;
	char msg[512];
	struct stat st;

	*b = (struct dlk_bundle)DLK_BUNDLE_INIT;
	/* checked on the descriptor that is read: a name swapped for a FIFO after a stat() would
	 * still block the reader */
	fd = dlk_open_regular_msg(path, msg, sizeof(msg));
	if (fd < 0) {
		if (errno == EINVAL) /* a FIFO, a device, a directory */
			dlk_errf(err, DLK_EXIT_CONFIG, "bundle: %s", msg);
		else
			dlk_errf(err, DLK_EXIT_CONFIG, "cannot open bundle '%s': %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &st)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "cannot open bundle '%s': %s", path, strerror(errno));
		goto out;
	}
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		dlk_errf(err, DLK_EXIT_CONFIG, "cannot open bundle '%s': %s", path, archive_error_string(a));
		goto out;
	}
	for (int members = 0; (r = archive_read_next_header(a, &e)) == ARCHIVE_OK; members++) {
		const char *name = archive_entry_pathname(e);
		if (members > 64) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': more than 64 members; not a dlk bundle", path);
			goto out;
		}
		if (name && !strcmp(name, "model.json") && !json) {
			if (read_member(a, e, path, DLK_BUNDLE_MAX_JSON, (unsigned long long)st.st_size, &json, &json_len, err))
				goto out;
		} else if (name && !strcmp(name, "weights.safetensors") && !wts) {
			if (read_member(a, e, path, DLK_BUNDLE_MAX_WEIGHTS, (unsigned long long)st.st_size, &wts, &wts_len, err))
				goto out;
		} else if (name && !strcmp(name, "tokenizer.txt") && !tok) {
			if (read_member(a, e, path, DLK_BUNDLE_MAX_JSON, (unsigned long long)st.st_size, &tok, &tok_len, err))
				goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': damaged archive at byte %lld: %s", path,
		         (long long)archive_filter_bytes(a, -1), archive_error_string(a));
		goto out;
	}
	if (!json || !wts) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a dlk bundle: '%s' is missing", path,
		         !json ? "model.json" : "weights.safetensors");
		goto out;
	}
	b->meta = cJSON_ParseWithLength((const char *)json, json_len);
	if (!b->meta) {
		const char *at = cJSON_GetErrorPtr();
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.json is not valid JSON (near byte %ld)", path,
		         at && at >= (const char *)json ? (long)(at - (const char *)json) : -1L);
		goto out;
	}
	if (parse_meta(path, b, err))
		goto out;
	char sha[65];
	dlk_sha256_hex(wts, wts_len, sha);
	if (strcmp(sha, b->weights_sha256)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': weights.safetensors has sha256 %.12s..., but model.json records %.12s...",
		         path, sha, b->weights_sha256);
		dlk_err_hint(err, "the bundle is corrupted; copy it again or retrain");
		goto out;
	}
	/* the net's layout says where each tensor goes; it needs no device memory for that */
	if (dlk_net_build(&net, &b->model, path, b->n_classes, dlk_backend_cpu(), err)) {
		dlk_err_prefix(err, "'%s': model.json", path);
		goto out;
	}
	if (parse_safetensors(path, wts, wts_len, &net, b, err))
		goto out;
	if (tok) {
		char *what = xasprintf("%s: tokenizer.txt", path);
		int r2 = dlk_tokenizer_load(tok, tok_len, what, &b->tokenizer, err);
		free(what);
		if (r2 < 0)
			goto out;
	}
	ret = 0;
out:
	dlk_net_release(&net);
	archive_read_free(a);
	if (fd >= 0)
		close(fd);
	free(json);
	free(wts);
	free(tok);
	if (ret)
		dlk_bundle_release(b);
	return ret;
}

int dlk_bundle_net(const struct dlk_bundle *b, const struct dlk_backend *be, struct dlk_net *net, struct dlk_err *err)
{
	if (dlk_net_build(net, &b->model, "model.json", b->n_classes, be, err))
		return -1;
	if (net->n_params != b->n_weights) {
		size_t n_params = net->n_params; /* the release below clears it */
		dlk_net_release(net);
		return dlk_errf(err, DLK_EXIT_CONFIG, "bundle: %zu weights for a model of %zu parameters", b->n_weights,
		                n_params);
	}
	be->to_device(net->params, b->weights, sizeof(float) * b->n_weights);
	return 0;
}

void dlk_bundle_release(struct dlk_bundle *b)
{
	cJSON_Delete(b->meta);
	free(b->model.layers);
	free(b->model.init);
	if (b->classes)
		for (int i = 0; i < b->n_classes; i++)
			free(b->classes[i]);
	free(b->classes);
	free(b->weights);
	dlk_tokenizer_free(b->tokenizer);
	*b = (struct dlk_bundle)DLK_BUNDLE_INIT;
}

int dlk_bundle_lm(const struct dlk_bundle *b, const char *path, struct dlk_lm_info *out, struct dlk_err *err)
{
	const struct dlk_model *m = &b->model;

	memset(out, 0, sizeof(*out));
	if (m->task != DLK_TASK_LM)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a model of task %s, not a language model (model.task lm)", path,
		                dlk_task_name(m->task));
	if (!b->tokenizer)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the language model has no tokenizer (tokenizer.txt)", path);
	/* the logits' width: the last layer that sets a width (dense, an embedding); the layers after
	 * it (norms, activations, dropout) keep it. The loader checked the [1, T, V] end. */
	for (int i = m->n_layers - 1; i >= 0 && !out->vocab; i--)
		if (m->layers[i].kind == DLK_LAYER_DENSE)
			out->vocab = m->layers[i].units;
		else if (m->layers[i].kind == DLK_LAYER_EMBEDDING)
			out->vocab = m->layers[i].dim;
	if (out->vocab < 2)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the language model ends with no vocabulary logits", path);
	out->context = m->input[0] * m->input[1] * m->input[2];
	out->tokenizer = b->tokenizer;
	return 0;
}
