/* The bundle's network as an ONNX graph. The graph is built in two buffers (nodes and
 * initializers) while the layers are walked; each layer kind has one function in layer_map[]
 * that appends its nodes, so a new kind is one function and one row. */
#include "lib/export/onnx.h"

#include "lib/export/pbwrite.h"
#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/utf8.h"

#include <stdio.h>
#include <string.h>

/* onnx.proto's field numbers (onnx/onnx.proto, IR version 7) */
enum {
	MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOMAIN = 4,
	MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_METADATA = 14,
	OPSET_DOMAIN = 1, OPSET_VERSION = 2,
	KV_KEY = 1, KV_VALUE = 2,
	GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_DOC = 10, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
	NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
	ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20,
	ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7,
	TENSOR_DIMS = 1, TENSOR_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9,
	DT_FLOAT = 1, DT_INT64 = 7,
	VI_NAME = 1, VI_TYPE = 2, VI_DOC = 3,
	TYPE_TENSOR = 1, TT_ELEM = 1, TT_SHAPE = 2,
	SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
};

#define NAME_MAX_LEN 64

struct graph {
	const struct dlk_bundle *b;
	struct dlk_buf nodes, inits;
	int n_nodes;
	char cur[NAME_MAX_LEN]; /* the tensor the next layer reads */
	int rank;               /* its rank: 2 ([batch, F]) or 4 ([batch, C, H, W]) */
};

