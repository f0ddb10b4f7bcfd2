/* Blocks in a project file: model.blocks.NAME defined once, "- block: NAME" with repeat and the
 * values of the block's $placeholders, names local to each repetition, `input` the block's input;
 * errors name model.blocks.NAME[i] or model.layers[i] with file:line; the resolved file dumps to
 * a flat list that loads back to the same graph. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#include <stdlib.h>
#include <string.h>

#include "lib/project/layers.h"
#include "lib/project/project.h"

#define HEAD                                                  \
	"name: b\n"                                           \
	"data: {format: csv, train: {source: t.csv}}\n"       \
	"model:\n"                                            \
	"  input: [1, 8, 8]\n"

/* a residual block with an identity skip, one with a projection, used with repeat */
static const char *resnet =
	HEAD
	"  blocks:\n"
	"    basic:\n"                                                       /* line 6 */
	"      - conv2d: {filters: $filters, padding: 1}\n"
	"      - relu\n"
	"      - conv2d: {filters: $filters, padding: 1, name: c2}\n"
	"      - add: {inputs: [input, c2]}\n"                               /* line 10 */
	"      - relu\n"
	"    down:\n"
	"      - conv2d: {filters: $filters, stride: 2, padding: 1, name: c1}\n"
	"      - relu\n"
	"      - conv2d: {filters: $filters, padding: 1, name: c2}\n"
	"      - conv2d: {filters: $filters, kernel: 1, stride: 2, inputs: [input], name: skip}\n"
	"      - add: {inputs: [c2, skip]}\n"
	"      - relu\n"
	"  layers:\n"
	"    - conv2d: {filters: 4, padding: 1, name: stem}\n"               /* line 20: layers[0] */
	"    - block: basic\n"
	"      repeat: 2\n"
	"      filters: 4\n"
	"    - {block: down, filters: 8, name: stage2}\n"                   /* line 24: layers[2] */
	"    - globalavgpool\n"
	"    - dense: {units: 3}\n";

static void test_resnet(void)
{
	struct dlk_project *p = load(resnet);
	CHECK_MSG(p != NULL, "the blocks load (%s)", spec_test_err.msg);
	if (!p)
		return;
	const struct dlk_model *m = &p->model;
	/* stem, 2 x 5, 6, globalavgpool, dense */
	CHECK(m->n_layers == 1 + 10 + 6 + 2);
	CHECK(m->n_blocks == 2);
	/* the first use's first layer reads the stem; its add reads the block's input and c2 */
	CHECK(m->layers[1].kind == DLK_LAYER_CONV2D && m->layers[1].filters == 4 && m->layers[1].n_inputs == 0);
	CHECK(m->layers[4].kind == DLK_LAYER_ADD && m->layers[4].inputs[0] == 0 && m->layers[4].inputs[1] == 3);
	CHECK_STR(m->layers[3].name, "layers.1.0.c2");
	CHECK_STR(m->layers[0].name, "stem");
	/* the second repetition: its input is the first's last layer, its c2 its own */
	CHECK(m->layers[9].kind == DLK_LAYER_ADD && m->layers[9].inputs[0] == 5 && m->layers[9].inputs[1] == 8);
	CHECK_STR(m->layers[8].name, "layers.1.1.c2");
	CHECK_STR(m->layers[5].name, "_5"); /* read by index, so named for the dump */
	/* the projection block: the use's values, the skip reads the block's input */
	CHECK(m->layers[11].filters == 8 && m->layers[11].stride == 2);
	CHECK(m->layers[14].kernel == 1 && m->layers[14].n_inputs == 1 && m->layers[14].inputs[0] == 10);
	CHECK(m->layers[15].inputs[0] == 13 && m->layers[15].inputs[1] == 14);
	CHECK_STR(m->layers[16].name, "stage2"); /* the use's name names its output */
	CHECK_STR(m->layers[13].name, "stage2.0.c2");
	/* where each was written */
	CHECK(m->layers[3].line == 9 && m->layers[8].line == 9 && m->layers[17].line == 25);
	char w[200];
	dlk_layer_path(w, sizeof(w), 8, &m->layers[8]);
	CHECK_STR(w, "model.blocks.basic[2] (model.layers[1], repeat 2 of 2)");
	dlk_layer_path(w, sizeof(w), 14, &m->layers[14]);
	CHECK_STR(w, "model.blocks.down[3] (model.layers[2])");
	dlk_layer_path(w, sizeof(w), 17, &m->layers[17]);
	CHECK_STR(w, "model.layers[3]");

	/* the resolved file is the flat graph; it loads back to the same layers */
	char *d1 = project_dump_yaml(p);
	CHECK_CONTAINS(d1, "blocks: {}");
	CHECK_CONTAINS(d1, "- add: {inputs: [_5, layers.1.1.c2]}");
	struct dlk_project *q = load(d1);
	CHECK_MSG(q != NULL, "the dump loads again (%s)", spec_test_err.msg);
	if (q) {
		char *d2 = project_dump_yaml(q);
		CHECK_STR(d2, d1);
		CHECK(q->model.n_layers == m->n_layers);
		for (int i = 0; i < m->n_layers && i < q->model.n_layers; i++)
			CHECK_MSG(q->model.layers[i].kind == m->layers[i].kind &&
			                  q->model.layers[i].n_inputs == m->layers[i].n_inputs &&
			                  q->model.layers[i].inputs[0] == m->layers[i].inputs[0] &&
			                  q->model.layers[i].inputs[1] == m->layers[i].inputs[1],
			          "layer %d reads back the same", i);
		free(d2);
		project_free(q);
	}
	free(d1);
	project_free(p);
}

