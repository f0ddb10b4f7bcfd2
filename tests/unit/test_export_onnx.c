/* The ONNX writer: protobuf's wire format byte for byte (the encoding guide's own examples), and
 * the graph each layer kind maps to, read back with a small protobuf reader written here
 * (independent of the writer): node order and operators, the reshape a flat input needs before
 * a convolution, the initializers' shapes and the first scaling nodes. t1780 runs the result in
 * ONNX Runtime. */
#include "check.h"

#include "lib/export/onnx.h"
#include "lib/export/pbwrite.h"

#include <stdint.h>
#include <stdlib.h>

static int bytes_are(const struct dlk_buf *b, const unsigned char *want, size_t n)
{
	return b->len == n && !memcmp(b->data, want, n);
}

/* ---- a reader for the test: the fields of one message ---- */
struct field {
	int num, wire;
	uint64_t v;             /* varint / fixed32 */
	const unsigned char *p; /* length-delimited */
	size_t len;
};

static int read_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	*v = 0;
	for (int s = 0; s < 64 && *p < end; s += 7) {
		unsigned char c = *(*p)++;
		*v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return 0;
	}
	return -1;
}

/* the next field of [*p, end); 1 when one was read, 0 at the end, -1 when malformed */
static int next_field(const unsigned char **p, const unsigned char *end, struct field *f)
{
	uint64_t k;

	if (*p == end)
		return 0;
	if (read_varint(p, end, &k))
		return -1;
	f->num = (int)(k >> 3);
	f->wire = (int)(k & 7);
	if (f->wire == 0)
		return read_varint(p, end, &f->v) ? -1 : 1;
	if (f->wire == 5) {
		if (end - *p < 4)
			return -1;
		memcpy(&f->v, *p, 4);
		*p += 4;
		return 1;
	}
	if (f->wire == 2) {
		uint64_t n;
		if (read_varint(p, end, &n) || n > (uint64_t)(end - *p))
			return -1;
		f->p = *p;
		f->len = (size_t)n;
		*p += n;
		return 1;
	}
	return -1;
}

/* the first field `num` of a message, or NULL */
static int find(const unsigned char *p, size_t len, int num, int nth, struct field *out)
{
	const unsigned char *end = p + len;
	int r;

	while ((r = next_field(&p, end, out)) == 1)
		if (out->num == num && nth-- == 0)
			return 1;
	return 0;
}

static void str_of(const struct field *f, char *buf, size_t n)
{
	snprintf(buf, n, "%.*s", (int)f->len, (const char *)f->p);
}

/* the graph's node operators joined by spaces */
static void ops_of(const struct dlk_buf *model, char *out, size_t n)
{
	struct field g, node, op;
	out[0] = 0;
	if (!find((const unsigned char *)model->data, model->len, 7, 0, &g))
		return;
	for (int i = 0; find(g.p, g.len, 1, i, &node); i++) {
		char s[32];
		if (!find(node.p, node.len, 4, 0, &op))
			return;
		str_of(&op, s, sizeof(s));
		if (i)
			strncat(out, " ", n - strlen(out) - 1);
		strncat(out, s, n - strlen(out) - 1);
	}
}

