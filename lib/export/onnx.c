/* The bundle's network as an ONNX graph. The graph is built in two buffers (nodes and
 * initializers) while the layers are walked; each layer kind has one function in layer_map[]
 * that appends its nodes, so a new kind is one function and one row. */
#include "lib/export/onnx.h"

#include "lib/export/pbwrite.h"
#include "lib/nn/kernels.h"
#include "lib/nn/kernels_attn.h"
#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* onnx.proto's field numbers (onnx/onnx.proto, IR version 7) */
enum {
	MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOMAIN = 4,
	MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_METADATA = 14,
	OPSET_DOMAIN = 1, OPSET_VERSION = 2,
	KV_KEY = 1, KV_VALUE = 2,
	GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_DOC = 10, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
	NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
	ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_INTS = 8, ATTR_TYPE = 20,
	ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_STRING = 3, ATTR_TYPE_INTS = 7,
	TENSOR_DIMS = 1, TENSOR_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9, TENSOR_EXTERNAL = 13,
	TENSOR_DATA_LOCATION = 14, LOCATION_EXTERNAL = 1,
	DT_FLOAT = 1, DT_INT64 = 7,
	VI_NAME = 1, VI_TYPE = 2, VI_DOC = 3,
	TYPE_TENSOR = 1, TT_ELEM = 1, TT_SHAPE = 2,
	SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
};

#define NAME_MAX_LEN 64

/* Every tensor between layers holds a sample's values in dlk's order (C, H, W); its ONNX rank says
 * how they are seen: 2 [batch, C*H*W], 3 [batch, C*H, W] or 4 [batch, C, H, W]. A layer asks for
 * the rank its operator needs and a Flatten or Reshape makes it (the values do not move). */
struct graph {
	const struct dlk_bundle *b;
	const struct dlk_net *net;
	struct dlk_buf nodes, inits;
	int n_nodes;
	int ids;                           /* the model's input is int64 token ids */
	char (*name)[NAME_MAX_LEN];        /* slot 0 the model's input, slot i + 1 layer i's output */
	int *rank;
	char cur[NAME_MAX_LEN];            /* the input scaling's running tensor */
	struct dlk_onnx_external *ext;     /* the large initializers' file, or NULL: all in the model */
};

struct attr {
	const char *name;
	int type;
	int64_t i;
	float f;
	const int64_t *ints;
	int n_ints;
	const char *s;
};

static void add_node(struct graph *g, const char *op, const char *const *in, int n_in, const char *out,
                     const struct attr *attrs, int n_attrs)
{
	struct dlk_buf n = DLK_BUF_INIT, a = DLK_BUF_INIT;
	char name[NAME_MAX_LEN + 16];

	for (int i = 0; i < n_in; i++)
		dlk_pb_str(&n, NODE_INPUT, in[i]);
	dlk_pb_str(&n, NODE_OUTPUT, out);
	snprintf(name, sizeof(name), "%s_%d", op, g->n_nodes++);
	dlk_pb_str(&n, NODE_NAME, name);
	dlk_pb_str(&n, NODE_OP, op);
	for (int i = 0; i < n_attrs; i++) {
		dlk_buf_reset(&a);
		dlk_pb_str(&a, ATTR_NAME, attrs[i].name);
		if (attrs[i].type == ATTR_TYPE_INT)
			dlk_pb_int(&a, ATTR_I, attrs[i].i);
		else if (attrs[i].type == ATTR_TYPE_FLOAT)
			dlk_pb_float(&a, ATTR_F, attrs[i].f);
		else if (attrs[i].type == ATTR_TYPE_STRING)
			dlk_pb_str(&a, ATTR_S, attrs[i].s);
		else
			for (int k = 0; k < attrs[i].n_ints; k++)
				dlk_pb_int(&a, ATTR_INTS, attrs[i].ints[k]);
		dlk_pb_int(&a, ATTR_TYPE, attrs[i].type);
		dlk_pb_msg(&n, NODE_ATTR, &a);
	}
	dlk_pb_msg(&g->nodes, GRAPH_NODE, &n);
	dlk_buf_release(&a);
	dlk_buf_release(&n);
}

static void add_init(struct graph *g, const char *name, int dtype, const int64_t *dims, int n_dims,
                     const void *data, size_t n)
{
	struct dlk_buf t = DLK_BUF_INIT;

	for (int i = 0; i < n_dims; i++)
		dlk_pb_int(&t, TENSOR_DIMS, dims[i]);
	dlk_pb_int(&t, TENSOR_TYPE, dtype);
	dlk_pb_str(&t, TENSOR_NAME, name);
	if (dtype == DT_FLOAT && g->ext && 4 * n >= DLK_ONNX_EXTERNAL_MIN) {
		/* ONNX's external data: the floats in the file beside the model, at an aligned offset */
		struct dlk_buf *d = g->ext->data, kv = DLK_BUF_INIT;
		static const char zeros[DLK_ONNX_EXTERNAL_ALIGN];
		char num[32];
		size_t off = (d->len + DLK_ONNX_EXTERNAL_ALIGN - 1) / DLK_ONNX_EXTERNAL_ALIGN * DLK_ONNX_EXTERNAL_ALIGN;
		dlk_buf_add(d, zeros, off - d->len);
		dlk_pb_raw_floats(d, data, n);
		for (int k = 0; k < 3; k++) {
			snprintf(num, sizeof(num), "%zu", k == 1 ? off : 4 * n);
			dlk_buf_reset(&kv);
			dlk_pb_str(&kv, KV_KEY, k == 0 ? "location" : k == 1 ? "offset" : "length");
			dlk_pb_str(&kv, KV_VALUE, k == 0 ? g->ext->location : num);
			dlk_pb_msg(&t, TENSOR_EXTERNAL, &kv);
		}
		dlk_pb_int(&t, TENSOR_DATA_LOCATION, LOCATION_EXTERNAL);
		dlk_buf_release(&kv);
	} else if (dtype == DT_FLOAT) {
		/* raw_data: the key and length, then the floats little-endian */
		dlk_pb_varint(&t, (TENSOR_RAW << 3) | 2);
		dlk_pb_varint(&t, 4 * n);
		dlk_pb_raw_floats(&t, data, n);
	} else {
		/* int64 little-endian */
		const int64_t *v = data;
		dlk_pb_varint(&t, (TENSOR_RAW << 3) | 2);
		dlk_pb_varint(&t, 8 * n);
		for (size_t i = 0; i < n; i++) {
			unsigned char le[8];
			for (int k = 0; k < 8; k++)
				le[k] = (unsigned char)((uint64_t)v[i] >> (8 * k));
			dlk_buf_add(&t, le, 8);
		}
	}
	dlk_pb_msg(&g->inits, GRAPH_INIT, &t);
	dlk_buf_release(&t);
}

/* helpers over add_node/add_init: a one- or two-input node, a scalar or a list of int64s */
static void op1(struct graph *g, const char *op, const char *a, const char *out, const struct attr *at, int n_at)
{
	const char *in[1] = { a };
	add_node(g, op, in, 1, out, at, n_at);
}

static void op2(struct graph *g, const char *op, const char *a, const char *b, const char *out)
{
	const char *in[2] = { a, b };
	add_node(g, op, in, 2, out, NULL, 0);
}

