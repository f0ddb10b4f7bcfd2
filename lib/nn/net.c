/* Building, running and differentiating a network of spec layers on one backend. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/rng.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

void dlk_shape_str(const int s[3], char *buf, size_t len)
{
	if (s[0] == 1 && s[1] == 1)
		snprintf(buf, len, "%d", s[2]);
	else
		snprintf(buf, len, "%dx%dx%d", s[0], s[1], s[2]);
}

static int act_of(enum dlk_layer_kind k)
{
	switch (k) {
	case DLK_LAYER_RELU: return DLK_ACT_RELU;
	case DLK_LAYER_TANH: return DLK_ACT_TANH;
	case DLK_LAYER_SIGMOID: return DLK_ACT_SIGMOID;
	default: return DLK_ACT_NONE;
	}
}

static int is_flat(const int s[3]) { return s[0] == 1 && s[1] == 1; }

/* Checks layer L's own sizes (ranges a project file cannot get past the loader, a model.json
 * can) and what it needs of its input shape L->in beyond a window that fits. */
static int layer_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	char shp[64];

	switch (ls->kind) {
	case DLK_LAYER_DENSE:
		if (ls->units <= 0 || ls->units > (1 << 24))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: units must be in 1..%d, not %d", w, 1 << 24, ls->units);
		if (!is_flat(L->in)) {
			dlk_shape_str(L->in, shp, sizeof(shp));
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: expects a flat input but gets %s", w, shp);
			return dlk_err_hint(err, "add 'flatten' before it");
		}
		return 0;
	case DLK_LAYER_CONV2D:
		if (ls->filters <= 0 || ls->filters > 65536 || ls->kernel <= 0 || ls->kernel > 1024 || ls->stride <= 0 ||
		    ls->stride > 1024 || ls->padding < 0 || ls->padding > 1024)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "%s: filters %d, kernel %d, stride %d, padding %d: each must be positive "
			                "(padding may be 0) and at most 65536/1024",
			                w, ls->filters, ls->kernel, ls->stride, ls->padding);
		return 0;
	case DLK_LAYER_MAXPOOL:
		if (ls->size <= 0 || ls->size > 1024 || ls->stride <= 0 || ls->stride > 1024)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: size %d and stride %d must be in 1..1024", w, ls->size,
			                ls->stride);
		return 0;
	case DLK_LAYER_FLATTEN:
	case DLK_LAYER_RELU:
	case DLK_LAYER_TANH:
	case DLK_LAYER_SIGMOID:
		return 0;
	case DLK_LAYER_DROPOUT:
		if (!(ls->rate >= 0.0f && ls->rate < 1.0f))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: rate must be in [0, 1), not %g", w, (double)ls->rate);
		return 0;
	}
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s: unknown layer kind %d", w, (int)ls->kind);
}

/* conv2d's or maxpool's window does not fit its input */
static int window_error(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	char shp[64];

	dlk_shape_str(L->in, shp, sizeof(shp));
	if (ls->kind == DLK_LAYER_CONV2D) {
		int k = ls->kernel, p = ls->padding;
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: the %dx%d window is larger than its input %s (padded to %dx%d)", w, k,
		         k, shp, L->in[1] + 2 * p, L->in[2] + 2 * p);
		return dlk_err_hint(err, is_flat(L->in) ? "declare model.input as [channels, height, width] for images"
		                                        : "use a smaller kernel, more padding, or fewer pooling layers before it");
	}
	dlk_errf(err, DLK_EXIT_CONFIG, "%s: the %dx%d window is larger than its input %s", w, ls->size, ls->size, shp);
	if (is_flat(L->in))
		dlk_err_hint(err, "declare model.input as [channels, height, width] for images");
	return -1;
}

/* The shapes of a layer's parameters: weights and biases, and the fans their initialisation
 * uses (each at most n_w, which the caller bounds below 2^31 before the fans are used). */