static void test_wire_format(void)
{
	struct dlk_buf b = DLK_BUF_INIT;
	static const unsigned char v150[] = { 0x08, 0x96, 0x01 };
	static const unsigned char neg1[] = { 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const unsigned char str[] = { 0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g' };
	static const unsigned char one[] = { 0x15, 0x00, 0x00, 0x80, 0x3f };
	static const unsigned char emb[] = { 0x1a, 0x03, 0x08, 0x96, 0x01 };
	static const unsigned char raw[] = { 0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x00, 0x00 };
	const float fl[2] = { -1.0f, 0.0f };
	struct dlk_buf inner = DLK_BUF_INIT;

	dlk_pb_int(&b, 1, 150);
	CHECK_MSG(bytes_are(&b, v150, sizeof(v150)), "int 150 in field 1 is 08 96 01 (the encoding guide's example)");
	dlk_buf_reset(&b);
	dlk_pb_int(&b, 3, -1);
	CHECK_MSG(bytes_are(&b, neg1, sizeof(neg1)), "a negative int64 takes ten bytes");
	dlk_buf_reset(&b);
	dlk_pb_str(&b, 2, "testing");
	CHECK_MSG(bytes_are(&b, str, sizeof(str)), "a string is key, length, bytes");
	dlk_buf_reset(&b);
	dlk_pb_float(&b, 2, 1.0f);
	CHECK_MSG(bytes_are(&b, one, sizeof(one)), "a float is fixed32, little-endian");
	dlk_buf_reset(&b);
	dlk_pb_int(&inner, 1, 150);
	dlk_pb_msg(&b, 3, &inner);
	CHECK_MSG(bytes_are(&b, emb, sizeof(emb)), "an embedded message is length-delimited");
	dlk_buf_reset(&b);
	dlk_pb_raw_floats(&b, fl, 2);
	CHECK_MSG(bytes_are(&b, raw, sizeof(raw)), "raw floats are little-endian IEEE bits");
	dlk_buf_reset(&b);
	dlk_pb_varint(&b, UINT64_MAX);
	CHECK_MSG(b.len == 10 && (unsigned char)b.data[9] == 0x01, "the largest varint takes ten bytes");
	dlk_buf_release(&inner);
	dlk_buf_release(&b);
}

/* a bundle as dlk_bundle_read leaves it, with every weight 0.5 */
static void make_bundle(struct dlk_bundle *b, const int input[3], int rank, const struct dlk_layer_spec *layers,
                        int n, size_t n_weights)
{
	*b = (struct dlk_bundle)DLK_BUNDLE_INIT;
	b->meta = cJSON_Parse("{\"name\":\"t\",\"metrics\":{\"test_accuracy\":0.5},"
	                      "\"provenance\":{\"dlk_version\":\"0.0.1\"}}");
	memcpy(b->model.input, input, sizeof(b->model.input));
	b->model.input_rank = rank;
	b->model.layers = malloc(sizeof(*layers) * (size_t)n);
	memcpy(b->model.layers, layers, sizeof(*layers) * (size_t)n);
	b->model.n_layers = n;
	b->n_classes = 3;
	b->n_weights = n_weights;
	b->weights = malloc(sizeof(float) * n_weights);
	for (size_t i = 0; i < n_weights; i++)
		b->weights[i] = 0.5f;
	snprintf(b->weights_sha256, sizeof(b->weights_sha256), "%064d", 0);
	b->has_scaling = 1;
	b->scale = 1.0f / 255;
	b->mean = 0.25f;
	b->std = 0.5f;
}

static void test_every_kind(void)
{
	const int input[3] = { 1, 8, 8 };
	struct dlk_layer_spec L[] = {
		{ .kind = DLK_LAYER_CONV2D, .filters = 2, .kernel = 3, .stride = 2, .padding = 1 }, /* 2x4x4: 18+2 */
		{ .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_MAXPOOL, .size = 2, .stride = 1 },                              /* 2x3x3 */
		{ .kind = DLK_LAYER_TANH },
		{ .kind = DLK_LAYER_FLATTEN },                                                      /* 18 */
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.5f },
		{ .kind = DLK_LAYER_DENSE, .units = 4 },                                            /* 72+4 */
		{ .kind = DLK_LAYER_SIGMOID },
		{ .kind = DLK_LAYER_DENSE, .units = 3 },                                            /* 12+3 */
	};
	struct dlk_bundle b;
	struct dlk_buf out = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char ops[512];
	struct field f, g, t, d;

	make_bundle(&b, input, 3, L, 9, 20 + 76 + 15);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_RAW, NULL, &out, &err) == 0, "every kind exports (%s)", err.msg);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Mul Sub Div Conv Relu MaxPool Tanh Flatten Gemm Sigmoid Gemm Identity Softmax");
	CHECK(find((const unsigned char *)out.data, out.len, 1, 0, &f) && f.v == DLK_ONNX_IR_VERSION);
	CHECK(find((const unsigned char *)out.data, out.len, 8, 0, &f) && find(f.p, f.len, 2, 0, &g) &&
	      g.v == DLK_ONNX_OPSET);
	/* the conv's weight initializer (after the three scalars) is [2, 1, 3, 3] */
	CHECK(find((const unsigned char *)out.data, out.len, 7, 0, &g) && find(g.p, g.len, 5, 3, &t));
	{
		char name[64];
		int64_t dims[4] = { 0 };
		int nd = 0;
		find(t.p, t.len, 8, 0, &f);
		str_of(&f, name, sizeof(name));
		CHECK_STR(name, "layers.0.weight");
		while (nd < 4 && find(t.p, t.len, 1, nd, &d))
			dims[nd++] = (int64_t)d.v;
		CHECK_MSG(nd == 4 && dims[0] == 2 && dims[1] == 1 && dims[2] == 3 && dims[3] == 3, "conv weight is [2,1,3,3]");
		CHECK_MSG(find(t.p, t.len, 9, 0, &f) && f.len == 18 * 4, "its raw data holds 18 floats");
	}
	dlk_buf_reset(&out);
	CHECK(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &out, &err) == 0);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Conv Relu MaxPool Tanh Flatten Gemm Sigmoid Gemm Identity Softmax");
	dlk_buf_release(&out);
	dlk_bundle_release(&b);
}