static void scalar(struct graph *g, const char *name, float v)
{
	add_init(g, name, DT_FLOAT, NULL, 0, &v, 1);
}

static void ints(struct graph *g, const char *name, const int64_t *v, int n)
{
	int64_t dims[1] = { n };
	add_init(g, name, DT_INT64, dims, 1, v, (size_t)n);
}

/* "layers.<i>.<what>", the name of a tensor layer i makes */
static void lname(char *buf, int i, const char *what)
{
	snprintf(buf, NAME_MAX_LEN, "layers.%d.%s", i, what);
}

static int is_flat(const int s[3])
{
	return s[0] == 1 && s[1] == 1;
}

static const int *slot_shape(const struct graph *g, int slot)
{
	return slot ? g->net->layers[slot - 1].out : g->net->input;
}

/* The slot layer i reads as its input `which` (0 or 1). */
static int slot_of(const struct dlk_layer *L, int i, int which)
{
	if (L->spec.n_inputs == 0)
		return i; /* the layer before: slot i - 1 + 1 */
	return L->spec.inputs[which] + 1;
}

/* The name of layer i's input `which` as a float tensor of rank `want` (0: as it is): a Cast of
 * the model's token ids, a Flatten or a Reshape where needed, named layers.<i>.in (.in2). */
static const char *input_of(struct graph *g, const struct dlk_layer *L, int i, int which, int want, char *buf)
{
	int slot = slot_of(L, i, which), have = g->rank[slot];
	const int *s = slot_shape(g, slot);
	const char *src = g->name[slot];
	char tmp[NAME_MAX_LEN];

	if (slot == 0 && g->ids) {
		snprintf(buf, NAME_MAX_LEN, "layers.%d.in%s.float", i, which ? "2" : "");
		struct attr to = { "to", ATTR_TYPE_INT, DT_FLOAT, 0, NULL, 0, NULL };
		op1(g, "Cast", src, buf, &to, 1);
		snprintf(tmp, sizeof(tmp), "%s", buf);
		src = tmp;
	}
	if (!want || want == have)
		return src == tmp ? buf : src;
	snprintf(buf, NAME_MAX_LEN, "layers.%d.in%s", i, which ? "2" : "");
	if (want == 2) {
		struct attr axis = { "axis", ATTR_TYPE_INT, 1, 0, NULL, 0, NULL };
		op1(g, "Flatten", src, buf, &axis, 1);
	} else {
		char shape_name[NAME_MAX_LEN + 8];
		int64_t shape[4] = { -1, s[0], s[1], s[2] };
		if (want == 3)
			shape[1] = (int64_t)s[0] * s[1], shape[2] = s[2];
		snprintf(shape_name, sizeof(shape_name), "%s_shape", buf);
		ints(g, shape_name, shape, want);
		op2(g, "Reshape", src, shape_name, buf);
	}
	return buf;
}

/* layer i's output: named layers.<i>.out, of rank r */
static const char *output_of(struct graph *g, int i, int r)
{
	lname(g->name[i + 1], i, "out");
	g->rank[i + 1] = r;
	return g->name[i + 1];
}

/* layer i's output is an existing tensor (a layer that adds no node) */
static void alias(struct graph *g, int i, const char *name, int r)
{
	char tmp[NAME_MAX_LEN];

	snprintf(tmp, sizeof(tmp), "%s", name);
	memcpy(g->name[i + 1], tmp, sizeof(tmp));
	g->rank[i + 1] = r;
}

/* the layer's weight (of dims wdims) and bias ([n_b], none when n_b is 0) as initializers */
static void weights(struct graph *g, const struct dlk_layer *L, int i, const int64_t *wdims, int n_wdims,
                    char *wname, char *bname)
{
	int64_t bdims[1] = { (int64_t)L->n_b };

	lname(wname, i, "weight");
	lname(bname, i, "bias");
	add_init(g, wname, DT_FLOAT, wdims, n_wdims, g->b->weights + L->w_off, L->n_w);
	if (L->n_b)
		add_init(g, bname, DT_FLOAT, bdims, 1, g->b->weights + L->b_off, L->n_b);
}

/* out = MatMul(x, Transpose(w)) (+ b): nn.Linear over the last axis of a tensor of any rank */
static void linear(struct graph *g, const char *x, const char *w, const char *b, const char *out, int i, const char *tag)
{
	char wt[NAME_MAX_LEN], mm[NAME_MAX_LEN];

	snprintf(wt, sizeof(wt), "layers.%d.%s_t", i, tag);
	snprintf(mm, sizeof(mm), "layers.%d.%s_mm", i, tag);
	op1(g, "Transpose", w, wt, NULL, 0);
	if (!b) {
		op2(g, "MatMul", x, wt, out);
		return;
	}
	op2(g, "MatMul", x, wt, mm);
	op2(g, "Add", mm, b, out);
}

/* ---- one function per layer kind: reads its inputs' slots, sets its own ---- */

static void map_dense(struct graph *g, const struct dlk_layer *L, int i)
{
	char w[NAME_MAX_LEN], b[NAME_MAX_LEN], in[NAME_MAX_LEN];
	int64_t wdims[2] = { L->spec.units, L->in[2] };
	struct attr tb = { "transB", ATTR_TYPE_INT, 1, 0, NULL, 0, NULL };
	int flat = L->in[0] == 1 && L->in[1] == 1;
	const char *x = input_of(g, L, i, 0, flat ? 2 : 0, in), *out;

	if (L->spec.tie) /* the head's weight is the embedding's table, [vocab, dim] as it is */
		lname(w, L->spec.tie - 1, "weight");
	else
		weights(g, L, i, wdims, 2, w, b);
	out = output_of(g, i, flat ? 2 : g->rank[slot_of(L, i, 0)]);
	if (flat) {
		/* y = x W^T + b: the weights stay [out, in] as PyTorch keeps them */
		const char *gin[3] = { x, w, b };
		add_node(g, "Gemm", gin, L->n_b ? 3 : 2, out, &tb, 1);
	} else {
		linear(g, x, w, L->n_b ? b : NULL, out, i, "weight");
	}
}

static void map_conv2d(struct graph *g, const struct dlk_layer *L, int i)
{
	const struct dlk_layer_spec *s = &L->spec;
	char w[NAME_MAX_LEN], b[NAME_MAX_LEN], in[NAME_MAX_LEN];
	int64_t groups = s->groups > 1 ? s->groups : 1; /* nn.Conv2d's groups is ONNX Conv's group */
	int64_t wdims[4] = { s->filters, L->in[0] / groups, s->kernel, s->kernel };
	int64_t k[2] = { s->kernel, s->kernel }, st[2] = { s->stride, s->stride };
	int64_t pads[4] = { s->padding, s->padding, s->padding, s->padding };
	struct attr a[4] = { { "kernel_shape", ATTR_TYPE_INTS, 0, 0, k, 2, NULL },
		             { "strides", ATTR_TYPE_INTS, 0, 0, st, 2, NULL },
		             { "pads", ATTR_TYPE_INTS, 0, 0, pads, 4, NULL },
		             { "group", ATTR_TYPE_INT, groups, 0, NULL, 0, NULL } };
	const char *cin[3];

	cin[0] = input_of(g, L, i, 0, 4, in);
	weights(g, L, i, wdims, 4, w, b);
	cin[1] = w;
	cin[2] = b;
	add_node(g, "Conv", cin, 3, output_of(g, i, 4), a, groups > 1 ? 4 : 3);
}

