/* The samplers (seeded, so every figure here is the same on every run) and ASHA on synthetic
 * curves: random points stay in their space with the distribution their kind says; the grid
 * visits each point once; TPE, on an objective whose optimum is known, finds better points than
 * random search with the same budget; ASHA stops exactly the trials below its quantile. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/sweep/sweep.h"

static void spec_of(const char *y, struct dlk_sweep_spec *s)
{
	struct dlk_err err = DLK_ERR_INIT;
	if (dlk_sweep_spec_parse(y, strlen(y), "t.yaml", "t", s, &err))
		printf("# %s\n", err.msg);
}

static void test_random(void)
{
	struct dlk_sweep_spec s;
	double x[3], y[3];
	int in = 1, whole = 1, below = 0, lists[4] = { 0 };
	const int n = 4000;

	spec_of("sweep:\n  seed: 5\n  parameters:\n    a.lr: {loguniform: [0.0001, 1]}\n    a.n: {int: [1, 3]}\n"
	        "    a.w: [8, 16, 32, 64]\n", &s);
	for (int i = 0; i < n; i++) {
		dlk_sweep_suggest(&s, NULL, 0, i, x);
		in &= x[0] >= 0.0001 && x[0] <= 1 && x[1] >= 1 && x[1] <= 3 && x[2] >= 0 && x[2] <= 3;
		whole &= x[1] == floor(x[1]) && x[2] == floor(x[2]);
		below += x[0] < 0.01; /* the geometric middle of the range */
		lists[(int)x[2]]++;
	}
	CHECK(in);
	CHECK(whole);
	CHECK_MSG(fabs(below / (double)n - 0.5) < 0.03, "log-uniform: half below the geometric mean (%.3f)", below / (double)n);
	CHECK_MSG(lists[0] > 900 && lists[1] > 900 && lists[2] > 900 && lists[3] > 900, "each listed value about a quarter");
	/* a trial's point depends on the seed and its index only */
	dlk_sweep_suggest(&s, NULL, 0, 17, x);
	dlk_sweep_suggest(&s, NULL, 0, 17, y);
	CHECK(!memcmp(x, y, sizeof(x)));
	dlk_sweep_suggest(&s, NULL, 0, 18, y);
	CHECK(memcmp(x, y, sizeof(x)) != 0);
	s.seed = 6;
	dlk_sweep_suggest(&s, NULL, 0, 17, y);
	CHECK(memcmp(x, y, sizeof(x)) != 0);

	/* the values as --set writes them, and back from the record */
	{
		double p[3] = { 0.00123456789, 2, 3 }, q[3];
		char *t = dlk_sweep_value_text(&s, 0, p[0]);
		cJSON *j = dlk_sweep_params_json(&s, p);
		char *js = cJSON_PrintUnformatted(j);
		CHECK_STR(t, "0.00123457");
		CHECK_STR(js, "{\"a.lr\":0.00123457,\"a.n\":2,\"a.w\":64}");
		CHECK(dlk_sweep_params_point(&s, j, q) == 0 && fabs(q[0] - 0.00123457) < 1e-12 && q[1] == 2 && q[2] == 3);
		cJSON_ReplaceItemInObject(j, "a.w", cJSON_CreateNumber(12));
		CHECK(dlk_sweep_params_point(&s, j, q) == -1); /* 12 is not a listed value */
		free(t);
		free(js);
		cJSON_Delete(j);
	}
	dlk_sweep_spec_release(&s);

	/* a negative LO reads back at the bound itself (its margin was once taken the wrong way);
	 * past it, it does not */
	spec_of("sweep:\n  parameters:\n    a.n: {int: [-1099511627776, 10]}\n    a.x: {uniform: [-2.5, -1]}\n", &s);
	{
		double p[2] = { -1099511627776.0, -2.5 }, q[2];
		cJSON *j = dlk_sweep_params_json(&s, p);
		CHECK(dlk_sweep_params_point(&s, j, q) == 0 && q[0] == p[0] && q[1] == p[1]);
		cJSON_ReplaceItemInObject(j, "a.x", cJSON_CreateNumber(-2.6));
		CHECK(dlk_sweep_params_point(&s, j, q) == -1);
		cJSON_ReplaceItemInObject(j, "a.x", cJSON_CreateNumber(-0.9));
		CHECK(dlk_sweep_params_point(&s, j, q) == -1);
		cJSON_Delete(j);
	}
	dlk_sweep_spec_release(&s);
}

