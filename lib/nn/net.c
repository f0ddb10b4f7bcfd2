/* Building, running and differentiating a network of spec layers on one backend. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/nn/net.h"
#include "lib/nn/layer_ops.h"
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

static int is_flat(const int s[3]) { return dlk_shape_flat(s); }

/* conv2d's or maxpool's window does not fit its input */
static int window_error(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	char shp[64];

	dlk_shape_str(L->in, shp, sizeof(shp));
	if (ls->kind == DLK_LAYER_RESHAPE)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: its input %s cannot take the shape it names", w, shp);
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
		L->spec = model->layers[i];
		const struct dlk_layer_spec *ls = &L->spec;
		if (ls->n_inputs < 0 || ls->n_inputs > 2 || (ls->n_inputs && ls->n_inputs != dlk_layer_arity(ls->kind)) ||
		    (!ls->n_inputs && dlk_layer_arity(ls->kind) != 1)) {
			dlk_layer_where(w, sizeof(w), i, ls, spec_file);
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: reads %d inputs, not the %d it needs", w, ls->n_inputs,
			                dlk_layer_arity(ls->kind));
		}
		for (int e = 0; e < ls->n_inputs; e++)
			if (ls->inputs[e] < -1 || ls->inputs[e] >= i) {
				dlk_layer_where(w, sizeof(w), i, ls, spec_file);
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: input %d is layer %d, not one before it", w, e,
				                ls->inputs[e]);
			}
		if (ls->n_inputs) {
			net->graph = 1;
			cur = ls->inputs[0] < 0 ? net->input : net->layers[ls->inputs[0]].out;
		}
		long long in[3] = { cur[0], cur[1], cur[2] }, out[3];

		memcpy(L->in, cur, sizeof(L->in));
		L->in_size = (size_t)cur[0] * cur[1] * cur[2];
		dlk_layer_where(w, sizeof(w), i, &L->spec, spec_file);
		const struct dlk_layer_ops *ops =
			(int)L->spec.kind >= 0 && (int)L->spec.kind < DLK_LAYER_KINDS ? dlk_layer_ops[L->spec.kind] : NULL;
		if (!ops)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: unknown layer kind %d", w, (int)L->spec.kind);
		if (ops->check && ops->check(L, w, err))
			return -1;
		if (ls->n_inputs == 2) {
			const int *c2 = ls->inputs[1] < 0 ? net->input : net->layers[ls->inputs[1]].out;
			long long in2[3] = { c2[0], c2[1], c2[2] };
			if (dlk_layer_shape2(ls, in, in2, out) < 0) {
				char s1[64], s2[64];
				dlk_shape_str(cur, s1, sizeof(s1));
				dlk_shape_str(c2, s2, sizeof(s2));
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: its inputs %s and %s do not fit together", w, s1, s2);
			}
		} else if (ops->shape(&L->spec, in, out) < 0)
			return window_error(L, w, err);
		if (ops->params)
			ops->params(L);
		if (ls->tie) {
			/* weight tying: the dense layer's weight is an earlier embedding's table, [vocab, dim] as
			 * nn.Linear(dim, vocab, bias=False) keeps it; it owns no parameter of its own */
			const struct dlk_layer *E = ls->tie - 1 >= 0 && ls->tie - 1 < i ? &net->layers[ls->tie - 1] : NULL;
			if (ls->kind != DLK_LAYER_DENSE || !E || E->spec.kind != DLK_LAYER_EMBEDDING)
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: tie names layer %d, not an embedding before it", w,
				                ls->tie - 1);
			if (ls->units != E->spec.vocab || L->in[2] != E->spec.dim) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s: a head tied to model.layers[%d]'s %dx%d table needs %d units "
				         "over inputs of width %d, not %d over %d", w, ls->tie - 1, E->spec.vocab, E->spec.dim,
				         E->spec.vocab, E->spec.dim, ls->units, L->in[2]);
				return dlk_err_hint(err, "set units to the embedding's vocab, and give the head its dim wide inputs");
			}
			if (net->layers[ls->tie - 1].tied_by)
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: model.layers[%d]'s table is tied to another head already",
				                w, ls->tie - 1);
			net->layers[ls->tie - 1].tied_by = i + 1;
			L->n_w = L->n_b = 0;
		}
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
		L->s_off = (size_t)n_params;
		n_params += L->n_s;
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
	if (model->task == DLK_TASK_LM) {
		/* next-token logits: a row of V per input token, [1, T, V] */
		if (L->out[0] != 1 || (size_t)L->out[1] != net->input_size || L->out[2] < 2) {
			dlk_shape_str(L->out, shp, sizeof(shp));
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: the model ends with a %s output, not [1, %zu, VOCAB] logits "
			         "(one row per input token)", w, shp, net->input_size);
			return dlk_err_hint(err, "end the model with an embedding or dense layer as wide as the vocabulary");
		}
		net->n_classes = (int)L->out_size;
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