static void count_params(struct dlk_layer *L)
{
	const struct dlk_layer_spec *ls = &L->spec;
	size_t kk = (size_t)ls->kernel * (size_t)ls->kernel;

	if (ls->kind == DLK_LAYER_DENSE) {
		L->fan_in = L->in[2];
		L->fan_out = ls->units;
		L->n_w = (size_t)ls->units * (size_t)L->in[2];
		L->n_b = (size_t)ls->units;
	} else if (ls->kind == DLK_LAYER_CONV2D) {
		L->fan_in = (int)((size_t)L->in[0] * kk);
		L->fan_out = (int)((size_t)ls->filters * kk);
		L->n_w = (size_t)ls->filters * (size_t)L->in[0] * kk;
		L->n_b = (size_t)ls->filters;
	}
}

/* Every layer's input and output shape from the model's input, each layer checked, and where
 * its parameters go in the flat arrays. */
static int build_layers(struct dlk_net *net, const struct dlk_model *model, const char *spec_file,
                        struct dlk_err *err)
{
	const int *cur = net->input;
	unsigned long long n_params = 0;
	char w[256];

	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		long long in[3] = { cur[0], cur[1], cur[2] }, out[3];

		L->spec = model->layers[i];
		memcpy(L->in, cur, sizeof(L->in));
		L->in_size = (size_t)cur[0] * cur[1] * cur[2];
		dlk_layer_where(w, sizeof(w), i, &L->spec, spec_file);
		if (layer_check(L, w, err))
			return -1;
		if (dlk_layer_shape(&L->spec, in, out) < 0)
			return window_error(L, w, err);
		count_params(L);
		/* each fits an int: the input and every earlier output are at most 2^30 values */
		for (int d = 0; d < 3; d++)
			L->out[d] = (int)out[d];
		L->out_size = (size_t)L->out[0] * L->out[1] * L->out[2];
		if (L->out_size > (1u << 30))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: its output of %zu values per sample is too large", w,
			                L->out_size);
		L->w_off = (size_t)n_params;
		n_params += L->n_w;
		L->b_off = (size_t)n_params;
		n_params += L->n_b;
		if (n_params > DLK_NET_MAX_PARAMS)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the model has more than %llu parameters", w,
			                (unsigned long long)DLK_NET_MAX_PARAMS);
		cur = L->out;
	}
	net->n_params = (size_t)n_params;
	return 0;
}

/* The last layer must produce one logit per class (exactly n_classes when that is not 0). */
static int check_output(struct dlk_net *net, const struct dlk_model *model, const char *spec_file,
                        int n_classes, struct dlk_err *err)
{
	const struct dlk_layer *L = &net->layers[net->n_layers - 1];
	char w[256], shp[64];

	dlk_layer_where(w, sizeof(w), net->n_layers - 1, &L->spec, spec_file);
	if (model->task == DLK_TASK_IMAGE) {
		net->n_classes = (int)L->out_size; /* dense prediction: a target value per output value */
		return 0;
	}
	if (!is_flat(L->out)) {
		dlk_shape_str(L->out, shp, sizeof(shp));
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: the model ends with a %s output, not one value per class", w, shp);
		return dlk_err_hint(err, "end the model with 'flatten' and a dense layer of %d units",
		                    n_classes > 0 ? n_classes : 10);
	}
	net->n_classes = L->out[2];
	if (model->loss != DLK_LOSS_SOFTMAX_CE)
		return 0; /* one output value per target: the data's target size is checked against it */
	if (n_classes > 0 && dlk_net_check_classes(net, model, spec_file, n_classes, 1, err))
		return -1;
	if (net->n_classes < 2)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the model ends with %d output; softmax cross-entropy "
		                "needs at least 2 classes", w, net->n_classes);
	return 0;
}

/* How the layers run: an activation fused into the dense/conv layer before it (one pass over the
 * output saved), and an input gradient only where some earlier layer has parameters. */