static void map_convtranspose2d(struct graph *g, const struct dlk_layer *L, int i)
{
	const struct dlk_layer_spec *s = &L->spec;
	char w[NAME_MAX_LEN], b[NAME_MAX_LEN], in[NAME_MAX_LEN];
	int64_t wdims[4] = { L->in[0], s->filters, s->kernel, s->kernel };
	int64_t k[2] = { s->kernel, s->kernel }, st[2] = { s->stride, s->stride };
	int64_t pads[4] = { s->padding, s->padding, s->padding, s->padding };
	int64_t op[2] = { s->output_padding, s->output_padding }; /* extra rows and columns at the end */
	struct attr a[4] = { { "kernel_shape", ATTR_TYPE_INTS, 0, 0, k, 2, NULL },
		             { "strides", ATTR_TYPE_INTS, 0, 0, st, 2, NULL },
		             { "pads", ATTR_TYPE_INTS, 0, 0, pads, 4, NULL },
		             { "output_padding", ATTR_TYPE_INTS, 0, 0, op, 2, NULL } };
	const char *cin[3];

	cin[0] = input_of(g, L, i, 0, 4, in);
	weights(g, L, i, wdims, 4, w, b);
	cin[1] = w;
	cin[2] = b;
	add_node(g, "ConvTranspose", cin, 3, output_of(g, i, 4), a, 4);
}

/* maxpool and avgpool: dlk's windows drop a partial last window (ONNX's default floor mode);
 * maxpool never pads, avgpool counts its zero padding (count_include_pad, PyTorch's default) */
static void map_pool(struct graph *g, const struct dlk_layer *L, int i)
{
	const struct dlk_layer_spec *s = &L->spec;
	char in[NAME_MAX_LEN];
	int64_t k[2] = { s->size, s->size }, st[2] = { s->stride, s->stride };
	int64_t pads[4] = { s->padding, s->padding, s->padding, s->padding };
	int avg = s->kind == DLK_LAYER_AVGPOOL;
	struct attr a[4] = { { "kernel_shape", ATTR_TYPE_INTS, 0, 0, k, 2, NULL },
		             { "strides", ATTR_TYPE_INTS, 0, 0, st, 2, NULL },
		             { "pads", ATTR_TYPE_INTS, 0, 0, pads, 4, NULL },
		             { "count_include_pad", ATTR_TYPE_INT, 1, 0, NULL, 0, NULL } };
	const char *x = input_of(g, L, i, 0, 4, in);

	op1(g, avg ? "AveragePool" : "MaxPool", x, output_of(g, i, 4), a, avg ? 4 : 2);
}

/* each channel's mean over height and width, then flat [batch, C] as dlk lays it */
static void map_globalavgpool(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], pooled[NAME_MAX_LEN];
	struct attr axis = { "axis", ATTR_TYPE_INT, 1, 0, NULL, 0, NULL };
	const char *x = input_of(g, L, i, 0, 4, in);

	lname(pooled, i, "pooled");
	op1(g, "GlobalAveragePool", x, pooled, NULL, 0);
	op1(g, "Flatten", pooled, output_of(g, i, 2), &axis, 1);
}

/* a sequence's mean over positions: keep [batch, 1, T] (1 where the model-input id is not pad_id,
 * or everywhere) times x [batch, T, D] is the sum of the kept rows; keep times ones [T, 1] is their
 * count, at least 1 (a sample all padding gives 0, as dlk); then flat [batch, D] */
static void map_meanpool(struct graph *g, const struct dlk_layer *L, int i)
{
	const int T = L->in[1], D = L->in[2];
	char in[NAME_MAX_LEN], keep[NAME_MAX_LEN], keep3[NAME_MAX_LEN], shp[NAME_MAX_LEN], ones[NAME_MAX_LEN],
		sum[NAME_MAX_LEN], cnt[NAME_MAX_LEN], one[NAME_MAX_LEN], cnt1[NAME_MAX_LEN], mean[NAME_MAX_LEN],
		oshp[NAME_MAX_LEN];
	const char *x = input_of(g, L, i, 0, 3, in);
	int64_t s3[3] = { -1, 1, T }, s2[2] = { -1, D }, odims[2] = { T, 1 };
	float *v = xmalloc(sizeof(float) * (size_t)T);

	for (int t = 0; t < T; t++)
		v[t] = 1.0f;
	lname(ones, i, "c_ones");
	add_init(g, ones, DT_FLOAT, odims, 2, v, (size_t)T);
	lname(keep, i, "keep");
	if (L->spec.pad_id >= 0) {
		char pid[NAME_MAX_LEN], eq[NAME_MAX_LEN], z[NAME_MAX_LEN], o[NAME_MAX_LEN];
		lname(pid, i, "c_pad_id");
		lname(eq, i, "pad");
		lname(z, i, "c_0f");
		lname(o, i, "c_1f");
		if (g->ids) {
			int64_t p = L->spec.pad_id;
			add_init(g, pid, DT_INT64, NULL, 0, &p, 1);
		} else {
			scalar(g, pid, (float)L->spec.pad_id);
		}
		op2(g, "Equal", g->name[0], pid, eq);
		scalar(g, z, 0.0f);
		scalar(g, o, 1.0f);
		const char *win[3] = { eq, z, o };
		add_node(g, "Where", win, 3, keep, NULL, 0);
	} else {
		int64_t kd[2] = { 1, T };
		add_init(g, keep, DT_FLOAT, kd, 2, v, (size_t)T);
	}
	free(v);
	lname(shp, i, "keep_shape");
	lname(keep3, i, "keep3");
	ints(g, shp, s3, 3);
	op2(g, "Reshape", keep, shp, keep3);
	lname(sum, i, "sum");
	lname(cnt, i, "count");
	lname(one, i, "c_min_count");
	lname(cnt1, i, "count1");
	lname(mean, i, "mean");
	lname(oshp, i, "out_shape");
	op2(g, "MatMul", keep3, x, sum);
	op2(g, "MatMul", keep3, ones, cnt);
	scalar(g, one, 1.0f);
	op2(g, "Max", cnt, one, cnt1);
	op2(g, "Div", sum, cnt1, mean);
	ints(g, oshp, s2, 2);
	op2(g, "Reshape", mean, oshp, output_of(g, i, 2));
}

static void map_flatten(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN];
	struct attr axis = { "axis", ATTR_TYPE_INT, 1, 0, NULL, 0, NULL };
	int slot = slot_of(L, i, 0);

	if (g->rank[slot] == 2 && !(slot == 0 && g->ids)) { /* already [batch, F]: no node */
		alias(g, i, g->name[slot], 2);
		return;
	}
	op1(g, "Flatten", input_of(g, L, i, 0, 0, in), output_of(g, i, 2), &axis, 1);
}

/* reshape: the same values seen as the new shape (rank 4, or 3 / 2 where it has one channel / is flat) */
static void map_reshape(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], shape_name[NAME_MAX_LEN];
	const int *o = L->out;
	int r = o[0] == 1 && o[1] == 1 ? 2 : o[0] == 1 ? 3 : 4;
	int64_t shape[4] = { -1, o[0], o[1], o[2] };
	const char *x = input_of(g, L, i, 0, 0, in);

	if (r == 3)
		shape[1] = o[1], shape[2] = o[2];
	else if (r == 2)
		shape[1] = o[2];
	lname(shape_name, i, "shape");
	ints(g, shape_name, shape, r);
	op2(g, "Reshape", x, shape_name, output_of(g, i, r));
}