/* The layer i reads as its input e (-1: the model input) */
static int read_of(const struct dlk_net *net, int i, int e)
{
	const struct dlk_layer_spec *s = &net->layers[i].spec;
	return s->n_inputs ? s->inputs[e] : i - 1;
}

/* whether layer r reads layer i's output and no other layer does (r reads nothing else) */
static int sole_reader(const struct dlk_net *net, int i, int r)
{
	for (int m = i + 1; m < net->n_layers; m++) {
		int n_in = net->layers[m].spec.n_inputs ? net->layers[m].spec.n_inputs : 1;
		for (int e = 0; e < n_in; e++)
			if ((read_of(net, m, e) == i) != (m == r))
				return 0;
	}
	return 1;
}

/* How the layers run: an activation fused into the dense/conv layer before it (one pass over the
 * output saved; in a graph where the activation alone reads the layer's output), a ReLU into the
 * batch norm before it both ways (where the backend can), and an input gradient only where some
 * earlier layer has parameters. */
static void plan_passes(struct dlk_net *net)
{
	int seen = 0;

	for (int i = 0; i + 1 < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i], *N = &net->layers[i + 1];
		if (net->graph && !sole_reader(net, i, i + 1))
			continue;
		if ((L->spec.kind == DLK_LAYER_DENSE || (L->spec.kind == DLK_LAYER_CONV2D && L->spec.groups <= 1)) && !L->spec.tie &&
		    dlk_layer_act(N->spec.kind) != DLK_ACT_NONE) {
			L->act = dlk_layer_act(N->spec.kind);
			N->fused = 1;
		}
		if (L->spec.kind == DLK_LAYER_BATCHNORM && N->spec.kind == DLK_LAYER_RELU && net->be->batchnorm_relu_forward &&
		    net->be->batchnorm_relu_backward) {
			L->bn_relu = 1;
			N->fused = 1;
		}
	}
	/* a conv, its activation and a max-pool in one pass over each image, where the backend can */
	for (int i = 0; !net->graph && net->be->conv_forward && i + 1 < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		int m = i + 1 + (net->layers[i + 1].fused ? 1 : 0);
		if (L->spec.kind != DLK_LAYER_CONV2D || L->spec.groups > 1 || m >= net->n_layers ||
		    net->layers[m].spec.kind != DLK_LAYER_MAXPOOL)
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

/* The layer whose parameters end the branch that layer `from` is: `from` itself, or the layer
 * under the parameter-free single-input layers (dropout, an activation) that end it; -1: none. */
static int branch_end(const struct dlk_net *net, int from)
{
	for (int i = from, hops = 0; i >= 0 && hops < 8; hops++) {
		const struct dlk_layer *L = &net->layers[i];
		if (L->n_w)
			return i;
		if (L->spec.n_inputs > 1 || L->spec.kind == DLK_LAYER_ADD)
			return -1;
		i = L->spec.n_inputs ? L->spec.inputs[0] : i - 1;
	}
	return -1;
}

/* Marks resid[i] for each layer that ends a residual branch: of the two inputs of an add, the one
 * written later is the branch (the earlier one, the stream it joins); returns how many. */
static int mark_residual(const struct dlk_net *net, char *resid)
{
	int n = 0;
	for (int j = 0; j < net->n_layers; j++) {
		const struct dlk_layer_spec *A = &net->layers[j].spec;
		if (A->kind != DLK_LAYER_ADD || A->n_inputs != 2)
			continue;
		int e = branch_end(net, A->inputs[0] > A->inputs[1] ? A->inputs[0] : A->inputs[1]);
		if (e >= 0 && !resid[e] && net->layers[e].spec.kind != DLK_LAYER_EMBEDDING) {
			resid[e] = 1;
			n++;
		}
	}
	return n;
}

int dlk_net_init_params(struct dlk_net *net, const char *scheme, uint64_t seed, struct dlk_err *err)
{
	struct dlk_init how = { .scheme = DLK_INIT_TORCH, .std = 0.02f };
	if (!scheme || !strcmp(scheme, "torch"))
		how.scheme = DLK_INIT_TORCH;
	else if (!strcmp(scheme, "xavier"))
		how.scheme = DLK_INIT_XAVIER;
	else if (!strcmp(scheme, "gpt2"))
		how.scheme = DLK_INIT_GPT2;
	else
		return dlk_errf(err, DLK_EXIT_CONFIG, "model.init: unknown scheme '%s' (use torch, xavier or gpt2)", scheme);

	float *host = xcalloc(net->n_params ? net->n_params : 1, sizeof(float));
	char *resid = xcalloc((size_t)net->n_layers + 1, 1);
	int branches = mark_residual(net, resid);
	how.resid_std = how.std / sqrtf((float)(branches ? branches : 1));
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		if (!L->n_w)
			continue;
		const struct dlk_layer_ops *ops = dlk_layer_ops[L->spec.kind];
		how.residual = resid[i];
		if (ops->init) {
			ops->init(L, &how, host + L->w_off, host + L->b_off, &r);
			continue;
		}
		if (how.scheme == DLK_INIT_GPT2) { /* biases stay 0 */
			float sd = how.residual ? how.resid_std : how.std;
			for (size_t j = 0; j < L->n_w; j++)
				host[L->w_off + j] = sd * dlk_rng_normal(&r);
			continue;
		}
		int xavier = how.scheme == DLK_INIT_XAVIER;
		float bw = xavier ? sqrtf(6.0f / (float)(L->fan_in + L->fan_out)) : 1.0f / sqrtf((float)L->fan_in);
		float bb = xavier ? 0.0f : 1.0f / sqrtf((float)L->fan_in);
		for (size_t j = 0; j < L->n_w; j++)
			host[L->w_off + j] = bw * (2.0f * dlk_rng_uniform(&r) - 1.0f);
		for (size_t j = 0; j < L->n_b; j++)
			host[L->b_off + j] = bb * (2.0f * dlk_rng_uniform(&r) - 1.0f);
	}
	net->be->to_device(net->params, host, sizeof(float) * net->n_params);
	free(resid);
	free(host);
	net->dropout_seed = seed ^ 0x5851f42d4c957f2dULL;
	net->dropout_counter = 0;
	return 0;
}