static void plan_passes(struct dlk_net *net)
{
	int seen = 0;

	for (int i = 0; i + 1 < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i], *N = &net->layers[i + 1];
		if ((L->spec.kind == DLK_LAYER_DENSE || L->spec.kind == DLK_LAYER_CONV2D) &&
		    act_of(N->spec.kind) != DLK_ACT_NONE) {
			L->act = act_of(N->spec.kind);
			N->fused = 1;
		}
	}
	/* a conv, its activation and a max-pool in one pass over each image, where the backend can */
	for (int i = 0; net->be->conv_forward && i + 1 < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		int m = i + 1 + (net->layers[i + 1].fused ? 1 : 0);
		if (L->spec.kind != DLK_LAYER_CONV2D || m >= net->n_layers || net->layers[m].spec.kind != DLK_LAYER_MAXPOOL)
			continue;
		L->pool_layer = m;
		for (int j = i + 1; j <= m; j++)
			net->layers[j].pooled = 1;
	}
	for (int i = 0; i < net->n_layers; i++) {
		net->layers[i].need_dx = seen;
		if (net->layers[i].n_w)
			seen = 1;
	}
}

int dlk_net_build(struct dlk_net *net, const struct dlk_model *model, const char *spec_file,
                  int n_classes, const struct dlk_backend *be, struct dlk_err *err)
{
	*net = (struct dlk_net)DLK_NET_INIT;
	net->be = be;
	if (model->n_layers <= 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "model.layers: the model has no layers");
	if (model->n_layers > DLK_NET_MAX_LAYERS)
		return dlk_errf(err, DLK_EXIT_CONFIG, "model.layers: %d layers is more than the limit of %d",
		                model->n_layers, DLK_NET_MAX_LAYERS);
	for (int d = 0; d < 3; d++) {
		if (model->input[d] <= 0 || model->input[d] > (1 << 24))
			return dlk_errf(err, DLK_EXIT_CONFIG, "model.input: dimension %d is %d, not in 1..%d", d,
			                model->input[d], 1 << 24);
		net->input[d] = model->input[d];
	}
	/* in double: three dimensions of up to 2^24 overflow a size_t */
	double features = (double)net->input[0] * net->input[1] * net->input[2];
	if (features > (1u << 30))
		return dlk_errf(err, DLK_EXIT_CONFIG, "model.input: %.0f features per sample is too many", features);
	net->input_size = (size_t)features;

	net->layers = xcalloc((size_t)model->n_layers, sizeof(*net->layers));
	net->n_layers = model->n_layers;
	if (build_layers(net, model, spec_file, err) || check_output(net, model, spec_file, n_classes, err))
		goto fail;
	plan_passes(net);

	size_t bytes = sizeof(float) * (net->n_params ? net->n_params : 1);
	net->params = be->alloc(bytes);
	net->grads = be->alloc(bytes);
	if (!net->params || !net->grads) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for %zu parameters", be->name, net->n_params);
		goto fail;
	}
	return 0;
fail:
	dlk_net_release(net);
	return -1;
}

int dlk_net_check_classes(const struct dlk_net *net, const struct dlk_model *model, const char *spec_file,
                          int n_classes, int exact, struct dlk_err *err)
{
	int last = model->n_layers - 1;
	char w[256];

	if (exact ? net->n_classes == n_classes : net->n_classes >= n_classes)
		return 0;
	dlk_layer_where(w, sizeof(w), last, &model->layers[last], spec_file);
	dlk_errf(err, DLK_EXIT_CONFIG, "%s: the model ends with %d outputs but the data has %d classes", w,
	         net->n_classes, n_classes);
	return dlk_err_hint(err, "make the last dense layer %d units wide", n_classes);
}