static void test_flat_input_and_mismatch(void)
{
	const int input[3] = { 1, 1, 6 };
	struct dlk_layer_spec L[] = { { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_bundle b;
	struct dlk_buf out = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char ops[256];

	make_bundle(&b, input, 1, L, 1, 21);
	CHECK(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &out, &err) == 0);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Gemm Identity Softmax");
	dlk_buf_reset(&out);
	/* weights that do not match the architecture are refused, never written */
	b.n_weights = 20;
	CHECK(dlk_onnx_export(&b, DLK_INPUT_RAW, NULL, &out, &err) == -1 && out.len == 0);
	CHECK_CONTAINS(err.msg, "20 weights for a model of 21 parameters");
	dlk_buf_release(&out);
	dlk_bundle_release(&b);

	/* a name that is not UTF-8 (model.json is not checked for it) cannot go into a protobuf string */
	make_bundle(&b, input, 1, L, 1, 21);
	cJSON_ReplaceItemInObject(b.meta, "name", cJSON_CreateString("bad\xff"));
	CHECK(dlk_onnx_export(&b, DLK_INPUT_RAW, NULL, &out, &err) == 0);
	{
		struct field g, n;
		char name[32] = "";
		if (find((const unsigned char *)out.data, out.len, 7, 0, &g) && find(g.p, g.len, 2, 0, &n))
			str_of(&n, name, sizeof(name));
		CHECK_STR(name, "model");
		CHECK_MSG(!memmem(out.data, out.len, "bad\xff", 4), "the bytes are nowhere in the model");
	}
	dlk_buf_reset(&out);
	dlk_bundle_release(&b);

	/* a flat input reaching a convolution is reshaped to the image it is */
	struct dlk_layer_spec C[] = { { .kind = DLK_LAYER_CONV2D, .filters = 3, .kernel = 1, .stride = 1 },
		                      { .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DENSE, .units = 3 } };
	make_bundle(&b, input, 1, C, 3, 6 + 54 + 3);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &out, &err) == 0, "conv on a flat input (%s)", err.msg);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Reshape Conv Flatten Gemm Identity Softmax");
	dlk_buf_release(&out);
	dlk_bundle_release(&b);

	/* a dense over each position of a sequence [1, T, D] is nn.Linear over the last axis: MatMul
	 * with the weight transposed, then the bias, never a Gemm over a flattened row */
	const int seq[3] = { 1, 3, 4 };
	struct dlk_layer_spec S[] = { { .kind = DLK_LAYER_DENSE, .units = 2 }, { .kind = DLK_LAYER_FLATTEN },
		                      { .kind = DLK_LAYER_DENSE, .units = 3 } };
	make_bundle(&b, seq, 3, S, 3, 4 * 2 + 2 + 6 * 3 + 3);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &out, &err) == 0, "dense over positions (%s)", err.msg);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Transpose MatMul Add Flatten Gemm Identity Softmax");
	dlk_buf_release(&out);
	dlk_bundle_release(&b);
}