static int add_range(size_t *ranges, int n, size_t off, size_t len)
{
	if (!len)
		return n;
	if (n && ranges[2 * (n - 1)] + ranges[2 * (n - 1) + 1] == off) {
		ranges[2 * (n - 1) + 1] += len;
		return n;
	}
	ranges[2 * n] = off;
	ranges[2 * n + 1] = len;
	return n + 1;
}

int dlk_net_no_decay_ranges(const struct dlk_net *net, int all_params, size_t *ranges)
{
	int n = 0;
	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		unsigned d = all_params ? DLK_DECAY_WEIGHT | DLK_DECAY_BIAS : dlk_layer_ops[L->spec.kind]->decay;
		/* weight, bias and state lie one after the other */
		if (!(d & DLK_DECAY_WEIGHT))
			n = add_range(ranges, n, L->w_off, L->n_w);
		if (!(d & DLK_DECAY_BIAS))
			n = add_range(ranges, n, L->b_off, L->n_b);
		n = add_range(ranges, n, L->s_off, L->n_s);
	}
	return n;
}

/* whether layer i's backward hands its output gradient unchanged to its inputs (an add; a ReLU
 * that the batch norm before it computes) */
static int passes_grad(const struct dlk_net *net, int i)
{
	const struct dlk_layer *L = &net->layers[i];
	return L->spec.kind == DLK_LAYER_ADD ||
	       (L->spec.kind == DLK_LAYER_RELU && L->fused && i > 0 && net->layers[i - 1].bn_relu);
}

