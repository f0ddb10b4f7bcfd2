/* libFuzzer target: the pipeline file (lib/pipeline/spec.c). Whatever it accepts is a DAG: the
 * order is a permutation of the stages in which every stage comes after each stage it reads,
 * and every input names a stage or is a dataset reference. Corpus: tests/fuzz/pipeline/. */
#include "lib/pipeline/pipeline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p;

	if (!dlk_pipeline_parse((const char *)data, size, "fuzz.yaml", ".", &p, &err)) {
		int *at = calloc((size_t)p.n_stages + 1, sizeof(int));
		if (!p.name || !p.store || p.n_stages < 1 || p.n_stages > DLK_PIPELINE_MAX_STAGES)
			abort();
		for (int i = 0; i < p.n_stages; i++)
			at[i] = -1;
		for (int k = 0; k < p.n_stages; k++) {
			if (p.order[k] < 0 || p.order[k] >= p.n_stages || at[p.order[k]] >= 0)
				abort();
			at[p.order[k]] = k;
		}
		for (int i = 0; i < p.n_stages; i++) {
			const struct dlk_stage *s = &p.stages[i];
			char *down = calloc((size_t)p.n_stages, 1);
			if (!s->output || (s->kind == DLK_STAGE_PROGRAM && (!s->argv || !s->argv[0])))
				abort();
			for (int j = 0; j < s->n_inputs; j++)
				if (s->inputs[j].stage >= 0 && (s->inputs[j].stage == i || at[s->inputs[j].stage] >= at[i]))
					abort();
			dlk_pipeline_descendants(&p, i, down);
			if (!down[i])
				abort();
			free(down);
		}
		free(at);
	}
	dlk_pipeline_release(&p);
	return 0;
}