int dlk_net_init_params(struct dlk_net *net, const char *scheme, uint64_t seed, struct dlk_err *err)
{
	int xavier;
	if (!scheme || !strcmp(scheme, "torch"))
		xavier = 0;
	else if (!strcmp(scheme, "xavier"))
		xavier = 1;
	else
		return dlk_errf(err, DLK_EXIT_CONFIG, "model.init: unknown scheme '%s' (use torch or xavier)", scheme);

	float *host = xcalloc(net->n_params ? net->n_params : 1, sizeof(float));
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		if (!L->n_w)
			continue;
		float bw = xavier ? sqrtf(6.0f / (float)(L->fan_in + L->fan_out)) : 1.0f / sqrtf((float)L->fan_in);
		float bb = xavier ? 0.0f : 1.0f / sqrtf((float)L->fan_in);
		for (size_t j = 0; j < L->n_w; j++)
			host[L->w_off + j] = bw * (2.0f * dlk_rng_uniform(&r) - 1.0f);
		for (size_t j = 0; j < L->n_b; j++)
			host[L->b_off + j] = bb * (2.0f * dlk_rng_uniform(&r) - 1.0f);
	}
	net->be->to_device(net->params, host, sizeof(float) * net->n_params);
	free(host);
	net->dropout_seed = seed ^ 0x5851f42d4c957f2dULL;
	net->dropout_counter = 0;
	return 0;
}

static void free_batch_buffers(struct dlk_net *net)
{
	const struct dlk_backend *be = net->be;
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		be->free(L->y);
		be->free(L->col);
		be->free(L->argmax);
		L->y = L->col = NULL;
		L->argmax = NULL;
	}
	be->free(net->gbuf[0]);
	be->free(net->gbuf[1]);
	net->gbuf[0] = net->gbuf[1] = NULL;
	net->batch_cap = 0;
}

int dlk_net_reserve(struct dlk_net *net, int batch, struct dlk_err *err)
{
	const struct dlk_backend *be = net->be;
	if (batch <= net->batch_cap)
		return 0;
	if (batch <= 0 || batch > (1 << 20))
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.batch_size: %d is not in 1..%d", batch, 1 << 20);
	free_batch_buffers(net);
	size_t B = (size_t)batch, gmax = net->input_size;
	int ok = 1;
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		if (B * L->out_size > (size_t)INT32_MAX || B * L->in_size > (size_t)INT32_MAX)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "training.batch_size: %d samples make layer %d's activations larger than 2^31 values",
			                batch, i);
		gmax = L->in_size > gmax ? L->in_size : gmax;
		gmax = L->out_size > gmax ? L->out_size : gmax;
		switch (L->spec.kind) {
		case DLK_LAYER_DENSE:
		case DLK_LAYER_MAXPOOL:
		case DLK_LAYER_DROPOUT:
			ok = ok && (L->y = be->alloc(sizeof(float) * B * L->out_size));
			if (L->spec.kind == DLK_LAYER_MAXPOOL)
				ok = ok && (L->argmax = be->alloc(sizeof(int32_t) * B * L->out_size));
			break;
		case DLK_LAYER_CONV2D: {
			size_t ckk = (size_t)L->in[0] * L->spec.kernel * L->spec.kernel;
			size_t ncol = B * L->out[1] * L->out[2];
			if (ckk * ncol > (size_t)INT32_MAX)
				return dlk_errf(err, DLK_EXIT_CONFIG,
				                "training.batch_size: %d samples make layer %d's im2col buffer too large",
				                batch, i);
			ok = ok && (L->y = be->alloc(sizeof(float) * B * L->out_size));
			/* a backend with its own convolution needs no im2col buffer of the batch */
			if (!be->conv_forward)
				ok = ok && (L->col = be->alloc(sizeof(float) * ckk * ncol));
			break;
		}
		case DLK_LAYER_RELU:
		case DLK_LAYER_TANH:
		case DLK_LAYER_SIGMOID:
			if (!L->fused)
				ok = ok && (L->y = be->alloc(sizeof(float) * B * L->out_size));
			break;
		case DLK_LAYER_FLATTEN:
			break;
		}
		if (!ok)
			break;
	}
	if (ok) {
		ok = (net->gbuf[0] = be->alloc(sizeof(float) * B * gmax)) && (net->gbuf[1] = be->alloc(sizeof(float) * B * gmax));
	}
	if (!ok) {
		free_batch_buffers(net);
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for the activations of a batch of %d",
		                be->name, batch);
	}
	net->batch_cap = batch;
	return 0;
}