/* A graph's output gradients in as few buffers as backward needs. Layer s's gradient is alive
 * from the backward step of its last reader (the first to write it; the loss's, before every
 * step, for the output layer) to its own step, where it is read. Walking backward's steps, each
 * gradient that comes alive takes a free buffer (the smallest that fits, else the largest free one
 * grown, else a new one) and each that dies frees its own; a layer that hands its gradient on
 * unchanged (passes_grad) to an input whose gradient it is the first to write gives that input its
 * buffer instead (give_grad then copies nothing). Layers no one reads get none. buf: for each layer
 * its buffer, or -1; floats: for each buffer its floats per sample. Returns the number of buffers,
 * or -1 where layers share buffers for recomputation (each layer keeps a buffer of its own). */
static int gy_plan(const struct dlk_net *net, int *buf, size_t *floats)
{
	int n = net->n_layers, nb = 0;
	for (int i = 0; i < n; i++)
		if (net->layers[i].share)
			return -1;
	int *start = xmalloc(sizeof(int) * (size_t)n);
	char *busy = xcalloc((size_t)n + 1, 1);
	for (int i = 0; i < n; i++)
		start[i] = buf[i] = -1;
	for (int j = 0; j < n; j++) {
		int n_in = net->layers[j].spec.n_inputs ? net->layers[j].spec.n_inputs : 1;
		for (int e = 0; e < n_in; e++) {
			int src = read_of(net, j, e);
			if (src >= 0 && j > start[src])
				start[src] = j;
		}
	}
	start[n - 1] = n;
	for (int t = n; t >= 0; t--) {
		int give = -1;
		if (t < n && buf[t] >= 0 && passes_grad(net, t)) {
			int n_in = net->layers[t].spec.n_inputs ? net->layers[t].spec.n_inputs : 1, s = read_of(net, t, n_in - 1);
			if (s >= 0 && start[s] == t && net->layers[s].out_size == net->layers[t].out_size)
				give = s;
		}
		for (int s = 0; s < n; s++) {
			if (start[s] != t || s == give)
				continue;
			size_t need = net->layers[s].out_size;
			int fit = -1, big = -1;
			for (int b = 0; b < nb; b++) {
				if (busy[b])
					continue;
				if (floats[b] >= need && (fit < 0 || floats[b] < floats[fit]))
					fit = b;
				if (big < 0 || floats[b] > floats[big])
					big = b;
			}
			if (fit < 0 && big >= 0)
				floats[fit = big] = need;
			if (fit < 0)
				floats[fit = nb++] = need;
			busy[fit] = 1;
			buf[s] = fit;
		}
		if (give >= 0)
			buf[give] = buf[t];
		else if (t < n && buf[t] >= 0)
			busy[buf[t]] = 0;
	}
	free(start);
	free(busy);
	return nb;
}