/* a transformer-style block (the GPT-2 shape, with dense in place of attention): two residual
 * adds, each of the block's input or an inner layer; blocks may follow layers in the file */
static void test_pre_norm_block(void)
{
	const char *y = "name: b\n"
	                "data: {format: csv, train: {source: t.csv}}\n"
	                "model:\n"
	                "  input: [6]\n"
	                "  layers:\n"
	                "    - dense: {units: 8}\n"
	                "    - {block: layer, repeat: 3, width: 16}\n"
	                "    - dense: {units: 2}\n"
	                "  blocks:\n"
	                "    layer:\n"
	                "      - layernorm\n"
	                "      - dense: {units: 8, name: mix}\n"
	                "      - add: {inputs: [input, mix], name: h}\n"
	                "      - layernorm\n"
	                "      - dense: {units: $width}\n"
	                "      - gelu\n"
	                "      - dense: {units: 8, name: out}\n"
	                "      - add: {inputs: [h, out]}\n";
	struct dlk_project *p = load(y);
	CHECK_MSG(p != NULL, "a pre-norm block loads (%s)", spec_test_err.msg);
	if (!p)
		return;
	const struct dlk_model *m = &p->model;
	CHECK(m->n_layers == 1 + 3 * 8 + 1);
	for (int r = 0; r < 3; r++) {
		int b = 1 + 8 * r, in = b - 1;
		CHECK_MSG(m->layers[b + 2].inputs[0] == in && m->layers[b + 2].inputs[1] == b + 1, "rep %d first add", r);
		CHECK_MSG(m->layers[b + 7].inputs[0] == b + 2 && m->layers[b + 7].inputs[1] == b + 6, "rep %d second add", r);
		CHECK(m->layers[b + 4].units == 16);
	}
	CHECK(m->layers[25].kind == DLK_LAYER_DENSE && m->layers[25].n_inputs == 0);
	project_free(p);
}

/* a use with inputs: its first layer reads that layer, not the one before it */
static void test_use_inputs(void)
{
	const char *y = HEAD "  blocks: {b: [conv2d: {filters: 2, padding: 1}, relu]}\n"
	                     "  layers:\n"
	                     "    - conv2d: {filters: 3, padding: 1, name: a}\n"
	                     "    - conv2d: {filters: 3, padding: 1}\n"
	                     "    - {block: b, inputs: [a], name: side}\n"
	                     "    - globalavgpool: {inputs: [side]}\n"
	                     "    - dense: {units: 2}\n";
	struct dlk_project *p = load(y);
	CHECK_MSG(p != NULL, "loads (%s)", spec_test_err.msg);
	if (!p)
		return;
	CHECK(p->model.layers[2].n_inputs == 1 && p->model.layers[2].inputs[0] == 0);
	CHECK(p->model.layers[4].inputs[0] == 3);
	project_free(p);
}