/* the n-th initializer's name, or "" */
static void init_name(const struct dlk_buf *model, int nth, char *name, size_t n)
{
	struct field g, t, f;
	name[0] = 0;
	if (find((const unsigned char *)model->data, model->len, 7, 0, &g) && find(g.p, g.len, 5, nth, &t) &&
	    find(t.p, t.len, 8, 0, &f))
		str_of(&f, name, n);
}

/* the graph's input element type (onnx TensorProto.DataType) */
static int input_type(const struct dlk_buf *model)
{
	struct field g, vi, ty, tt, el;
	if (find((const unsigned char *)model->data, model->len, 7, 0, &g) && find(g.p, g.len, 11, 0, &vi) &&
	    find(vi.p, vi.len, 2, 0, &ty) && find(ty.p, ty.len, 1, 0, &tt) && find(tt.p, tt.len, 1, 0, &el))
		return (int)el.v;
	return -1;
}

/* a graph: a residual add reads two earlier layers, a concat two branches, batch norm its running
 * statistics; the DAG's nodes come in layer order */
static void test_graph_kinds(void)
{
	const int input[3] = { 2, 4, 4 };
	struct dlk_layer_spec L[] = {
		{ .kind = DLK_LAYER_CONV2D, .filters = 2, .kernel = 3, .stride = 1, .padding = 1 }, /* 0: 36+2 */
		{ .kind = DLK_LAYER_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f },                   /* 1: 2+2, 5 state */
		{ .kind = DLK_LAYER_ADD, .n_inputs = 2, .inputs = { -1, 1 } },                     /* 2: input + bn */
		{ .kind = DLK_LAYER_AVGPOOL, .size = 2, .stride = 2 },                             /* 3: 2x2x2 */
		{ .kind = DLK_LAYER_UPSAMPLE, .scale = 2, .mode = 1 },                             /* 4: 2x4x4 */
		{ .kind = DLK_LAYER_CONCAT, .n_inputs = 2, .inputs = { 2, 4 } },                   /* 5: 4x4x4 */
		{ .kind = DLK_LAYER_CONVTRANSPOSE2D, .filters = 1, .kernel = 2, .stride = 2 },     /* 6: 1x8x8: 16+1 */
		{ .kind = DLK_LAYER_GLOBALAVGPOOL },                                               /* 7: 1 */
		{ .kind = DLK_LAYER_DENSE, .units = 3 },                                           /* 8: 3+3 */
	};
	struct dlk_bundle b;
	struct dlk_buf out = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char ops[512], name[64];

	make_bundle(&b, input, 3, L, 9, 38 + 9 + 17 + 6);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &out, &err) == 0, "a graph exports (%s)", err.msg);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Conv BatchNormalization Add AveragePool Resize Concat ConvTranspose GlobalAveragePool Flatten "
	               "Gemm Identity Softmax");
	/* conv weight, bias, then batch norm's weight, bias, running_mean, running_var */
	init_name(&out, 4, name, sizeof(name));
	CHECK_STR(name, "layers.1.running_mean");
	init_name(&out, 5, name, sizeof(name));
	CHECK_STR(name, "layers.1.running_var");
	CHECK(input_type(&out) == 1);
	dlk_buf_release(&out);
	dlk_bundle_release(&b);
}

