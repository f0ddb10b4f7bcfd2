/* The model graph in a project file: names and inputs resolve to layer indices, add and
 * concat take two, and the resolved file dumps to YAML that loads back to the same graph. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#include "lib/project/layers.h"
#include "lib/project/project.h"

static const char *yaml =
	"name: g\n"
	"data: {format: csv, train: {source: t.csv}}\n"
	"model:\n"
	"  input: [1, 8, 8]\n"
	"  layers:\n"
	"    - conv2d: {filters: 4, padding: 1, name: stem}\n"
	"    - relu\n"
	"    - conv2d: {filters: 4, padding: 1, name: c2}\n"
	"    - add: {inputs: [stem, c2]}\n"
	"    - relu: {name: r}\n"
	"    - conv2d: {filters: 2, kernel: 1, inputs: input, name: side}\n"
	"    - concat: {inputs: [r, side]}\n"
	"    - globalavgpool\n"
	"    - dense: {units: 3}\n";

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *p = project_load_mem(yaml, strlen(yaml), "dlk.yaml", NULL, 0, &err);
	CHECK_MSG(p != NULL, "the graph loads (%s)", err.msg);
	if (!p)
		return CHECK_DONE();
	const struct dlk_model *m = &p->model;
	CHECK(m->n_layers == 9);
	CHECK(m->layers[3].kind == DLK_LAYER_ADD && m->layers[3].n_inputs == 2 && m->layers[3].inputs[0] == 0 &&
	      m->layers[3].inputs[1] == 2);
	CHECK(m->layers[5].n_inputs == 1 && m->layers[5].inputs[0] == -1);
	CHECK(m->layers[6].kind == DLK_LAYER_CONCAT && m->layers[6].inputs[0] == 4 && m->layers[6].inputs[1] == 5);
	CHECK(m->layers[1].n_inputs == 0 && !m->layers[1].name[0]);
	CHECK_STR(m->layers[4].name, "r");
	CHECK(m->layers[7].kind == DLK_LAYER_GLOBALAVGPOOL && m->layers[8].line == 14);

	char *d1 = project_dump_yaml(p);
	CHECK_CONTAINS(d1, "- add: {inputs: [stem, c2]}");
	CHECK_CONTAINS(d1, "- relu: {name: r}");
	CHECK_CONTAINS(d1, "- conv2d: {filters: 2, kernel: 1, stride: 1, padding: 0, groups: 1, name: side, inputs: [input]}");
	struct dlk_project *q = project_load_mem(d1, strlen(d1), "dump.yaml", NULL, 0, &err);
	CHECK_MSG(q != NULL, "the dump loads again (%s)", err.msg);
	if (q) {
		char *d2 = project_dump_yaml(q);
		CHECK_STR(d2, d1);
		CHECK(q->model.layers[6].inputs[0] == 4 && q->model.layers[6].inputs[1] == 5);
		free(d2);
		project_free(q);
	}
	free(d1);
	project_free(p);
	return CHECK_DONE();
}