static void free_batch_buffers(struct dlk_net *net)
{
	const struct dlk_backend *be = net->be;
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		if (!L->share) {
			be->free(L->y);
			be->free(L->col);
			be->free(L->argmax);
			if (!net->gpool)
				be->free(L->gy);
		}
		L->y = L->col = L->gy = NULL;
		L->argmax = NULL;
	}
	for (int b = 0; b < net->n_gpool; b++)
		be->free(net->gpool[b]);
	free(net->gpool);
	net->gpool = NULL;
	net->n_gpool = 0;
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
	int *gbufs = NULL;
	if (net->graph) {
		size_t *floats = xmalloc(sizeof(size_t) * ((size_t)net->n_layers + 1));
		gbufs = xmalloc(sizeof(int) * (size_t)net->n_layers);
		int nb = gy_plan(net, gbufs, floats);
		if (nb >= 0) {
			net->gpool = xcalloc((size_t)nb + 1, sizeof(float *));
			net->n_gpool = nb;
			for (int b = 0; b < nb && ok; b++)
				ok = (net->gpool[b] = be->alloc(sizeof(float) * B * floats[b])) != NULL;
		} else {
			free(gbufs);
			gbufs = NULL;
		}
		free(floats);
	}
	for (int i = 0; ok && i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		const struct dlk_layer_ops *ops = dlk_layer_ops[L->spec.kind];
		if (B * L->out_size > (size_t)INT32_MAX || B * L->in_size > (size_t)INT32_MAX)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "training.batch_size: %d samples make layer %d's activations larger than 2^31 values",
			                batch, i);
		gmax = L->in_size > gmax ? L->in_size : gmax;
		gmax = L->out_size > gmax ? L->out_size : gmax;
		if (L->share) { /* recomputed: the buffers of its place in the block's first repetition */
			const struct dlk_layer *M = &net->layers[L->share - 1];
			L->y = M->y;
			L->col = M->col;
			L->argmax = M->argmax;
			L->gy = M->gy;
			continue;
		}
		int r = ops->reserve ? ops->reserve(net, L, i, B, err) : 0;
		if (r < 0)
			return -1;
		if (!r && gbufs)
			L->gy = gbufs[i] >= 0 ? net->gpool[gbufs[i]] : NULL;
		else if (!r && net->graph && !(L->gy = be->alloc(sizeof(float) * B * L->out_size)))
			r = 1;
		if (r > 0) {
			ok = 0;
			break;
		}
	}
	free(gbufs);
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
	int nb = -1;

	if (net->graph) {
		/* the output gradients' buffers, as dlk_net_reserve allocates them */
		size_t *floats = xmalloc(sizeof(size_t) * ((size_t)net->n_layers + 1));
		int *gbufs = xmalloc(sizeof(int) * (size_t)net->n_layers);
		nb = gy_plan(net, gbufs, floats);
		for (int b = 0; b < nb; b++)
			bytes += 4 * B * (double)floats[b];
		free(floats);
		free(gbufs);
	}
	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		const struct dlk_layer_ops *ops = dlk_layer_ops[L->spec.kind];
		gmax = fmax(gmax, fmax((double)L->in_size, (double)L->out_size));
		if (L->share)
			continue;
		if (ops->batch_bytes)
			bytes += ops->batch_bytes(net, L, B);
		if (net->graph && nb < 0)
			bytes += 4 * B * (double)L->out_size;
	}
	return bytes + 2 * 4 * B * gmax;
}

int dlk_net_batch_limit(const struct dlk_net *net)
{
	double lim = 1 << 20;

	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		const struct dlk_layer_ops *ops = dlk_layer_ops[L->spec.kind];
		double big = fmax((double)L->out_size, (double)L->in_size);
		if (big > 0)
			lim = fmin(lim, floor((double)INT32_MAX / big));
		double per = ops->batch_values ? ops->batch_values(L) : 0;
		if (per > 0)
			lim = fmin(lim, floor((double)INT32_MAX / per));
	}
	return (int)lim;
}