struct attr {
	const char *name;
	int type;
	int64_t i;
	float f;
	const int64_t *ints;
	int n_ints;
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

/* the node reads g->cur and writes `out`, which the next layer reads */
static void chain(struct graph *g, const char *op, const char *out, const struct attr *attrs, int n_attrs)
{
	const char *in[1] = { g->cur };

	add_node(g, op, in, 1, out, attrs, n_attrs);
	snprintf(g->cur, sizeof(g->cur), "%s", out);
}

static void add_init(struct graph *g, const char *name, int dtype, const int64_t *dims, int n_dims,
                     const void *data, size_t n)
{
	struct dlk_buf t = DLK_BUF_INIT;

	for (int i = 0; i < n_dims; i++)
		dlk_pb_int(&t, TENSOR_DIMS, dims[i]);
	dlk_pb_int(&t, TENSOR_TYPE, dtype);
	dlk_pb_str(&t, TENSOR_NAME, name);
	if (dtype == DT_FLOAT) {
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

/* The layer's output tensor name. */
static void out_name(char *buf, int i)
{
	snprintf(buf, NAME_MAX_LEN, "layers.%d.out", i);
}

/* Makes g->cur the [batch, C, H, W] tensor of shape s (a flat [batch, F] one reshaped). */
static void as_image(struct graph *g, int i, const int s[3])
{
	char shape_name[NAME_MAX_LEN], out[NAME_MAX_LEN];
	int64_t dims[1] = { 4 }, shape[4] = { -1, s[0], s[1], s[2] };
	const char *in[2];

	if (g->rank == 4)
		return;
	snprintf(shape_name, sizeof(shape_name), "layers.%d.in_shape", i);
	snprintf(out, sizeof(out), "layers.%d.in", i);
	add_init(g, shape_name, DT_INT64, dims, 1, shape, 4);
	in[0] = g->cur;
	in[1] = shape_name;
	add_node(g, "Reshape", in, 2, out, NULL, 0);
	snprintf(g->cur, sizeof(g->cur), "%s", out);
	g->rank = 4;
}

/* Makes g->cur a [batch, F] tensor (a [batch, C, H, W] one flattened, C-major as dlk lays it). */
static void as_flat(struct graph *g, const char *out)
{
	struct attr axis = { "axis", ATTR_TYPE_INT, 1, 0, NULL, 0 };

	if (g->rank == 2)
		return;
	chain(g, "Flatten", out, &axis, 1);
	g->rank = 2;
}

static void weights(struct graph *g, const struct dlk_layer *L, int i, const int64_t *wdims, int n_wdims,
                    char *wname, char *bname)
{
	int64_t bdims[1] = { (int64_t)L->n_b };

	snprintf(wname, NAME_MAX_LEN, "layers.%d.weight", i);
	snprintf(bname, NAME_MAX_LEN, "layers.%d.bias", i);
	add_init(g, wname, DT_FLOAT, wdims, n_wdims, g->b->weights + L->w_off, L->n_w);
	add_init(g, bname, DT_FLOAT, bdims, 1, g->b->weights + L->b_off, L->n_b);
}

/* ---- one function per layer kind: reads g->cur, leaves its output there ---- */

static void map_dense(struct graph *g, const struct dlk_layer *L, int i)
{
	char w[NAME_MAX_LEN], b[NAME_MAX_LEN], out[NAME_MAX_LEN], flat[NAME_MAX_LEN];
	int64_t wdims[2] = { L->spec.units, L->in[2] };
	struct attr tb = { "transB", ATTR_TYPE_INT, 1, 0, NULL, 0 };
	const char *in[3];

	snprintf(flat, sizeof(flat), "layers.%d.in", i);
	as_flat(g, flat);
	weights(g, L, i, wdims, 2, w, b);
	out_name(out, i);
	in[0] = g->cur;
	in[1] = w;
	in[2] = b;
	/* y = x W^T + b: the weights stay [out, in] as PyTorch keeps them */
	add_node(g, "Gemm", in, 3, out, &tb, 1);
	snprintf(g->cur, sizeof(g->cur), "%s", out);
}

static void map_conv2d(struct graph *g, const struct dlk_layer *L, int i)
{
	const struct dlk_layer_spec *s = &L->spec;
	char w[NAME_MAX_LEN], b[NAME_MAX_LEN], out[NAME_MAX_LEN];
	int64_t groups = s->groups > 1 ? s->groups : 1; /* nn.Conv2d's groups is ONNX Conv's group */
	int64_t wdims[4] = { s->filters, L->in[0] / groups, s->kernel, s->kernel };
	int64_t k[2] = { s->kernel, s->kernel }, st[2] = { s->stride, s->stride };
	int64_t pads[4] = { s->padding, s->padding, s->padding, s->padding };
	struct attr a[4] = { { "kernel_shape", ATTR_TYPE_INTS, 0, 0, k, 2 },
		             { "strides", ATTR_TYPE_INTS, 0, 0, st, 2 },
		             { "pads", ATTR_TYPE_INTS, 0, 0, pads, 4 },
		             { "group", ATTR_TYPE_INT, groups, 0, NULL, 0 } };
	const char *in[3];

	as_image(g, i, L->in);
	weights(g, L, i, wdims, 4, w, b);
	out_name(out, i);
	in[0] = g->cur;
	in[1] = w;
	in[2] = b;
	add_node(g, "Conv", in, 3, out, a, groups > 1 ? 4 : 3);
	snprintf(g->cur, sizeof(g->cur), "%s", out);
}

static void map_maxpool(struct graph *g, const struct dlk_layer *L, int i)
{
	char out[NAME_MAX_LEN];
	int64_t k[2] = { L->spec.size, L->spec.size }, st[2] = { L->spec.stride, L->spec.stride };
	/* dlk's windows never pad and drop a partial last window: ONNX's default (floor) mode */
	struct attr a[2] = { { "kernel_shape", ATTR_TYPE_INTS, 0, 0, k, 2 },
		             { "strides", ATTR_TYPE_INTS, 0, 0, st, 2 } };

	as_image(g, i, L->in);
	out_name(out, i);
	chain(g, "MaxPool", out, a, 2);
}

static void map_flatten(struct graph *g, const struct dlk_layer *L, int i)
{
	char out[NAME_MAX_LEN];

	(void)L;
	out_name(out, i);
	as_flat(g, out);
}

static void map_activation(struct graph *g, const char *op, int i)
{
	char out[NAME_MAX_LEN];

	out_name(out, i);
	chain(g, op, out, NULL, 0);
}

static void map_relu(struct graph *g, const struct dlk_layer *L, int i) { (void)L; map_activation(g, "Relu", i); }
static void map_tanh(struct graph *g, const struct dlk_layer *L, int i) { (void)L; map_activation(g, "Tanh", i); }
static void map_sigmoid(struct graph *g, const struct dlk_layer *L, int i) { (void)L; map_activation(g, "Sigmoid", i); }

/* inference: dropout is the identity, so it adds no node (onnxruntime would drop it anyway) */
static void map_dropout(struct graph *g, const struct dlk_layer *L, int i) { (void)g; (void)L; (void)i; }

static const struct {
	enum dlk_layer_kind kind;
	void (*map)(struct graph *g, const struct dlk_layer *L, int i);
} layer_map[] = {
	{ DLK_LAYER_DENSE, map_dense },
	{ DLK_LAYER_CONV2D, map_conv2d },
	{ DLK_LAYER_MAXPOOL, map_maxpool },
	{ DLK_LAYER_FLATTEN, map_flatten },
	{ DLK_LAYER_RELU, map_relu },
	{ DLK_LAYER_TANH, map_tanh },
	{ DLK_LAYER_SIGMOID, map_sigmoid },
	{ DLK_LAYER_DROPOUT, map_dropout },
};

/* ---- the model around the graph ---- */

static void value_info(struct dlk_buf *out, int field, const char *name, const int64_t *dims, int n, const char *doc)
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
	dlk_pb_int(&tt, TT_ELEM, DT_FLOAT);
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

int dlk_onnx_export(const struct dlk_bundle *b, enum dlk_input_form form, struct dlk_buf *out, struct dlk_err *err)
{
	struct dlk_net net = DLK_NET_INIT;
	struct graph g = { b, DLK_BUF_INIT, DLK_BUF_INIT, 0, "input", 0 };
	struct dlk_buf gr = DLK_BUF_INIT, op = DLK_BUF_INIT, m = DLK_BUF_INIT;
	int64_t in_dims[4], out_dims[2];
	int n_in, rc = -1;
	const char *soft_in[1] = { "logits" };
	struct attr axis = { "axis", ATTR_TYPE_INT, 1, 0, NULL, 0 };
	char doc[256];

	/* the shapes and the parameters' layout, as serving builds them (weights counted against them) */
	if (dlk_bundle_net(b, dlk_backend_cpu(), &net, err))
		return -1;
	if (sizeof(float) * b->n_weights > DLK_ONNX_MAX_BYTES - (64u << 20)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the model's %zu MiB of weights do not fit one ONNX protobuf (2 GiB)",
		         sizeof(float) * b->n_weights >> 20);
		dlk_err_hint(err, "ONNX's external data files are not written yet");
		goto out;
	}
	in_dims[0] = -1;
	if (b->model.input_rank == 1) {
		in_dims[1] = (int64_t)net.input_size;
		n_in = 2;
		g.rank = 2;
	} else {
		for (int d = 0; d < 3; d++)
			in_dims[1 + d] = net.input[d];
		n_in = 4;
		g.rank = 4;
	}
	if (form == DLK_INPUT_RAW)
		add_scaling(&g, b);
	for (int i = 0; i < net.n_layers; i++) {
		const struct dlk_layer *L = &net.layers[i];
		size_t k = 0;
		while (k < sizeof(layer_map) / sizeof(layer_map[0]) && layer_map[k].kind != L->spec.kind)
			k++;
		int reads_other = L->spec.n_inputs > 1 || (L->spec.n_inputs == 1 && L->spec.inputs[0] != i - 1);
		if (L->spec.kind == DLK_LAYER_DENSE && (L->in[0] != 1 || L->in[1] != 1)) {
			char w[256];
			dlk_layer_where(w, sizeof(w), i, &L->spec, "model.json");
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: a dense over each position of a sequence has no ONNX mapping yet", w);
			goto out;
		}
		if (k == sizeof(layer_map) / sizeof(layer_map[0]) || reads_other || L->spec.tie) {
			char w[256];
			dlk_layer_where(w, sizeof(w), i, &L->spec, "model.json");
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s", w, reads_other ?
			         "reads a layer other than the one before it: graph models have no ONNX mapping yet" :
			         L->spec.tie ? "a head tied to an embedding's table has no ONNX mapping yet" :
			         "this layer kind has no ONNX mapping yet");
			goto out;
		}
		layer_map[k].map(&g, L, i);
	}
	/* the logits are flat [batch, classes] whatever the last layer's rank */
	as_flat(&g, "logits.flat");
	chain(&g, "Identity", "logits", NULL, 0);
	add_node(&g, "Softmax", soft_in, 1, "probabilities", &axis, 1);

	dlk_buf_add(&gr, g.nodes.data, g.nodes.len);
	dlk_pb_str(&gr, GRAPH_NAME, meta_str(b->meta, "name", NULL) ? meta_str(b->meta, "name", NULL) : "model");
	dlk_buf_add(&gr, g.inits.data, g.inits.len);
	snprintf(doc, sizeof(doc), "%s", form == DLK_INPUT_RAW
	         ? "raw values as training read them (pixels 0..255); the graph scales them: (v * scale - mean) / std"
	         : "the network's input: raw values already scaled as (v * scale - mean) / std");
	dlk_pb_str(&gr, GRAPH_DOC, "exported by dlk " DLK_VERSION " from a dlk model bundle");
	value_info(&gr, GRAPH_INPUT, "input", in_dims, n_in, doc);
	out_dims[0] = -1;
	out_dims[1] = net.n_classes;
	value_info(&gr, GRAPH_OUTPUT, "probabilities", out_dims, 2, "softmax of the logits, one per class");
	value_info(&gr, GRAPH_OUTPUT, "logits", out_dims, 2, "one per class");

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
	dlk_buf_add(out, m.data, m.len);
	rc = 0;
out:
	dlk_net_release(&net);
	dlk_buf_release(&g.nodes);
	dlk_buf_release(&g.inits);
	dlk_buf_release(&gr);
	dlk_buf_release(&op);
	dlk_buf_release(&m);
	return rc;
}