static void test_grid(void)
{
	struct dlk_sweep_spec s;
	double x[2];
	int seen[3][2] = { { 0 } }, once = 1;

	spec_of("sweep:\n  method: grid\n  parameters:\n    a.b: [1, 2, 3]\n    c.d: [x, y]\n", &s);
	CHECK(s.trials == 6);
	for (int i = 0; i < 6; i++) {
		dlk_sweep_suggest(&s, NULL, 0, i, x);
		seen[(int)x[0]][(int)x[1]]++;
	}
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			once &= seen[i][j] == 1;
	CHECK_MSG(once, "the grid's 6 points, each once");
	dlk_sweep_spec_release(&s);
}

/* known optimum: lr = 0.01, n = 40, momentum 0.9 (all ranges) */
static double objective(const double *x)
{
	double a = log10(x[0]) + 2, b = (x[1] - 40) / 30, c = (x[2] - 0.9) * 5;
	return -(a * a) - b * b - c * c;
}

/* the same with a list for n: the width index 2 is best, by less than the learning rate matters */
static double objective_list(const double *x)
{
	double a = log10(x[0]) + 2, b = x[1] - 2, c = (x[2] - 0.9) * 5;
	return -(a * a) - 0.3 * b * b - c * c;
}

/* the best value a search of `budget` trials finds */
static double search(enum dlk_sweep_method m, unsigned long long seed, int budget, int list)
{
	struct dlk_sweep_spec s;
	double *xs = calloc((size_t)budget * 3, sizeof(double)), best = -INFINITY;
	struct dlk_sweep_obs *obs = calloc((size_t)budget, sizeof(*obs));

	spec_of(list ? "sweep:\n  parameters:\n    t.lr: {loguniform: [0.00001, 1]}\n    t.w: [8, 16, 32, 64, 128]\n"
	               "    t.m: {uniform: [0, 1]}\n"
	             : "sweep:\n  parameters:\n    t.lr: {loguniform: [0.00001, 1]}\n    t.n: {int: [1, 100]}\n"
	               "    t.m: {uniform: [0, 1]}\n", &s);
	s.method = m;
	s.seed = seed;
	s.trials = budget;
	for (int i = 0; i < budget; i++) {
		double *x = xs + 3 * i;
		dlk_sweep_suggest(&s, obs, (size_t)i, i, x);
		obs[i].x = x;
		obs[i].value = list ? objective_list(x) : objective(x);
		if (obs[i].value > best)
			best = obs[i].value;
	}
	free(xs);
	free(obs);
	dlk_sweep_spec_release(&s);
	return best;
}

static void test_tpe(void)
{
	double tpe = 0, rnd = 0, tpe_l = 0, rnd_l = 0;
	int wins = 0;
	const int seeds = 10, budget = 40;

	for (int k = 0; k < seeds; k++) {
		double a = search(DLK_SWEEP_TPE, 100 + k, budget, 0), b = search(DLK_SWEEP_RANDOM, 100 + k, budget, 0);
		tpe += a / seeds;
		rnd += b / seeds;
		wins += a > b;
		tpe_l += search(DLK_SWEEP_TPE, 100 + k, budget, 1) / seeds;
		rnd_l += search(DLK_SWEEP_RANDOM, 100 + k, budget, 1) / seeds;
	}
	printf("# ranges: best of %d trials, mean over %d seeds: TPE %.4f, random %.4f (optimum 0); TPE better in %d\n",
	       budget, seeds, tpe, rnd, wins);
	printf("# a list for the width: TPE %.4f, random %.4f\n", tpe_l, rnd_l);
	CHECK_MSG(tpe > rnd, "TPE finds better points than random search with the same budget");
	CHECK_MSG(wins >= 8, "TPE better in at least 8 of the 10 seeds");
	CHECK_MSG(tpe > -0.25, "TPE gets near the known optimum (%.4f)", tpe);
	/* a list whose effect is small beside the learning rate's: the per-point widths keep the
	 * ranges from crowding it out */
	CHECK_MSG(tpe_l > rnd_l, "with a list among the ranges, TPE still beats random search");
	/* the same inputs, the same suggestion */
	CHECK(search(DLK_SWEEP_TPE, 3, 20, 0) == search(DLK_SWEEP_TPE, 3, 20, 0));

	/* minimising: the good trials are the low ones */
	{
		struct dlk_sweep_spec s;
		double xs[12], x[1];
		struct dlk_sweep_obs obs[12];
		int near = 0;
		spec_of("sweep:\n  metric: loss\n  method: tpe\n  trials: 12\n  parameters:\n    t.u: {uniform: [0, 1]}\n", &s);
		for (int i = 0; i < 12; i++) {
			xs[i] = i / 11.0;
			obs[i].x = &xs[i];
			obs[i].value = fabs(xs[i] - 0.2); /* a loss, lowest at 0.2 */
		}
		for (int i = 0; i < 20; i++) {
			dlk_sweep_suggest(&s, obs, 12, 100 + i, x);
			near += fabs(x[0] - 0.2) < 0.25;
		}
		CHECK_MSG(near >= 15, "minimising a loss, TPE looks where it is low (%d of 20 near)", near);
		dlk_sweep_spec_release(&s);
	}
}