/* Runs layers from..to on x, the output of layer from - 1 (the model input for 0). */
static const float *forward_range(struct dlk_net *net, int from, int to, const float *x, int batch, int training)
{
	for (int i = from; i <= to; i++) {
		struct dlk_layer *L = &net->layers[i];
		if (L->seg && net->segs[L->seg - 1].first == i) {
			struct dlk_segment *S = &net->segs[L->seg - 1];
			S->drop_counter = net->dropout_counter;
			net->segs[S->group].resident = L->seg - 1;
		}
		if (L->spec.n_inputs)
			x = L->spec.inputs[0] < 0 ? net->x_in : net->layers[L->spec.inputs[0]].y_used;
		L->x_used = x;
		x = dlk_layer_ops[L->spec.kind]->forward(net, i, x, batch, training);
		L->y_used = x;
	}
	return x;
}

const float *dlk_net_forward(struct dlk_net *net, const float *x, int batch, int training)
{
	net->x_in = x;
	net->fwd_training = training;
	return forward_range(net, 0, net->n_layers - 1, x, batch, training);
}

/* Puts segment k's activations back into its block's shared buffers: its forward again, from
 * its input (kept: the output of the layer before it), with the dropout counter where its
 * forward had it, so that every mask is the same. */
static void recompute(struct dlk_net *net, int k, int batch)
{
	struct dlk_segment *S = &net->segs[k];
	uint64_t counter = net->dropout_counter;
	const float *x = S->first ? net->layers[S->first - 1].y_used : net->x_in;

	net->dropout_counter = S->drop_counter;
	forward_range(net, S->first, S->last, x, batch, net->fwd_training);
	net->dropout_counter = counter;
}

int dlk_net_set_recompute(struct dlk_net *net, int on)
{
	int n = 0;

	free_batch_buffers(net);
	free(net->segs);
	net->segs = NULL;
	net->n_segs = 0;
	for (int i = 0; i < net->n_layers; i++)
		net->layers[i].seg = net->layers[i].share = 0;
	if (!on || !net->graph)
		return 0;
	struct dlk_segment *segs = xcalloc((size_t)net->n_layers, sizeof(*segs));
	char *drop = xcalloc((size_t)net->n_layers + 1, 1);
	/* the candidates: each repetition of a block, one `block:` use's layers of one rep */
	for (int i = 0; i < net->n_layers;) {
		const struct dlk_layer_spec *a = &net->layers[i].spec;
		int j = i;
		while (j + 1 < net->n_layers && a->block[0] && !strcmp(net->layers[j + 1].spec.block, a->block) &&
		       net->layers[j + 1].spec.use == a->use && net->layers[j + 1].spec.rep == a->rep)
			j++;
		if (a->block[0] && j > i) {
			segs[n].first = i;
			segs[n].last = j;
			for (int k = i; k <= j; k++) {
				net->layers[k].seg = n + 1;
				if (net->layers[k].n_s) /* its forward updates state: not twice */
					drop[n] = 1;
			}
			n++;
		}
		i = j + 1;
	}
	/* what a layer outside a segment reads must be kept: the segment's output, nothing inside */
	for (int i = 0; i < net->n_layers; i++) {
		int n_in = net->layers[i].spec.n_inputs ? net->layers[i].spec.n_inputs : 1;
		for (int e = 0; e < n_in; e++) {
			int src = read_of(net, i, e);
			if (src < 0 || !net->layers[src].seg)
				continue;
			const struct dlk_segment *S = &segs[net->layers[src].seg - 1];
			if (src != S->last && (i < S->first || i > S->last))
				drop[net->layers[src].seg - 1] = 1;
		}
	}
	int kept = 0;
	for (int k = 0; k < n; k++) {
		for (int i = segs[k].first; i <= segs[k].last; i++)
			net->layers[i].seg = drop[k] ? 0 : kept + 1;
		if (!drop[k])
			segs[kept++] = segs[k];
	}
	free(drop);
	/* a repetition shares the buffers of the first one with the same layers, all but its output */
	for (int k = 0; k < kept; k++) {
		struct dlk_segment *S = &segs[k];
		S->group = k;
		for (int g = 0; g < k && S->group == k; g++) {
			const struct dlk_segment *G = &segs[g];
			int same = G->group == g && G->last - G->first == S->last - S->first;
			for (int p = 0; same && p <= S->last - S->first; p++) {
				const struct dlk_layer *a = &net->layers[G->first + p], *b = &net->layers[S->first + p];
				same = a->spec.kind == b->spec.kind && a->in_size == b->in_size && a->out_size == b->out_size &&
				       a->n_w == b->n_w && a->n_b == b->n_b;
			}
			if (same)
				S->group = g;
		}
		if (S->group != k)
			for (int p = 0; p < S->last - S->first; p++)
				net->layers[S->first + p].share = segs[S->group].first + p + 1;
	}
	net->segs = segs;
	net->n_segs = kept;
	return kept;
}