/* a language model: int64 ids into a Gather, the head tied to the table (no weight of its own),
 * logits [batch, T, vocab] and their softmax over the last axis */
static void test_text_kinds(void)
{
	const int input[3] = { 1, 1, 4 };
	struct dlk_layer_spec L[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 5, .dim = 4, .positions = 4 },    /* 20 + 16 */
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },                             /* 4 + 4 */
		{ .kind = DLK_LAYER_GELU, .approximate = 0 },
		{ .kind = DLK_LAYER_SOFTMAX },
		{ .kind = DLK_LAYER_DENSE, .units = 5, .tie = 1 },                          /* the table */
	};
	struct dlk_bundle b;
	struct dlk_buf out = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char ops[512];
	struct dlk_onnx_io io;

	make_bundle(&b, input, 1, L, 5, 36 + 8);
	b.model.task = DLK_TASK_LM;
	dlk_onnx_io_of(&b, &io);
	CHECK(io.ids && !strcmp(io.output, "logits") && io.probabilities);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_RAW, NULL, &out, &err) == 0, "a text model exports (%s)", err.msg);
	ops_of(&out, ops, sizeof(ops));
	/* no scaling of ids; gelu's erf form; the tied head reads layers.0.weight */
	CHECK_STR(ops, "Gather Slice Add LayerNormalization Mul Erf Add Mul Mul Softmax Transpose MatMul Identity Softmax");
	CHECK_MSG(input_type(&out) == 7, "the input is int64 token ids");
	{
		char name[64];
		int own = 0, n = 0;
		for (int k = 0; init_name(&out, k, name, sizeof(name)), name[0]; k++, n++)
			own += !strncmp(name, "layers.4.", 9);
		CHECK_MSG(n > 0 && !own, "the tied head has no initializer of its own (%d initializers)", n);
	}
	dlk_buf_release(&out);
	dlk_bundle_release(&b);

	/* a causal mask of 30,000 x 30,000 positions (3.6 GB) does not fit a protobuf: refused, not
	 * allocated and written */
	const int longseq[3] = { 1, 1, 30000 };
	struct dlk_layer_spec A[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 2, .dim = 2 },
		                      { .kind = DLK_LAYER_ATTENTION, .heads = 1, .causal = 1, .pad_id = -1 } };
	make_bundle(&b, longseq, 1, A, 2, 4 + 16 + 8);
	b.model.task = DLK_TASK_LM;
	CHECK(dlk_onnx_export(&b, DLK_INPUT_RAW, NULL, &out, &err) == -1 && out.len == 0);
	CHECK_CONTAINS(err.msg, "weights and constants do not fit one ONNX protobuf");
	dlk_buf_reset(&out);
	dlk_bundle_release(&b);

	/* an image model's output is "output" [batch, C, H, W], with no probabilities */
	const int img[3] = { 1, 2, 2 };
	struct dlk_layer_spec I[] = { { .kind = DLK_LAYER_UPSAMPLE, .scale = 2, .mode = 0 },
		                      { .kind = DLK_LAYER_RESHAPE, .target = { 1, 16 }, .target_rank = 2 } };
	make_bundle(&b, img, 3, I, 2, 0);
	b.model.task = DLK_TASK_IMAGE;
	dlk_onnx_io_of(&b, &io);
	CHECK(!io.ids && !strcmp(io.output, "output") && !io.probabilities);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &out, &err) == 0, "an image model exports (%s)", err.msg);
	ops_of(&out, ops, sizeof(ops));
	CHECK_STR(ops, "Resize Reshape Reshape Identity");
	dlk_buf_release(&out);
	dlk_bundle_release(&b);
}