double dlk_net_batch_bytes(const struct dlk_net *net, int batch)
{
	double B = batch, bytes = 0, gmax = (double)net->input_size;

	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		double out = (double)L->out_size;
		gmax = fmax(gmax, fmax((double)L->in_size, out));
		switch (L->spec.kind) {
		case DLK_LAYER_DENSE:
		case DLK_LAYER_DROPOUT:
			bytes += 4 * B * out;
			break;
		case DLK_LAYER_MAXPOOL:
			bytes += 8 * B * out;
			break;
		case DLK_LAYER_CONV2D:
			bytes += 4 * B * out;
			if (!net->be->conv_forward)
				bytes += 4 * (double)L->in[0] * L->spec.kernel * L->spec.kernel * B * L->out[1] * L->out[2];
			break;
		case DLK_LAYER_RELU:
		case DLK_LAYER_TANH:
		case DLK_LAYER_SIGMOID:
			if (!L->fused)
				bytes += 4 * B * out;
			break;
		case DLK_LAYER_FLATTEN:
			break;
		}
	}
	return bytes + 2 * 4 * B * gmax;
}

int dlk_net_batch_limit(const struct dlk_net *net)
{
	double lim = 1 << 20;

	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		double big = fmax((double)L->out_size, (double)L->in_size);
		if (big > 0)
			lim = fmin(lim, floor((double)INT32_MAX / big));
		if (L->spec.kind == DLK_LAYER_CONV2D) {
			double per = (double)L->in[0] * L->spec.kernel * L->spec.kernel * L->out[1] * L->out[2];
			if (per > 0)
				lim = fmin(lim, floor((double)INT32_MAX / per));
		}
	}
	return (int)lim;
}

static struct dlk_conv_shape conv_shape(const struct dlk_net *net, const struct dlk_layer *L, int batch)
{
	struct dlk_conv_shape s = { .batch = batch, .c = L->in[0], .h = L->in[1], .w = L->in[2], .f = L->out[0],
		                    .k = L->spec.kernel, .stride = L->spec.stride, .pad = L->spec.padding,
		                    .oh = L->out[1], .ow = L->out[2] };
	if (L->pool_layer) {
		const struct dlk_layer *M = &net->layers[L->pool_layer];
		s.pool = M->spec.size;
		s.pool_stride = M->spec.stride;
		s.ph = M->out[1];
		s.pw = M->out[2];
	}
	return s;
}

