/* libFuzzer target: the sweep: section of a project file (lib/sweep/spec.c), and what the
 * samplers make of whatever it accepts: every method's points stay in the space, and a point's
 * recorded parameters read back. Corpus: tests/fuzz/sweep/. */
#include "lib/sweep/sweep.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_sweep_spec s;
	struct dlk_sweep_obs obs[8];
	double xs[8][DLK_SWEEP_MAX_PARAMS], back[DLK_SWEEP_MAX_PARAMS];

	if (dlk_sweep_spec_parse((const char *)data, size, "fuzz.yaml", "fuzz", &s, &err))
		return 0;
	if (s.n_params < 1 || s.n_params > DLK_SWEEP_MAX_PARAMS || !s.name || !s.metric)
		abort();
	for (int m = 0; m <= DLK_SWEEP_TPE; m++) {
		if (m == DLK_SWEEP_GRID && dlk_sweep_grid_size(&s) == 0)
			continue;
		s.method = (enum dlk_sweep_method)m;
		for (int i = 0; i < 8; i++) {
			dlk_sweep_suggest(&s, obs, (size_t)i, i, xs[i]);
			for (int j = 0; j < s.n_params; j++) {
				const struct dlk_sweep_param *p = &s.params[j];
				double x = xs[i][j];
				if (p->kind == DLK_SWEEP_VALUES ? !(x >= 0 && x < p->n_values && x == floor(x))
				                                : !(x >= p->lo && x <= p->hi))
					abort();
			}
			obs[i].x = xs[i];
			obs[i].value = (double)((i * 7919) % 13);
			cJSON *j = dlk_sweep_params_json(&s, xs[i]);
			if (dlk_sweep_params_point(&s, j, back))
				abort();
			cJSON_Delete(j);
		}
	}
	dlk_sweep_spec_release(&s);
	return 0;
}