/* an element-wise operator: the output keeps the input's rank */
static void map_activation(struct graph *g, const struct dlk_layer *L, int i, const char *op)
{
	char in[NAME_MAX_LEN];
	const char *x = input_of(g, L, i, 0, 0, in);

	op1(g, op, x, output_of(g, i, g->rank[slot_of(L, i, 0)]), NULL, 0);
}

static void map_relu(struct graph *g, const struct dlk_layer *L, int i) { map_activation(g, L, i, "Relu"); }
static void map_tanh(struct graph *g, const struct dlk_layer *L, int i) { map_activation(g, L, i, "Tanh"); }
static void map_sigmoid(struct graph *g, const struct dlk_layer *L, int i) { map_activation(g, L, i, "Sigmoid"); }

/* inference: dropout is the identity, so it adds no node: its output is its input's tensor */
static void map_dropout(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN];
	int slot = slot_of(L, i, 0);
	const char *x = input_of(g, L, i, 0, 0, in);

	/* x is the input's own tensor, or the model's token ids cast (a tensor of this layer's) */
	alias(g, i, x, g->rank[slot]);
}

/* gelu as dlk computes it (lib/nn/kernels.h): 0.5 x (1 + erf(x / sqrt 2)), or the tanh form
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); opset 17 has Erf but no Gelu */
static void map_gelu(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], t[8][NAME_MAX_LEN], c[4][NAME_MAX_LEN];
	const char *x = input_of(g, L, i, 0, 0, in);
	int r = g->rank[slot_of(L, i, 0)];

	for (int k = 0; k < 8; k++)
		snprintf(t[k], NAME_MAX_LEN, "layers.%d.gelu%d", i, k);
	for (int k = 0; k < 4; k++)
		snprintf(c[k], NAME_MAX_LEN, "layers.%d.c%d", i, k);
	scalar(g, c[0], 0.5f);
	scalar(g, c[1], 1.0f);
	if (L->spec.approximate == DLK_GELU_TANH) {
		scalar(g, c[2], 0.044715f);
		scalar(g, c[3], DLK_K_SQRT_2_OVER_PI);
		op2(g, "Mul", x, x, t[0]);
		op2(g, "Mul", t[0], x, t[1]);      /* x^3 */
		op2(g, "Mul", t[1], c[2], t[2]);
		op2(g, "Add", x, t[2], t[3]);
		op2(g, "Mul", t[3], c[3], t[4]);
		op1(g, "Tanh", t[4], t[5], NULL, 0);
	} else {
		scalar(g, c[2], DLK_K_INV_SQRT_2);
		op2(g, "Mul", x, c[2], t[4]);
		op1(g, "Erf", t[4], t[5], NULL, 0);
	}
	op2(g, "Add", t[5], c[1], t[6]);
	op2(g, "Mul", x, c[0], t[7]);
	op2(g, "Mul", t[7], t[6], output_of(g, i, r));
}

/* softmax and layernorm work on the last axis (W): any rank but a flat one shows it as last */
static void map_softmax(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN];
	struct attr axis = { "axis", ATTR_TYPE_INT, -1, 0, NULL, 0, NULL };
	const char *x = input_of(g, L, i, 0, is_flat(L->in) ? 2 : 3, in);

	op1(g, "Softmax", x, output_of(g, i, is_flat(L->in) ? 2 : 3), &axis, 1);
}

static void map_layernorm(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], w[NAME_MAX_LEN], b[NAME_MAX_LEN];
	int64_t dims[1] = { L->in[2] };
	struct attr a[2] = { { "axis", ATTR_TYPE_INT, -1, 0, NULL, 0, NULL },
		             { "epsilon", ATTR_TYPE_FLOAT, 0, L->spec.eps, NULL, 0, NULL } };
	int r = is_flat(L->in) ? 2 : 3;
	const char *lin[3];

	lin[0] = input_of(g, L, i, 0, r, in);
	weights(g, L, i, dims, 1, w, b);
	lin[1] = w;
	lin[2] = b;
	add_node(g, "LayerNormalization", lin, 3, output_of(g, i, r), a, 2);
}

/* eval: the running statistics (BatchNormalization's inference form), per channel or per feature */
static void map_batchnorm(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], w[NAME_MAX_LEN], b[NAME_MAX_LEN], m[NAME_MAX_LEN], v[NAME_MAX_LEN];
	int flat = is_flat(L->in);
	int64_t dims[1] = { (int64_t)L->n_w };
	struct attr eps = { "epsilon", ATTR_TYPE_FLOAT, 0, L->spec.eps, NULL, 0, NULL };
	const char *bin[5];

	bin[0] = input_of(g, L, i, 0, flat ? 2 : 4, in);
	weights(g, L, i, dims, 1, w, b);
	lname(m, i, "running_mean");
	lname(v, i, "running_var");
	add_init(g, m, DT_FLOAT, dims, 1, g->b->weights + L->s_off, L->n_w);
	add_init(g, v, DT_FLOAT, dims, 1, g->b->weights + L->s_off + L->n_w, L->n_w);
	bin[1] = w, bin[2] = b, bin[3] = m, bin[4] = v;
	add_node(g, "BatchNormalization", bin, 5, output_of(g, i, flat ? 2 : 4), &eps, 1);
}

/* nn.Upsample(scale_factor, align_corners=False): nearest reads floor(o / s) (ONNX's asymmetric
 * coordinates, nearest_mode floor), bilinear reads (o + 0.5) / s - 0.5 clamped at 0 (half_pixel) */
static void map_upsample(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], sc[NAME_MAX_LEN];
	int nearest = L->spec.mode == DLK_UPSAMPLE_NEAREST;
	float s = (float)L->spec.scale, scales[4] = { 1, 1, s, s };
	int64_t dims[1] = { 4 };
	struct attr a[3] = { { "mode", ATTR_TYPE_STRING, 0, 0, NULL, 0, nearest ? "nearest" : "linear" },
		             { "coordinate_transformation_mode", ATTR_TYPE_STRING, 0, 0, NULL, 0,
		               nearest ? "asymmetric" : "half_pixel" },
		             { "nearest_mode", ATTR_TYPE_STRING, 0, 0, NULL, 0, "floor" } };
	const char *rin[3];

	rin[0] = input_of(g, L, i, 0, 4, in);
	lname(sc, i, "scales");
	add_init(g, sc, DT_FLOAT, dims, 1, scales, 4);
	rin[1] = ""; /* no region of interest */
	rin[2] = sc;
	add_node(g, "Resize", rin, 3, output_of(g, i, 4), a, nearest ? 3 : 2);
}

/* add: both inputs of one shape, seen at the first one's rank */
static void map_add(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], in2[NAME_MAX_LEN];
	const char *a = input_of(g, L, i, 0, 0, in);
	int r = g->rank[slot_of(L, i, 0)];

	if (slot_of(L, i, 0) == 0 && g->ids)
		r = 2;
	op2(g, "Add", a, input_of(g, L, i, 1, r, in2), output_of(g, i, r));
}