static void test_errors(void)
{
	/* an inner layer's bad value names the block, its position and the line */
	const char *msg = load_msg(HEAD "  blocks:\n"
	                                "    b:\n"
	                                "      - relu\n"
	                                "      - conv2d: {filters: $f, kernal: 3}\n"
	                                "  layers:\n"
	                                "    - {block: b, f: 2}\n"
	                                "    - flatten\n"
	                                "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "dlk.yaml:8:");
	CHECK_CONTAINS(msg, "model.blocks.b[1].conv2d.kernal: unknown key 'kernal'");
	/* once, not once per repetition */
	msg = load_msg(HEAD "  blocks: {b: [conv2d: {filters: 0}]}\n"
	                    "  layers:\n"
	                    "    - {block: b, repeat: 3}\n"
	                    "    - flatten\n"
	                    "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "model.blocks.b[0].conv2d.filters");
	CHECK(!strstr(msg, "more problem"));
	/* a placeholder without a value, a value without a placeholder, an unknown block */
	msg = load_msg(HEAD "  blocks: {b: [conv2d: {filters: $f}]}\n"
	                    "  layers:\n"
	                    "    - {block: b, filterz: 3}\n"
	                    "    - {block: c}\n"
	                    "    - flatten\n"
	                    "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "dlk.yaml:7:");
	CHECK_CONTAINS(msg, "model.layers[0]: block 'b' needs a value for $f (used at line 5)");
	CHECK_CONTAINS(msg, "model.layers[0].filterz: block 'b' has no $filterz");
	CHECK_CONTAINS(msg, "dlk.yaml:8:");
	CHECK_CONTAINS(msg, "model.layers[1].block: no block named 'c' in model.blocks");
	/* a name inside the block is local: the next repetition or the top level cannot reach it by it */
	msg = load_msg(HEAD "  blocks: {b: [conv2d: {filters: 1, padding: 1, name: x}, relu]}\n"
	                    "  layers:\n"
	                    "    - {block: b}\n"
	                    "    - add: {inputs: [x, input]}\n"
	                    "    - flatten\n"
	                    "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "model.layers[1].add.inputs: no layer before this one is named 'x'");
	/* inside a block, an earlier top-level name is out of scope too */
	msg = load_msg(HEAD "  blocks: {b: [add: {inputs: [input, stem]}]}\n"
	                    "  layers:\n"
	                    "    - conv2d: {filters: 1, padding: 1, name: stem}\n"
	                    "    - {block: b}\n"
	                    "    - flatten\n"
	                    "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "dlk.yaml:5:");
	CHECK_CONTAINS(msg, "model.blocks.b[0].add.inputs: no layer before this one is named 'stem' (name one with "
	                    "'name: ...', or say 'input' for the block's input)");
	/* a shape error inside a use names the block, the use and the repetition */
	msg = load_msg(HEAD "  blocks: {b: [conv2d: {filters: 2, stride: 2}]}\n"
	                    "  layers:\n"
	                    "    - {block: b, repeat: 3}\n"
	                    "    - flatten\n"
	                    "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "dlk.yaml:5:");
	CHECK_CONTAINS(msg, "model.blocks.b[0] (model.layers[0], repeat 3 of 3): conv2d window 3 does not fit its 1x1");
	/* too many layers once repeated; blocks do not nest; the use's name is unique */
	msg = load_msg(HEAD "  blocks: {b: [relu, relu]}\n"
	                    "  layers:\n"
	                    "    - {block: b, repeat: 200}\n");
	CHECK_CONTAINS(msg, "model.layers: has 400 layers (its blocks repeated), more than the limit of 256");
	msg = load_msg(HEAD "  blocks: {a: [relu], b: [{block: a}]}\n"
	                    "  layers:\n"
	                    "    - {block: b}\n");
	CHECK_CONTAINS(msg, "model.blocks.b[0]: a block cannot use another block");
	msg = load_msg(HEAD "  blocks: {b: [relu]}\n"
	                    "  layers:\n"
	                    "    - relu: {name: r}\n"
	                    "    - {block: b, name: r}\n"
	                    "    - flatten\n"
	                    "    - dense: {units: 2}\n");
	CHECK_CONTAINS(msg, "model.layers[1].name: 'r' already names model.layers[0]");
	msg = load_msg(HEAD "  blocks: {b: [relu]}\n"
	                    "  layers:\n"
	                    "    - {block: b, repeat: 0}\n");
	CHECK_CONTAINS(msg, "model.layers[0].repeat: expected how many times the block follows itself, 1 to 256");
}

int main(void)
{
	test_resnet();
	test_pre_norm_block();
	test_use_inputs();
	test_errors();
	return CHECK_DONE();
}