/* Adds (or, for the first reader, copies) g, layer i's input gradient, into the gradient of
 * the layer it reads (e = which input); concat hands each input its slice. */
static void give_grad(struct dlk_net *net, int i, int e, const float *g, int batch)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	int src = L->spec.n_inputs ? L->spec.inputs[e] : i - 1;
	if (src < 0)
		return;
	struct dlk_layer *S = &net->layers[src];
	size_t n = (size_t)batch * S->out_size;
	if (L->spec.kind == DLK_LAYER_CONCAT) {
		size_t na = L->in_size, nb = L->out_size - na, off = e ? na : 0, ns = e ? nb : na;
		if (!S->g_set)
			dlk_be_copy_rows(be, S->gy, sizeof(float) * ns, g + off, sizeof(float) * L->out_size, (size_t)batch,
			                 sizeof(float) * ns);
		else
			for (int s = 0; s < batch; s++)
				be->axpy(ns, 1.0f, g + (size_t)s * L->out_size + off, S->gy + (size_t)s * ns);
	} else if (S->g_set) {
		be->axpy(n, 1.0f, g, S->gy);
	} else if (S->gy != g) { /* the same buffer: gy_plan gave it the gradient it passes on */
		be->copy(S->gy, g, sizeof(float) * n);
	}
	S->g_set = 1;
}

/* An add (or a ReLU that the batch norm before it does) passes its gradient (its own gy) to its inputs as it is: the last input to get it, when
 * nothing was added to its gradient yet, takes the buffer itself (the two layers swap their gy,
 * both batch_cap x out_size, each freed once) instead of a copy. Not while recomputed blocks
 * share buffers (a sharer keeps the pointer it copied). Returns 1 when it did. */
static int hand_over(struct dlk_net *net, int i, int e, float *r)
{
	struct dlk_layer *L = &net->layers[i];
	int src = L->spec.n_inputs ? L->spec.inputs[e] : i - 1;
	if (!passes_grad(net, i) || src < 0 || r != L->gy || L->share || net->gpool)
		return 0;
	struct dlk_layer *S = &net->layers[src];
	if (S->g_set || !S->gy || S->share || S->out_size != L->out_size)
		return 0;
	for (int k = 0; k < net->n_layers; k++)
		if (net->layers[k].share)
			return 0;
	L->gy = S->gy;
	S->gy = r;
	S->g_set = 1;
	return 1;
}

/* Backward through a graph: each layer's output gradient is the sum over the layers that read
 * it, gathered in its gy before its own backward runs (the layers are in an order where every
 * reader comes after what it reads). */