const float *dlk_net_forward(struct dlk_net *net, const float *x, int batch, int training)
{
	const struct dlk_backend *be = net->be;
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		const float *W = net->params + L->w_off, *b = net->params + L->b_off;
		float *y = L->y;
		size_t n = (size_t)batch * L->out_size;
		L->x_used = x;
		switch (L->spec.kind) {
		case DLK_LAYER_DENSE:
			if (be->dense_forward) {
				be->dense_forward(x, W, b, batch, L->in[2], L->out[2], L->act, y);
			} else {
				be->sgemm(0, 1, batch, L->out[2], L->in[2], 1.0f, x, L->in[2], W, L->in[2], 0.0f, y, L->out[2]);
				be->bias_act(y, b, batch, L->out[2], L->act);
			}
			break;
		case DLK_LAYER_CONV2D: {
			int k = L->spec.kernel, ohw = L->out[1] * L->out[2], ckk = L->in[0] * k * k;
			int ncol = batch * ohw;
			if (be->conv_forward) {
				struct dlk_conv_shape cs = conv_shape(net, L, batch);
				struct dlk_layer *M = L->pool_layer ? &net->layers[L->pool_layer] : NULL;
				be->conv_forward(x, W, b, &cs, L->act, y, M ? M->y : NULL, M ? M->argmax : NULL);
				break;
			}
			be->im2col(x, batch, L->in[0], L->in[1], L->in[2], k, L->spec.stride, L->spec.padding,
			           L->out[1], L->out[2], L->col);
			/* the gradient buffers are idle during the forward pass: one holds the GEMM's
			 * [filters, batch*hw] result before it is reordered to NCHW */
			float *t = net->gbuf[0];
			be->sgemm(0, 0, L->out[0], ncol, ckk, 1.0f, W, ckk, L->col, ncol, 0.0f, t, ncol);
			be->conv_out(t, b, batch, L->out[0], ohw, L->act, y);
			break;
		}
		case DLK_LAYER_MAXPOOL:
			if (L->pooled)
				break; /* the conv before it pooled into L->y */
			be->maxpool_forward(x, batch, L->in[0], L->in[1], L->in[2], L->spec.size, L->spec.stride,
			                    L->out[1], L->out[2], y, L->argmax);
			break;
		case DLK_LAYER_FLATTEN:
			y = (float *)x;
			break;
		case DLK_LAYER_RELU:
		case DLK_LAYER_TANH:
		case DLK_LAYER_SIGMOID:
			if (L->fused)
				y = (float *)x;
			else
				be->act_forward(act_of(L->spec.kind), x, y, n);
			break;
		case DLK_LAYER_DROPOUT:
			if (training && L->spec.rate > 0.0f) {
				/* remember where this step's mask starts: backward redraws the same mask */
				be->dropout_forward(x, y, n, L->spec.rate, net->dropout_seed, net->dropout_counter);
				L->drop_active = 1;
				L->drop_offset = net->dropout_counter;
				net->dropout_counter += n;
			} else {
				L->drop_active = 0;
				y = (float *)x;
			}
			break;
		}
		L->y_used = y;
		x = y;
	}
	return x;
}

float dlk_net_backward(struct dlk_net *net, const int32_t *labels, int batch)
{
	struct dlk_layer *last = &net->layers[net->n_layers - 1];
	float loss = net->be->softmax_ce(last->y_used, labels, batch, net->n_classes, dlk_net_out_grad(net));

	dlk_net_backward_grad(net, batch);
	return loss;
}

float *dlk_net_out_grad(struct dlk_net *net) { return net->gbuf[0]; }

const float *dlk_net_output(const struct dlk_net *net) { return net->layers[net->n_layers - 1].y_used; }