static void test_asha(void)
{
	struct dlk_asha a;
	/* final levels of 9 synthetic learning curves v(e) = top * (1 - exp(-e)), in arrival order */
	const double top[9] = { 0.80, 0.60, 0.90, 0.70, 0.85, 0.50, 0.95, 0.65, 0.75 };
	int stopped[9] = { 0 }, best_on = 1;

	dlk_asha_init(&a, 1, 9, 3, 1);
	CHECK(a.n_rungs == 2 && a.rungs[0].at == 1 && a.rungs[1].at == 3);
	for (int i = 0; i < 9; i++)
		for (int k = 0; k < a.n_rungs && !stopped[i]; k++)
			stopped[i] = dlk_asha_report(&a, k, top[i] * (1 - exp(-(double)a.rungs[k].at)));
	/* the first trial has nobody to lose against; then a trial goes on only in the top third of
	 * what was recorded before it (the 2/3 quantile, linear between values): 0.6 < 0.8 stops;
	 * 0.9 goes on; 0.7 stops; 0.85 passes epoch 1 (the quantile of {.5 .6 .7 .8 .9}-scaled
	 * values is 0.8) but not epoch 3 (between 0.8 and 0.9 there: 0.867); 0.75 stops at epoch 1 */
	CHECK(!stopped[0]);
	CHECK(stopped[1]);
	CHECK(!stopped[2]);
	CHECK(stopped[3]);
	CHECK(stopped[4]);
	CHECK(stopped[5]);
	CHECK(!stopped[6]);
	CHECK(stopped[7]);
	CHECK(stopped[8]);
	for (int i = 0; i < 9; i++)
		if (top[i] >= 0.9)
			best_on &= !stopped[i];
	CHECK_MSG(best_on, "the two best curves are never stopped");
	dlk_asha_release(&a);

	/* minimising: the same decisions on the negated curves */
	dlk_asha_init(&a, 1, 9, 3, 0);
	for (int i = 0; i < 9; i++) {
		int s = 0;
		for (int k = 0; k < a.n_rungs && !s; k++)
			s = dlk_asha_report(&a, k, -top[i] * (1 - exp(-(double)a.rungs[k].at)));
		CHECK_MSG(s == stopped[i], "minimising, trial %d decided alike", i);
	}
	dlk_asha_release(&a);

	/* rungs stop below the trial's length; a report beyond the rungs never stops */
	dlk_asha_init(&a, 2, 100, 4, 1);
	CHECK(a.n_rungs == 3 && a.rungs[2].at == 32);
	CHECK(dlk_asha_report(&a, 7, 0.0) == 0);
	CHECK(dlk_asha_report(&a, 0, NAN) == 0); /* first at the rung */
	CHECK(dlk_asha_report(&a, 0, 0.5) == 0);
	CHECK(dlk_asha_report(&a, 0, NAN) == 1); /* a trial with no value is the worst */
	dlk_asha_release(&a);
}

int main(void)
{
	test_random();
	test_grid();
	test_tpe();
	test_asha();
	return CHECK_DONE();
}