/* concat: along channels ([batch, C, H, W]), or along the features of two flat inputs */
static void map_concat(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], in2[NAME_MAX_LEN];
	int r = is_flat(L->out) ? 2 : 4;
	struct attr axis = { "axis", ATTR_TYPE_INT, 1, 0, NULL, 0, NULL };
	const char *cin[2];

	cin[0] = input_of(g, L, i, 0, r, in);
	cin[1] = input_of(g, L, i, 1, r, in2);
	add_node(g, "Concat", cin, 2, output_of(g, i, r), &axis, 1);
}

/* embedding: Gather of the ids' rows ([batch, n] -> [batch, n, dim]); with positions, the first n
 * rows of the position table (the bias) added */
static void map_embedding(struct graph *g, const struct dlk_layer *L, int i)
{
	char in[NAME_MAX_LEN], ids[NAME_MAX_LEN], w[NAME_MAX_LEN], b[NAME_MAX_LEN], rows[NAME_MAX_LEN],
		st[NAME_MAX_LEN], en[NAME_MAX_LEN], ax[NAME_MAX_LEN], gath[NAME_MAX_LEN];
	int64_t wdims[2] = { L->spec.vocab, L->spec.dim }, bdims[2] = { L->spec.positions, L->spec.dim };
	int64_t zero = 0, n = (int64_t)L->in_size;
	int slot = slot_of(L, i, 0);
	const char *x, *out, *gin[2];

	if (slot == 0 && g->ids) {
		x = g->name[0]; /* already int64 [batch, n] */
	} else {
		struct attr to = { "to", ATTR_TYPE_INT, DT_INT64, 0, NULL, 0, NULL };
		lname(ids, i, "ids");
		op1(g, "Cast", input_of(g, L, i, 0, 2, in), ids, &to, 1);
		x = ids;
	}
	lname(w, i, "weight");
	add_init(g, w, DT_FLOAT, wdims, 2, g->b->weights + L->w_off, L->n_w);
	gin[0] = w;
	gin[1] = x;
	if (!L->n_b) {
		add_node(g, "Gather", gin, 2, output_of(g, i, 3), NULL, 0);
		return;
	}
	lname(b, i, "bias");
	add_init(g, b, DT_FLOAT, bdims, 2, g->b->weights + L->b_off, L->n_b);
	lname(gath, i, "tokens");
	add_node(g, "Gather", gin, 2, gath, NULL, 0);
	lname(st, i, "rows_start");
	lname(en, i, "rows_end");
	lname(ax, i, "rows_axis");
	ints(g, st, &zero, 1);
	ints(g, en, &n, 1);
	ints(g, ax, &zero, 1);
	lname(rows, i, "positions");
	{
		const char *sin[4] = { b, st, en, ax };
		add_node(g, "Slice", sin, 4, rows, NULL, 0);
	}
	out = output_of(g, i, 3);
	op2(g, "Add", gath, rows, out);
}

/* attention (lib/nn/layer_attention.c) in standard operators:
 *   qkv = x Wqkv^T + bqkv -> [batch, T, 3, heads, hd] -> q, k, v [batch, heads, T, hd]
 *   (rotary: q cos + rotate_half(q) sin, the same for k, tables of dlk's angles)
 *   s = q k^T / sqrt(hd) + causal mask (+ -inf at keys whose model-input id is pad_id)
 *   a = softmax(s) v (a row whose keys are all masked gives 0, as dlk) -> [batch, T, D]
 *   y = a Wo^T + bo
 * The weight [4D, D] and bias [4D] are the bundle's tensors, sliced in the graph. */