void dlk_net_backward_grad(struct dlk_net *net, int batch)
{
	const struct dlk_backend *be = net->be;
	int cur = 0, folded = -1; /* folded: an activation layer whose backward a dense layer did */
	float *g = net->gbuf[0];

	for (int i = net->n_layers - 1; i >= 0; i--) {
		struct dlk_layer *L = &net->layers[i];
		const float *W = net->params + L->w_off;
		float *dW = net->grads + L->w_off, *db = net->grads + L->b_off;
		float *gout = net->gbuf[cur ^ 1];
		size_t n = (size_t)batch * L->out_size;
		if (!L->need_dx && !L->n_w)
			break; /* nothing below needs a gradient */
		switch (L->spec.kind) {
		case DLK_LAYER_DENSE: {
			int in = L->in[2], out = L->out[2];
			if (be->dense_backward_w) {
				be->dense_backward_w(g, L->x_used, batch, in, out, dW, db);
			} else {
				be->sgemm(1, 0, out, in, batch, 1.0f, g, out, L->x_used, in, 0.0f, dW, in);
				be->sum_rows(g, batch, out, db);
			}
			if (net->grad_ready)
				net->grad_ready(net->grad_ready_ctx, net->grads, net->n_params, L->w_off, L->n_w + L->n_b);
			if (L->need_dx && be->dense_backward_x) {
				/* an activation layer just below is differentiated in the same pass */
				const struct dlk_layer *A = i > 0 ? &net->layers[i - 1] : NULL;
				int act = A ? act_of(A->spec.kind) : DLK_ACT_NONE;
				be->dense_backward_x(g, W, batch, in, out, act, act != DLK_ACT_NONE ? A->y_used : NULL, gout);
				if (act != DLK_ACT_NONE)
					folded = i - 1;
				g = gout;
				cur ^= 1;
			} else if (L->need_dx) {
				be->sgemm(0, 0, batch, in, out, 1.0f, g, out, W, in, 0.0f, gout, in);
				g = gout;
				cur ^= 1;
			}
			break;
		}
		case DLK_LAYER_CONV2D: {
			int k = L->spec.kernel, ohw = L->out[1] * L->out[2], ckk = L->in[0] * k * k, f = L->out[0];
			int ncol = batch * ohw;
			if (be->conv_backward) {
				struct dlk_conv_shape cs = conv_shape(net, L, batch);
				const struct dlk_layer *M = L->pool_layer ? &net->layers[L->pool_layer] : NULL;
				be->conv_backward(L->x_used, W, L->y, M ? M->y : NULL, g, M ? M->argmax : NULL, &cs, L->act, dW,
				                  db, L->need_dx ? gout : NULL);
				if (net->grad_ready)
					net->grad_ready(net->grad_ready_ctx, net->grads, net->n_params, L->w_off,
					                L->n_w + L->n_b);
				if (L->need_dx) {
					g = gout;
					cur ^= 1;
				}
				break;
			}
			/* g is dead once reordered, and gout is written only by the final col2im, which
			 * no longer needs dt: so dt lives in gout's buffer */
			float *dt = gout;
			be->conv_grad_in(g, batch, f, ohw, dt);
			be->sgemm(0, 1, f, ckk, ncol, 1.0f, dt, ncol, L->col, ncol, 0.0f, dW, ckk);
			be->sum_cols(dt, f, ncol, db);
			if (net->grad_ready)
				net->grad_ready(net->grad_ready_ctx, net->grads, net->n_params, L->w_off, L->n_w + L->n_b);
			if (L->need_dx) {
				/* the im2col buffer is no longer needed: it takes the column gradient */
				be->sgemm(1, 0, ckk, ncol, f, 1.0f, W, ckk, dt, ncol, 0.0f, L->col, ncol);
				be->col2im(L->col, batch, L->in[0], L->in[1], L->in[2], k, L->spec.stride, L->spec.padding,
				           L->out[1], L->out[2], gout);
				g = gout;
				cur ^= 1;
			}
			break;
		}
		case DLK_LAYER_MAXPOOL:
			if (L->pooled)
				break; /* the conv before it takes g back through the pool */
			be->maxpool_backward(g, L->argmax, n, (size_t)batch * L->in_size, gout);
			g = gout;
			cur ^= 1;
			break;
		case DLK_LAYER_FLATTEN:
			break;
		case DLK_LAYER_RELU:
		case DLK_LAYER_TANH:
		case DLK_LAYER_SIGMOID:
			if (i != folded && !L->pooled)
				be->act_backward(act_of(L->spec.kind), L->y_used, g, g, n);
			break;
		case DLK_LAYER_DROPOUT:
			if (L->drop_active)
				be->dropout_backward(g, g, n, L->spec.rate, net->dropout_seed, L->drop_offset);
			break;
		}
	}
}

void dlk_net_release(struct dlk_net *net)
{
	if (net->be && net->layers)
		free_batch_buffers(net);
	if (net->be) {
		net->be->free(net->params);
		net->be->free(net->grads);
	}
	free(net->layers);
	*net = (struct dlk_net)DLK_NET_INIT;
}

char *dlk_net_summary(const struct dlk_net *net)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char shp[64];
	dlk_shape_str(net->input, shp, sizeof(shp));
	dlk_buf_addf(&b, "%-4s %-9s %-12s %s\n", "#", "layer", "output", "params");
	dlk_buf_addf(&b, "%-4s %-9s %-12s %s\n", "", "input", shp, "");
	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		dlk_shape_str(L->out, shp, sizeof(shp));
		dlk_buf_addf(&b, "%-4d %-9s %-12s %zu\n", i, dlk_layer_name(L->spec.kind), shp, L->n_w + L->n_b);
	}
	dlk_buf_addf(&b, "total parameters: %zu\n", net->n_params);
	return dlk_buf_detach(&b, NULL);
}