static void graph_backward(struct dlk_net *net, int batch)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *last = &net->layers[net->n_layers - 1];

	for (int i = 0; i < net->n_layers; i++)
		net->layers[i].g_set = 0;
	last->g_set = 1; /* the loss wrote it (dlk_net_out_grad) */
	for (int i = net->n_layers - 1; i >= 0; i--) {
		struct dlk_layer *L = &net->layers[i];
		const struct dlk_layer_ops *ops = dlk_layer_ops[L->spec.kind];
		if (L->seg && net->segs[L->seg - 1].last == i &&
		    net->segs[net->segs[L->seg - 1].group].resident != L->seg - 1)
			recompute(net, L->seg - 1, batch);
		if (!L->need_dx && !L->n_w)
			continue; /* nothing it reads needs a gradient */
		if (!L->g_set) {
			/* the loss does not depend on it: its parameters' gradients are 0 (a tied head's
			 * share of its table's too: the embedding adds to what the head wrote) */
			if (L->n_w) {
				if (!L->tied_by)
					be->fill(net->grads + L->w_off, L->n_w + L->n_b + L->n_s, 0.0f);
				else if (L->n_b + L->n_s) /* a tied table keeps its head's gradient */
					be->fill(net->grads + L->b_off, L->n_b + L->n_s, 0.0f);
				dlk_layer_grads_ready(net, L);
			} else if (L->spec.tie) {
				const struct dlk_layer *E = &net->layers[L->spec.tie - 1];
				be->fill(net->grads + E->w_off, E->n_w, 0.0f);
			}
			continue;
		}
		/* a layer of one input that is the first to hand its source a gradient writes it there
		 * itself, where its backward writes to gout (most do): no copy of a batch's gradient */
		int n_in = L->spec.n_inputs ? L->spec.n_inputs : 1, src = read_of(net, i, 0);
		float *gout = net->gbuf[0];
		if (L->need_dx && n_in == 1 && src >= 0 && !net->layers[src].g_set && net->layers[src].gy &&
		    net->layers[src].gy != L->gy)
			gout = net->layers[src].gy;
		float *r = ops->backward ? ops->backward(net, i, L->gy, gout, batch) : L->gy;
		if (!L->need_dx)
			continue;
		if (r == gout && gout != net->gbuf[0]) {
			net->layers[src].g_set = 1;
			continue;
		}
		for (int e = 0; e < n_in; e++) {
			/* an add's gradient is its inputs': the last one takes the buffer itself */
			if (e == n_in - 1 && hand_over(net, i, e, r))
				break;
			give_grad(net, i, e, r, batch);
		}
	}
}

float dlk_net_backward(struct dlk_net *net, const int32_t *labels, int batch)
{
	struct dlk_layer *last = &net->layers[net->n_layers - 1];
	float loss = net->be->softmax_ce(last->y_used, labels, batch, net->n_classes, dlk_net_out_grad(net));

	dlk_net_backward_grad(net, batch);
	return loss;
}

/* where the loss writes the gradient of the output: a chain's first ping-pong buffer, a graph's
 * last layer's gradient */
float *dlk_net_out_grad(struct dlk_net *net)
{
	return net->graph ? net->layers[net->n_layers - 1].gy : net->gbuf[0];
}

const float *dlk_net_output(const struct dlk_net *net) { return net->layers[net->n_layers - 1].y_used; }

void dlk_net_backward_grad(struct dlk_net *net, int batch)
{
	if (net->graph) {
		graph_backward(net, batch);
		return;
	}
	int cur = 0;
	float *g = net->gbuf[0];

	for (int i = net->n_layers - 1; i >= 0; i--) {
		struct dlk_layer *L = &net->layers[i];
		const struct dlk_layer_ops *ops = dlk_layer_ops[L->spec.kind];
		float *gout = net->gbuf[cur ^ 1];
		if (!L->need_dx && !L->n_w)
			break; /* nothing below needs a gradient */
		if (!ops->backward)
			continue;
		float *r = ops->backward(net, i, g, gout, batch);
		if (r == gout) {
			g = gout;
			cur ^= 1;
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
	free(net->segs);
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