static void map_attention(struct graph *g, const struct dlk_layer *L, int i)
{
	const int T = L->in[1], D = L->in[2], H = L->spec.heads, hd = D / H;
	char in[NAME_MAX_LEN], w[NAME_MAX_LEN], b[NAME_MAX_LEN], nm[48][NAME_MAX_LEN];
	int64_t wdims[2] = { 4 * (int64_t)D, D };
	const char *x = input_of(g, L, i, 0, 3, in);
	int k = 0;
#define T_(s) (snprintf(nm[k], NAME_MAX_LEN, "layers.%d.%s", i, s), nm[k++])
	const char *z = T_("c_zero"), *d3 = T_("c_3d"), *d4 = T_("c_4d");
	int64_t v0 = 0, v3 = 3 * (int64_t)D, v4 = 4 * (int64_t)D;

	weights(g, L, i, wdims, 2, w, b);
	ints(g, z, &v0, 1);
	ints(g, d3, &v3, 1);
	ints(g, d4, &v4, 1);
	const char *wqkv = T_("in_proj_weight"), *wo = T_("out_proj_weight");
	const char *bqkv = T_("in_proj_bias"), *bo = T_("out_proj_bias");
	{
		const char *s1[4] = { w, z, d3, z }, *s2[4] = { w, d3, d4, z };
		const char *s3[4] = { b, z, d3, z }, *s4[4] = { b, d3, d4, z };
		add_node(g, "Slice", s1, 4, wqkv, NULL, 0);
		add_node(g, "Slice", s2, 4, wo, NULL, 0);
		add_node(g, "Slice", s3, 4, bqkv, NULL, 0);
		add_node(g, "Slice", s4, 4, bo, NULL, 0);
	}
	const char *qkv = T_("qkv"), *shp = T_("qkv_shape"), *qkv5 = T_("qkv5"), *qkvt = T_("qkv_heads");
	linear(g, x, wqkv, bqkv, qkv, i, "in_proj");
	{
		int64_t s5[5] = { -1, T, 3, H, hd }, perm[5] = { 2, 0, 3, 1, 4 };
		struct attr p = { "perm", ATTR_TYPE_INTS, 0, 0, perm, 5, NULL };
		ints(g, shp, s5, 5);
		op2(g, "Reshape", qkv, shp, qkv5);
		op1(g, "Transpose", qkv5, qkvt, &p, 1);
	}
	const char *part[3];
	for (int p = 0; p < 3; p++) {
		char idx[NAME_MAX_LEN];
		int64_t pv = p;
		struct attr axis = { "axis", ATTR_TYPE_INT, 0, 0, NULL, 0, NULL };
		snprintf(idx, sizeof(idx), "layers.%d.c_part%d", i, p);
		add_init(g, idx, DT_INT64, NULL, 0, &pv, 1);
		part[p] = T_(p == 0 ? "q" : p == 1 ? "k" : "v");
		const char *gin[2] = { qkvt, idx };
		add_node(g, "Gather", gin, 2, part[p], &axis, 1);
	}
	if (L->spec.rotary) {
		/* cos and sin [T, hd]: angle t 10000^(-2j/hd) at j and j + hd/2 (rotate-half) */
		float *cs = xmalloc(sizeof(float) * 2 * (size_t)T * hd);
		int64_t cdims[2] = { T, hd }, half = hd / 2, hv = hd, three = 3;
		const char *cn = T_("rot_cos"), *sn = T_("rot_sin"), *hs = T_("c_half"), *he = T_("c_hd"), *a3 = T_("c_axis3");
		for (int t = 0; t < T; t++)
			for (int j = 0; j < hd / 2; j++) {
				float c, s;
				dlk_k_rotary_cs(t, j, hd, &c, &s);
				cs[(size_t)t * hd + j] = cs[(size_t)t * hd + j + hd / 2] = c;
				cs[(size_t)T * hd + (size_t)t * hd + j] = cs[(size_t)T * hd + (size_t)t * hd + j + hd / 2] = s;
			}
		add_init(g, cn, DT_FLOAT, cdims, 2, cs, (size_t)T * hd);
		add_init(g, sn, DT_FLOAT, cdims, 2, cs + (size_t)T * hd, (size_t)T * hd);
		free(cs);
		ints(g, hs, &half, 1);
		ints(g, he, &hv, 1);
		ints(g, a3, &three, 1);
		for (int p = 0; p < 2; p++) {
			char x1[NAME_MAX_LEN], x2[NAME_MAX_LEN], nx2[NAME_MAX_LEN], rh[NAME_MAX_LEN], pc[NAME_MAX_LEN],
				ps[NAME_MAX_LEN];
			const char *src = part[p], *r = T_(p ? "k_rot" : "q_rot");
			struct attr axis = { "axis", ATTR_TYPE_INT, -1, 0, NULL, 0, NULL };
			snprintf(x1, sizeof(x1), "%s_1", r);
			snprintf(x2, sizeof(x2), "%s_2", r);
			snprintf(nx2, sizeof(nx2), "%s_neg2", r);
			snprintf(rh, sizeof(rh), "%s_half", r);
			snprintf(pc, sizeof(pc), "%s_cos", r);
			snprintf(ps, sizeof(ps), "%s_sin", r);
			const char *s1[4] = { src, z, hs, a3 }, *s2[4] = { src, hs, he, a3 }, *cat[2] = { nx2, x1 };
			add_node(g, "Slice", s1, 4, x1, NULL, 0);
			add_node(g, "Slice", s2, 4, x2, NULL, 0);
			op1(g, "Neg", x2, nx2, NULL, 0);
			add_node(g, "Concat", cat, 2, rh, &axis, 1);
			op2(g, "Mul", src, cn, pc);
			op2(g, "Mul", rh, sn, ps);
			op2(g, "Add", pc, ps, r);
			part[p] = r;
		}
	}
	const char *kt = T_("k_t"), *sc = T_("scores"), *c_sc = T_("c_scale"), *ss = T_("scores_scaled");
	{
		int64_t perm[4] = { 0, 1, 3, 2 };
		struct attr p = { "perm", ATTR_TYPE_INTS, 0, 0, perm, 4, NULL };
		op1(g, "Transpose", part[1], kt, &p, 1);
		op2(g, "MatMul", part[0], kt, sc);
		scalar(g, c_sc, 1.0f / sqrtf((float)hd));
		op2(g, "Mul", sc, c_sc, ss);
	}
	const char *cur = ss;
	if (L->spec.causal) {
		float *m = xmalloc(sizeof(float) * (size_t)T * T);
		int64_t mdims[2] = { T, T };
		const char *mn = T_("causal_mask"), *o = T_("scores_causal");
		for (int q = 0; q < T; q++)
			for (int c = 0; c < T; c++)
				m[(size_t)q * T + c] = c > q ? -INFINITY : 0.0f;
		add_init(g, mn, DT_FLOAT, mdims, 2, m, (size_t)T * T);
		free(m);
		op2(g, "Add", cur, mn, o);
		cur = o;
	}
	if (L->spec.pad_id >= 0) {
		/* the model's input ids (int64, or the floats that hold them) equal to pad_id: -inf */
		const char *pid = T_("c_pad_id"), *eq = T_("pad"), *ninf = T_("c_ninf"), *zf = T_("c_0f"), *pm = T_("pad_mask"),
			   *ps = T_("pad_shape"), *pm4 = T_("pad_mask4"), *o = T_("scores_padded");
		int64_t s4[4] = { -1, 1, 1, T };
		float ni = -INFINITY, zero = 0.0f;
		if (g->ids) {
			int64_t p = L->spec.pad_id;
			add_init(g, pid, DT_INT64, NULL, 0, &p, 1);
		} else {
			scalar(g, pid, (float)L->spec.pad_id);
		}
		op2(g, "Equal", g->name[0], pid, eq);
		scalar(g, ninf, ni);
		scalar(g, zf, zero);
		{
			const char *win[3] = { eq, ninf, zf };
			add_node(g, "Where", win, 3, pm, NULL, 0);
		}
		ints(g, ps, s4, 4);
		op2(g, "Reshape", pm, ps, pm4);
		op2(g, "Add", cur, pm4, o);
		cur = o;
	}
	const char *pr = T_("weights_raw"), *nan = T_("weights_nan"), *pw = T_("weights"), *av = T_("values"),
		   *avt = T_("values_t"), *ash = T_("values_shape"), *a = T_("values_flat");
	{
		struct attr axis = { "axis", ATTR_TYPE_INT, -1, 0, NULL, 0, NULL };
		int64_t perm[4] = { 0, 2, 1, 3 }, s3[3] = { -1, T, D };
		struct attr p = { "perm", ATTR_TYPE_INTS, 0, 0, perm, 4, NULL };
		const char *win[3] = { nan, z, pr };
		op1(g, "Softmax", cur, pr, &axis, 1);
		op1(g, "IsNaN", pr, nan, NULL, 0);
		char zf0[NAME_MAX_LEN];
		snprintf(zf0, sizeof(zf0), "layers.%d.c_nan0", i);
		scalar(g, zf0, 0.0f);
		win[1] = zf0;
		add_node(g, "Where", win, 3, pw, NULL, 0);
		op2(g, "MatMul", pw, part[2], av);
		op1(g, "Transpose", av, avt, &p, 1);
		ints(g, ash, s3, 3);
		op2(g, "Reshape", avt, ash, a);
	}
	linear(g, a, wo, bo, output_of(g, i, 3), i, "out_proj");
#undef T_
}

static const struct {
	enum dlk_layer_kind kind;
	void (*map)(struct graph *g, const struct dlk_layer *L, int i);
} layer_map[] = {
	{ DLK_LAYER_DENSE, map_dense },
	{ DLK_LAYER_CONV2D, map_conv2d },
	{ DLK_LAYER_MAXPOOL, map_pool },
	{ DLK_LAYER_FLATTEN, map_flatten },
	{ DLK_LAYER_RELU, map_relu },
	{ DLK_LAYER_TANH, map_tanh },
	{ DLK_LAYER_SIGMOID, map_sigmoid },
	{ DLK_LAYER_DROPOUT, map_dropout },
	{ DLK_LAYER_ADD, map_add },
	{ DLK_LAYER_CONCAT, map_concat },
	{ DLK_LAYER_GLOBALAVGPOOL, map_globalavgpool },
	{ DLK_LAYER_LAYERNORM, map_layernorm },
	{ DLK_LAYER_GELU, map_gelu },
	{ DLK_LAYER_SOFTMAX, map_softmax },
	{ DLK_LAYER_EMBEDDING, map_embedding },
	{ DLK_LAYER_UPSAMPLE, map_upsample },
	{ DLK_LAYER_ATTENTION, map_attention },
	{ DLK_LAYER_BATCHNORM, map_batchnorm },
	{ DLK_LAYER_AVGPOOL, map_pool },
	{ DLK_LAYER_CONVTRANSPOSE2D, map_convtranspose2d },
	{ DLK_LAYER_RESHAPE, map_reshape },
	{ DLK_LAYER_MEANPOOL, map_meanpool },
};

