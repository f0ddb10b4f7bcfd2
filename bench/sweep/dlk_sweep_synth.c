/* The search itself, without training: dlk's samplers on a cheap objective whose optimum is
 * known (0 at lr = 0.01, n = 40, m = 0.9), the objective bench/sweep/optuna_synth.py gives
 * Optuna. Prints, per method, the best value found in BUDGET trials (mean over SEEDS seeds) and
 * the wall time per search.
 * Usage: dlk_sweep_synth BUDGET SEEDS */
#include "lib/sweep/sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double objective(const double *x)
{
	double a = log10(x[0]) + 2, b = (x[1] - 40) / 30, c = (x[2] - 0.9) * 5;
	return -(a * a) - b * b - c * c;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int budget = argc > 1 ? atoi(argv[1]) : 40, seeds = argc > 2 ? atoi(argv[2]) : 10;
	const char *y = "sweep:\n  parameters:\n    t.lr: {loguniform: [0.00001, 1]}\n    t.n: {int: [1, 100]}\n"
	                "    t.m: {uniform: [0, 1]}\n";
	const char *names[] = { "random", "grid", "tpe" };

	for (int m = 0; m <= DLK_SWEEP_TPE; m += 2) {
		double mean = 0, t0 = now();
		for (int k = 0; k < seeds; k++) {
			struct dlk_sweep_spec s;
			struct dlk_err err = DLK_ERR_INIT;
			double *xs = calloc((size_t)budget * 3, sizeof(double)), best = -INFINITY;
			struct dlk_sweep_obs *obs = calloc((size_t)budget, sizeof(*obs));
			if (dlk_sweep_spec_parse(y, strlen(y), "bench", "bench", &s, &err)) {
				fprintf(stderr, "%s\n", err.msg);
				return 1;
			}
			s.method = (enum dlk_sweep_method)m;
			s.seed = (unsigned long long)k;
			s.trials = budget;
			for (int i = 0; i < budget; i++) {
				dlk_sweep_suggest(&s, obs, (size_t)i, i, xs + 3 * i);
				obs[i].x = xs + 3 * i;
				obs[i].value = objective(xs + 3 * i);
				best = fmax(best, obs[i].value);
			}
			mean += best / seeds;
			free(xs);
			free(obs);
			dlk_sweep_spec_release(&s);
		}
		printf("dlk %-6s budget %d: best %.4f (mean of %d seeds), %.2f ms per search\n", names[m], budget, mean, seeds,
		       (now() - t0) * 1e3 / seeds);
	}
	return 0;
}