/* ONNX's external data: the first weight of 8 KiB goes to the data file at offset 0, named by its
 * location, offset and length with data_location EXTERNAL; its bias of 128 bytes and the second
 * layer's 384 bytes stay raw data in the model. Without `always`, only a model past max_inline is split, and an unsplit one is the
 * same bytes as an export without ext. */
static void test_external_data(void)
{
	const int input[3] = { 1, 1, 64 };
	struct dlk_layer_spec L[] = { { .kind = DLK_LAYER_DENSE, .units = 32 }, { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_bundle b;
	struct dlk_buf out = DLK_BUF_INIT, plain = DLK_BUF_INIT, data = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_onnx_external ext = { .location = "m.onnx.data", .data = &data, .always = 1 };
	struct field g, t, f, kv, k, v;
	char name[64], key[16], val[32];

	make_bundle(&b, input, 1, L, 2, 64 * 32 + 32 + 32 * 3 + 3);
	CHECK(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, NULL, &plain, &err) == 0);
	CHECK_MSG(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, &ext, &out, &err) == 0, "external data (%s)", err.msg);
	CHECK(ext.used && data.len == 64 * 32 * 4 && out.len < plain.len - 8000);
	CHECK(!memcmp(data.data, b.weights, 64 * 32 * 4)); /* little-endian floats, as the bundle's */
	CHECK(find((const unsigned char *)out.data, out.len, 7, 0, &g));
	for (int i = 0; find(g.p, g.len, 5, i, &t); i++) {
		find(t.p, t.len, 8, 0, &f);
		str_of(&f, name, sizeof(name));
		if (!strcmp(name, "layers.0.bias")) {
			CHECK_MSG(find(t.p, t.len, 9, 0, &f) && f.len == 128 && !find(t.p, t.len, 14, 0, &f),
			          "the bias stays in the model");
			continue;
		}
		if (strcmp(name, "layers.0.weight"))
			continue;
		CHECK_MSG(!find(t.p, t.len, 9, 0, &f) && find(t.p, t.len, 14, 0, &f) && f.v == 1,
		          "the weight is external (data_location 1), no raw data");
		const char *want[3][2] = { { "location", "m.onnx.data" }, { "offset", "0" }, { "length", "8192" } };
		for (int e = 0; e < 3; e++) {
			CHECK(find(t.p, t.len, 13, e, &kv) && find(kv.p, kv.len, 1, 0, &k) && find(kv.p, kv.len, 2, 0, &v));
			str_of(&k, key, sizeof(key));
			str_of(&v, val, sizeof(val));
			CHECK_STR(key, want[e][0]);
			CHECK_STR(val, want[e][1]);
		}
	}
	/* not asked for: only past max_inline */
	dlk_buf_reset(&out);
	dlk_buf_reset(&data);
	ext.always = 0;
	CHECK(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, &ext, &out, &err) == 0);
	CHECK(!ext.used && data.len == 0 && out.len == plain.len && !memcmp(out.data, plain.data, out.len));
	dlk_buf_reset(&out);
	ext.max_inline = 4096;
	CHECK(dlk_onnx_export(&b, DLK_INPUT_PREPROCESSED, &ext, &out, &err) == 0);
	CHECK(ext.used && data.len == 64 * 32 * 4);
	dlk_buf_release(&out);
	dlk_buf_release(&plain);
	dlk_buf_release(&data);
	dlk_bundle_release(&b);
}

int main(void)
{
	test_wire_format();
	test_every_kind();
	test_flat_input_and_mismatch();
	test_graph_kinds();
	test_text_kinds();
	test_external_data();
	CHECK_STR(dlk_input_form_name(DLK_INPUT_PREPROCESSED), "preprocessed");
	CHECK(dlk_input_form_parse("raw", 3) == DLK_INPUT_RAW && dlk_input_form_parse("pixels", 6) == -1);
	return CHECK_DONE();
}