/* ---- the model around the graph ---- */

static void value_info(struct dlk_buf *out, int field, const char *name, int dtype, const int64_t *dims, int n,
                       const char *doc)
{
	struct dlk_buf vi = DLK_BUF_INIT, ty = DLK_BUF_INIT, tt = DLK_BUF_INIT, sh = DLK_BUF_INIT, d = DLK_BUF_INIT;

	for (int i = 0; i < n; i++) {
		dlk_buf_reset(&d);
		if (dims[i] < 0)
			dlk_pb_str(&d, DIM_PARAM, "batch");
		else
			dlk_pb_int(&d, DIM_VALUE, dims[i]);
		dlk_pb_msg(&sh, SHAPE_DIM, &d);
	}
	dlk_pb_int(&tt, TT_ELEM, dtype);
	dlk_pb_msg(&tt, TT_SHAPE, &sh);
	dlk_pb_msg(&ty, TYPE_TENSOR, &tt);
	dlk_pb_str(&vi, VI_NAME, name);
	dlk_pb_msg(&vi, VI_TYPE, &ty);
	dlk_pb_str(&vi, VI_DOC, doc);
	dlk_pb_msg(out, field, &vi);
	dlk_buf_release(&d);
	dlk_buf_release(&sh);
	dlk_buf_release(&tt);
	dlk_buf_release(&ty);
	dlk_buf_release(&vi);
}

static void meta(struct dlk_buf *m, const char *key, const char *value)
{
	struct dlk_buf kv = DLK_BUF_INIT;

	dlk_pb_str(&kv, KV_KEY, key);
	dlk_pb_str(&kv, KV_VALUE, value);
	dlk_pb_msg(m, MODEL_METADATA, &kv);
	dlk_buf_release(&kv);
}

/* model.json's string at a path of keys, or NULL; NULL too for bytes that are not UTF-8, which
 * a protobuf string must be (ONNX Runtime and the onnx package refuse the whole model) */
static const char *meta_str(const cJSON *o, const char *k1, const char *k2)
{
	o = cJSON_GetObjectItemCaseSensitive(o, k1);
	if (k2)
		o = cJSON_GetObjectItemCaseSensitive(o, k2);
	if (!cJSON_IsString(o) || !dlk_utf8_valid(o->valuestring, strlen(o->valuestring)))
		return NULL;
	return o->valuestring;
}

static void add_metadata(struct dlk_buf *m, const struct dlk_bundle *b, enum dlk_input_form form)
{
	const cJSON *acc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b->meta, "metrics"),
	                                                    "test_accuracy");
	const char *s;
	char v[64];

	meta(m, "dlk.version", DLK_VERSION);
	if ((s = meta_str(b->meta, "provenance", "dlk_version")))
		meta(m, "dlk.bundle.dlk_version", s);
	if ((s = meta_str(b->meta, "name", NULL)))
		meta(m, "dlk.bundle.name", s);
	meta(m, "dlk.bundle.weights_sha256", b->weights_sha256);
	meta(m, "dlk.input_form", dlk_input_form_name(form));
	snprintf(v, sizeof(v), "%.9g", (double)b->scale);
	meta(m, "dlk.input.scale", v);
	snprintf(v, sizeof(v), "%.9g", (double)b->mean);
	meta(m, "dlk.input.mean", v);
	snprintf(v, sizeof(v), "%.9g", (double)b->std);
	meta(m, "dlk.input.std", v);
	if (cJSON_IsNumber(acc)) {
		snprintf(v, sizeof(v), "%.6g", acc->valuedouble);
		meta(m, "dlk.test_accuracy", v);
	}
	if (b->classes) {
		cJSON *a = cJSON_CreateStringArray((const char *const *)b->classes, b->n_classes);
		char *j = cJSON_PrintUnformatted(a);
		if (j)
			meta(m, "dlk.classes", j);
		cJSON_free(j);
		cJSON_Delete(a);
	}
}

/* The first nodes: raw values scaled as training scaled them, in float32 and in training's order
 * ((v * scale - mean) / std), so the network sees the same bits. */
static void add_scaling(struct graph *g, const struct dlk_bundle *b)
{
	static const char *const ops[3] = { "Mul", "Sub", "Div" };
	static const char *const names[3] = { "input.scale", "input.mean", "input.std" };
	static const char *const outs[3] = { "input.scaled", "input.centred", "input.normalised" };
	const float v[3] = { b->scale, b->mean, b->std };

	for (int k = 0; k < 3; k++) {
		const char *in[2] = { g->cur, names[k] };
		add_init(g, names[k], DT_FLOAT, NULL, 0, &v[k], 1);
		add_node(g, ops[k], in, 2, outs[k], NULL, 0);
		snprintf(g->cur, sizeof(g->cur), "%s", outs[k]);
	}
}

/* The rank-r view of the last layer's output (slot n) named `name`: an Identity of it, after a
 * Flatten or Reshape where its rank differs. */
static void final_output(struct graph *g, int n, int r, const char *name)
{
	struct dlk_layer_spec id = { .kind = DLK_LAYER_DROPOUT, .n_inputs = 1, .inputs = { n - 1 } };
	struct dlk_layer L = { 0 };
	char in[NAME_MAX_LEN];

	L.spec = id;
	/* read as a layer n would (its names are layers.<n>.in) */
	op1(g, "Identity", input_of(g, &L, n, 0, r, in), name, NULL, 0);
}

/* The bytes of the graph's initializers: the weights, and attention's tables (the causal mask
 * [T, T], rotary's cos and sin [T, hd]), which a long sequence makes large. */
static double graph_bytes(const struct dlk_bundle *b, const struct dlk_net *net)
{
	double n = 4.0 * (double)b->n_weights;

	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		if (L->spec.kind != DLK_LAYER_ATTENTION)
			continue;
		if (L->spec.causal)
			n += 4.0 * L->in[1] * L->in[1];
		if (L->spec.rotary)
			n += 8.0 * L->in[1] * L->in[2] / L->spec.heads;
	}
	return n;
}

void dlk_onnx_io_of(const struct dlk_bundle *b, struct dlk_onnx_io *io)
{
	const struct dlk_model *m = &b->model;

	/* token ids: a tokenizer in the bundle, or an embedding reading the model's input */
	io->ids = b->tokenizer != NULL;
	for (int i = 0; i < m->n_layers; i++) {
		const struct dlk_layer_spec *ls = &m->layers[i];
		int reads_input = ls->n_inputs ? ls->inputs[0] == -1 : i == 0;
		if (ls->kind == DLK_LAYER_EMBEDDING && reads_input)
			io->ids = 1;
	}
	io->output = m->task == DLK_TASK_REGRESSION || m->task == DLK_TASK_IMAGE ? "output" : "logits";
	io->probabilities = m->task == DLK_TASK_CLASSIFICATION || m->task == DLK_TASK_LM || m->task == DLK_TASK_MULTILABEL
	                    ? "probabilities" : NULL;
}

int dlk_onnx_export(const struct dlk_bundle *b, enum dlk_input_form form, struct dlk_onnx_external *ext,
                    struct dlk_buf *out, struct dlk_err *err)
{
	struct dlk_net net = DLK_NET_INIT;
	struct graph g = { 0 };
	struct dlk_onnx_io io;
	struct dlk_buf gr = DLK_BUF_INIT, op = DLK_BUF_INIT, m = DLK_BUF_INIT;
	int64_t in_dims[4], out_dims[4];
	int n_in, n_out, rc = -1;
	char doc[256];

	/* the shapes and the parameters' layout, as serving builds them (weights counted against them) */
	if (dlk_bundle_net(b, dlk_backend_cpu(), &net, err))
		return -1;
	/* what does not fit one protobuf (less room for the graph) goes to the external data file */
	size_t limit = ext && ext->max_inline ? ext->max_inline : DLK_ONNX_MAX_BYTES;
	int big = graph_bytes(b, &net) > (double)limit - (limit > (128u << 20) ? (double)(64u << 20) : 0.0);
	if (big && !ext) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the model's %.0f MiB of weights and constants do not fit one ONNX protobuf "
		         "(%.0f MiB)", graph_bytes(b, &net) / (1 << 20), (double)limit / (1 << 20));
		dlk_err_hint(err, "write its weights as ONNX external data, a file beside the model (dlk export --external-data)");
		goto out;
	}
	if (ext) {
		ext->used = ext->always || big;
		g.ext = ext->used ? ext : NULL;
	}
	g.b = b;
	g.net = &net;
	g.name = xcalloc((size_t)net.n_layers + 1, sizeof(*g.name));
	g.rank = xcalloc((size_t)net.n_layers + 1, sizeof(*g.rank));
	dlk_onnx_io_of(b, &io);
	g.ids = io.ids;
	snprintf(g.cur, sizeof(g.cur), "input");
	in_dims[0] = -1;
	if (b->model.input_rank == 1 || g.ids) {
		in_dims[1] = (int64_t)net.input_size;
		n_in = 2;
		g.rank[0] = 2;
	} else {
		for (int d = 0; d < 3; d++)
			in_dims[1 + d] = net.input[d];
		n_in = 4;
		g.rank[0] = 4;
	}
	if (form == DLK_INPUT_RAW && !g.ids) /* token ids are never scaled */
		add_scaling(&g, b);
	snprintf(g.name[0], NAME_MAX_LEN, "%s", g.cur);
	for (int i = 0; i < net.n_layers; i++) {
		const struct dlk_layer *L = &net.layers[i];
		size_t k = 0;
		while (k < sizeof(layer_map) / sizeof(layer_map[0]) && layer_map[k].kind != L->spec.kind)
			k++;
		if (k == sizeof(layer_map) / sizeof(layer_map[0])) {
			char w[256];
			dlk_layer_where(w, sizeof(w), i, &L->spec, "model.json");
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: this layer kind has no ONNX mapping yet", w);
			goto out;
		}
		layer_map[k].map(&g, L, i);
	}

	/* the outputs by task: classification and multilabel give logits and probabilities (softmax,
	 * sigmoid) [batch, classes]; a language model its logits [batch, T, vocab] and their softmax;
	 * regression its values [batch, n] and image-to-image its image [batch, C, H, W] as "output" */
	const int *o = net.n_layers ? net.layers[net.n_layers - 1].out : net.input;
	const char *out_name = io.output, *out_doc = "one per class";
	int r = 2;
	out_dims[0] = -1;
	out_dims[1] = net.n_classes;
	if (b->model.task == DLK_TASK_LM) {
		r = 3;
		out_dims[1] = (int64_t)o[0] * o[1];
		out_dims[2] = o[2];
		out_doc = "one per position and token of the vocabulary";
	} else if (b->model.task == DLK_TASK_IMAGE) {
		r = 4;
		for (int d = 0; d < 3; d++)
			out_dims[1 + d] = o[d];
		out_doc = "the model's image";
	} else if (b->model.task == DLK_TASK_REGRESSION) {
		out_doc = "the predicted values";
	}
	n_out = r;
	final_output(&g, net.n_layers, r, out_name);
	if (b->model.task == DLK_TASK_CLASSIFICATION || b->model.task == DLK_TASK_LM) {
		struct attr axis = { "axis", ATTR_TYPE_INT, -1, 0, NULL, 0, NULL };
		if (b->model.task == DLK_TASK_CLASSIFICATION)
			axis.i = 1;
		op1(&g, "Softmax", "logits", "probabilities", &axis, 1);
	} else if (b->model.task == DLK_TASK_MULTILABEL) {
		op1(&g, "Sigmoid", "logits", "probabilities", NULL, 0);
	}

	dlk_buf_add(&gr, g.nodes.data, g.nodes.len);
	dlk_pb_str(&gr, GRAPH_NAME, meta_str(b->meta, "name", NULL) ? meta_str(b->meta, "name", NULL) : "model");
	dlk_buf_add(&gr, g.inits.data, g.inits.len);
	snprintf(doc, sizeof(doc), "%s", g.ids ? "token ids (int64) as the bundle's tokenizer makes them"
	         : form == DLK_INPUT_RAW
	         ? "raw values as training read them (pixels 0..255); the graph scales them: (v * scale - mean) / std"
	         : "the network's input: raw values already scaled as (v * scale - mean) / std");
	dlk_pb_str(&gr, GRAPH_DOC, "exported by dlk " DLK_VERSION " from a dlk model bundle");
	value_info(&gr, GRAPH_INPUT, "input", g.ids ? DT_INT64 : DT_FLOAT, in_dims, n_in, doc);
	if (b->model.task == DLK_TASK_CLASSIFICATION || b->model.task == DLK_TASK_LM)
		value_info(&gr, GRAPH_OUTPUT, "probabilities", DT_FLOAT, out_dims, n_out,
		           "softmax of the logits (over the last axis)");
	else if (b->model.task == DLK_TASK_MULTILABEL)
		value_info(&gr, GRAPH_OUTPUT, "probabilities", DT_FLOAT, out_dims, n_out, "sigmoid of each logit");
	value_info(&gr, GRAPH_OUTPUT, out_name, DT_FLOAT, out_dims, n_out, out_doc);

	dlk_pb_int(&m, MODEL_IR_VERSION, DLK_ONNX_IR_VERSION);
	dlk_pb_str(&m, MODEL_PRODUCER_NAME, "dlk");
	dlk_pb_str(&m, MODEL_PRODUCER_VERSION, DLK_VERSION);
	dlk_pb_str(&m, MODEL_DOMAIN, "dlk");
	dlk_pb_str(&m, MODEL_DOC, "a dlk model bundle exported to ONNX");
	dlk_pb_msg(&m, MODEL_GRAPH, &gr);
	dlk_pb_str(&op, OPSET_DOMAIN, "");
	dlk_pb_int(&op, OPSET_VERSION, DLK_ONNX_OPSET);
	dlk_pb_msg(&m, MODEL_OPSET, &op);
	add_metadata(&m, b, form);
	if (m.len > DLK_ONNX_MAX_BYTES) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the model's graph takes %zu MiB, more than one ONNX protobuf holds (2 GiB)",
		         m.len >> 20);
		goto out;
	}
	dlk_buf_add(out, m.data, m.len);
	rc = 0;
out:
	dlk_net_release(&net);
	free(g.name);
	free(g.rank);
	dlk_buf_release(&g.nodes);
	dlk_buf_release(&g.inits);
	dlk_buf_release(&gr);
	dlk_buf_release(&op);
	dlk_buf_release(&m);
	return rc;
}
