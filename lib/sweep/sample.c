/* The samplers: where each trial of a sweep looks. A parameter's point lives in a unit space
 * for the densities: a range maps linearly (log-uniform: its logarithm) to [0, 1]; a list is
 * an index. */
#include "lib/sweep/sweep.h"
#include "lib/util/mem.h"
#include "lib/util/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TPE_CANDIDATES 24
#define TPE_GAMMA 0.25

static double unit_of(const struct dlk_sweep_param *p, double x)
{
	if (p->kind == DLK_SWEEP_LOGUNIFORM)
		return (log(x) - log(p->lo)) / (log(p->hi) - log(p->lo));
	return (x - p->lo) / (p->hi - p->lo);
}

static double from_unit(const struct dlk_sweep_param *p, double u)
{
	double x;
	if (u < 0)
		u = 0;
	if (u > 1)
		u = 1;
	if (p->kind == DLK_SWEEP_LOGUNIFORM)
		return exp(log(p->lo) + u * (log(p->hi) - log(p->lo)));
	x = p->lo + u * (p->hi - p->lo);
	if (p->kind == DLK_SWEEP_INT) {
		x = floor(x + 0.5);
		if (x > p->hi)
			x = p->hi;
	}
	return x;
}

/* a double in [0, 1) with 53 random bits */
static double unif(struct dlk_rng *r) { return (double)(dlk_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static double gauss(struct dlk_rng *r)
{
	double u = unif(r), v = unif(r);
	return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

static void random_point(const struct dlk_sweep_spec *s, struct dlk_rng *r, double *x)
{
	for (int i = 0; i < s->n_params; i++) {
		const struct dlk_sweep_param *p = &s->params[i];
		if (p->kind == DLK_SWEEP_VALUES)
			x[i] = (double)dlk_rng_below(r, (uint64_t)p->n_values);
		else if (p->kind == DLK_SWEEP_INT)
			/* every whole number of the range equally likely */
			x[i] = p->lo + (double)dlk_rng_below(r, (uint64_t)(p->hi - p->lo) + 1);
		else
			x[i] = from_unit(p, unif(r));
	}
}

/* One parameter's Parzen estimator over the unit points u[0..n): a Gaussian per point whose
 * width is the larger gap to its neighbours (Hyperopt's adaptive Parzen estimator: narrow where
 * good points crowd, wide at the edges of what was tried), never below 1/min(100, n+1) of the
 * range, and the uniform prior with the weight of one point, so that a region no trial has seen
 * is never impossible. */
static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the widths of the sorted points s[0..n) into w */
static void kde_widths(const double *s, int n, double *w)
{
	double floor_w = 1.0 / fmin(100.0, n + 1.0);
	for (int i = 0; i < n; i++) {
		double left = s[i] - (i ? s[i - 1] : 0.0), right = (i + 1 < n ? s[i + 1] : 1.0) - s[i];
		w[i] = fmin(1.0, fmax(floor_w, fmax(left, right)));
	}
}

static double kde_pdf(const double *u, int n, double v)
{
	double *s = xmalloc((size_t)(n + 1) * sizeof(double)), *w = xmalloc((size_t)(n + 1) * sizeof(double));
	double sum = 1.0; /* the prior: uniform density 1 on [0, 1] */
	memcpy(s, u, (size_t)n * sizeof(double));
	qsort(s, (size_t)n, sizeof(double), cmp_d);
	kde_widths(s, n, w);
	for (int i = 0; i < n; i++) {
		double z = (v - s[i]) / w[i];
		sum += exp(-0.5 * z * z) / (w[i] * sqrt(2.0 * M_PI));
	}
	free(s);
	free(w);
	return sum / (n + 1.0);
}

static double kde_draw(const double *u, int n, struct dlk_rng *r)
{
	double *s, *w, v, out;
	uint64_t k = dlk_rng_below(r, (uint64_t)n + 1);
	if (k == (uint64_t)n)
		return unif(r);
	s = xmalloc((size_t)(n + 1) * sizeof(double));
	w = xmalloc((size_t)(n + 1) * sizeof(double));
	memcpy(s, u, (size_t)n * sizeof(double));
	qsort(s, (size_t)n, sizeof(double), cmp_d);
	kde_widths(s, n, w);
	out = s[k];
	/* redrawn until inside the range: the truncated kernel */
	for (int t = 0; t < 32; t++) {
		v = s[k] + w[k] * gauss(r);
		if (v >= 0 && v <= 1) {
			out = v;
			break;
		}
	}
	free(s);
	free(w);
	return out;
}

/* a list's categorical estimator: counts with one pseudo-count per value (Laplace) */
static double cat_pmf(const double *x, int n, int n_values, int v)
{
	int c = 0;
	for (int i = 0; i < n; i++)
		c += (int)x[i] == v;
	return (c + 1.0) / (n + n_values);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct ranked {
	double score; /* higher is better */
	size_t i;
};
static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->score != y->score)
		return x->score < y->score ? 1 : -1;
	return (x->i > y->i) - (x->i < y->i);
}

static void tpe_point(const struct dlk_sweep_spec *s, const struct dlk_sweep_obs *done, size_t n_done,
                      struct dlk_rng *r, double *x)
{
	struct ranked *rk = xcalloc(n_done, sizeof(*rk));
	size_t n_good;
	double *good = xcalloc(n_done, sizeof(double)), *bad = xcalloc(n_done, sizeof(double));
	double *cand = xcalloc((size_t)s->n_params * TPE_CANDIDATES, sizeof(double));
	double best = -INFINITY;
	int best_c = 0;

	for (size_t i = 0; i < n_done; i++) {
		rk[i].score = s->maximize ? done[i].value : -done[i].value;
		if (isnan(rk[i].score))
			rk[i].score = -INFINITY;
		rk[i].i = i;
	}
	qsort(rk, n_done, sizeof(*rk), cmp_ranked);
	n_good = (size_t)ceil(TPE_GAMMA * (double)n_done);
	if (n_good < 1)
		n_good = 1;
	/* the candidates are drawn from l(x), the good trials' density, one parameter at a time */
	for (int c = 0; c < TPE_CANDIDATES; c++)
		for (int j = 0; j < s->n_params; j++) {
			const struct dlk_sweep_param *p = &s->params[j];
			int ng = 0;
			for (size_t i = 0; i < n_good; i++)
				good[ng++] = p->kind == DLK_SWEEP_VALUES ? done[rk[i].i].x[j] : unit_of(p, done[rk[i].i].x[j]);
			if (p->kind == DLK_SWEEP_VALUES) {
				/* draw from the smoothed counts */
				double t = unif(r), acc = 0;
				int v = p->n_values - 1;
				for (int k = 0; k < p->n_values; k++) {
					acc += cat_pmf(good, ng, p->n_values, k);
					if (t < acc) {
						v = k;
						break;
					}
				}
				cand[c * s->n_params + j] = v;
			} else {
				cand[c * s->n_params + j] = from_unit(p, kde_draw(good, ng, r));
			}
		}
	/* ... and the one with the largest l(x) / g(x) wins (the expected improvement's argmax) */
	for (int c = 0; c < TPE_CANDIDATES; c++) {
		double score = 0;
		for (int j = 0; j < s->n_params; j++) {
			const struct dlk_sweep_param *p = &s->params[j];
			double v = cand[c * s->n_params + j];
			int ng = 0, nb = 0;
			for (size_t i = 0; i < n_done; i++) {
				double u = p->kind == DLK_SWEEP_VALUES ? done[rk[i].i].x[j] : unit_of(p, done[rk[i].i].x[j]);
				if (i < n_good)
					good[ng++] = u;
				else
					bad[nb++] = u;
			}
			if (p->kind == DLK_SWEEP_VALUES)
				score += log(cat_pmf(good, ng, p->n_values, (int)v)) - log(cat_pmf(bad, nb, p->n_values, (int)v));
			else
				score += log(kde_pdf(good, ng, unit_of(p, v))) - log(kde_pdf(bad, nb, unit_of(p, v)));
		}
		if (score > best) {
			best = score;
			best_c = c;
		}
	}
	memcpy(x, cand + best_c * s->n_params, (size_t)s->n_params * sizeof(double));
	free(rk);
	free(good);
	free(bad);
	free(cand);
}

void dlk_sweep_suggest(const struct dlk_sweep_spec *s, const struct dlk_sweep_obs *done, size_t n_done, long index,
                       double *x)
{
	struct dlk_rng r;
	size_t startup = (size_t)(s->trials / 4 > 3 ? s->trials / 4 : 3);

	/* every trial has its own stream: trial i's random point never depends on how many trials
	 * came before it or in which order they finished, so a resumed sweep suggests the same */
	dlk_rng_seed(&r, s->seed * 0x9E3779B97F4A7C15ull + (uint64_t)index * 0xBF58476D1CE4E5B9ull + 1);
	if (s->method == DLK_SWEEP_GRID) {
		long rest = index;
		for (int i = s->n_params - 1; i >= 0; i--) {
			x[i] = (double)(rest % s->params[i].n_values);
			rest /= s->params[i].n_values;
		}
		return;
	}
	if (s->method == DLK_SWEEP_TPE && n_done >= startup)
		tpe_point(s, done, n_done, &r, x);
	else
		random_point(s, &r, x);
}

char *dlk_sweep_value_text(const struct dlk_sweep_spec *s, int i, double x)
{
	const struct dlk_sweep_param *p = &s->params[i];
	if (p->kind == DLK_SWEEP_VALUES)
		return xstrdup(p->values[(int)x]);
	if (p->kind == DLK_SWEEP_INT)
		return xasprintf("%.0f", x);
	return xasprintf("%.6g", x);
}

cJSON *dlk_sweep_params_json(const struct dlk_sweep_spec *s, const double *x)
{
	cJSON *o = cJSON_CreateObject();
	for (int i = 0; i < s->n_params; i++) {
		char *t = dlk_sweep_value_text(s, i, x[i]), *end;
		double d = strtod(t, &end);
		if (s->params[i].kind != DLK_SWEEP_VALUES || (*t && !*end && isfinite(d)))
			cJSON_AddNumberToObject(o, s->params[i].key, d);
		else
			cJSON_AddStringToObject(o, s->params[i].key, t);
		free(t);
	}
	return o;
}

int dlk_sweep_params_point(const struct dlk_sweep_spec *s, const cJSON *params, double *x)
{
	for (int i = 0; i < s->n_params; i++) {
		const struct dlk_sweep_param *p = &s->params[i];
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, p->key);
		if (!v)
			return -1;
		if (p->kind == DLK_SWEEP_VALUES) {
			int found = -1;
			for (int k = 0; k < p->n_values && found < 0; k++) {
				char *end;
				double d = strtod(p->values[k], &end);
				if (cJSON_IsString(v) ? !strcmp(v->valuestring, p->values[k])
				                      : cJSON_IsNumber(v) && !*end && d == v->valuedouble)
					found = k;
			}
			if (found < 0)
				return -1;
			x[i] = found;
		} else {
			/* a recorded number went through "%.6g": inside the range up to that rounding, a
			 * margin by the bound's magnitude (a negative LO's too) */
			if (!cJSON_IsNumber(v) || !(v->valuedouble >= p->lo - fabs(p->lo) * 1e-5 - 1e-12) ||
			    !(v->valuedouble <= p->hi + fabs(p->hi) * 1e-5 + 1e-12))
				return -1;
			x[i] = v->valuedouble;
		}
	}
	return 0;
}

/* the (1 - 1/factor) quantile, linear between order statistics (numpy's percentile) */
static double quantile(double *v, int n, double q)
{
	double pos, frac;
	int lo;
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	pos = q * (n - 1);
	lo = (int)floor(pos);
	frac = pos - lo;
	if (lo + 1 >= n || frac == 0)
		return v[lo];
	/* a trial without a value counts as -inf: between it and a number, the nearer one */
	if (isinf(v[lo]) || isinf(v[lo + 1]))
		return frac < 0.5 ? v[lo] : v[lo + 1];
	return v[lo] + frac * (v[lo + 1] - v[lo]);
}

void dlk_asha_init(struct dlk_asha *a, long min, long max, int factor, int maximize)
{
	*a = (struct dlk_asha)DLK_ASHA_INIT;
	a->factor = factor < 2 ? 2 : factor;
	a->maximize = maximize;
	for (long r = min < 1 ? 1 : min; r < max; r *= a->factor) {
		a->rungs = xrealloc(a->rungs, (size_t)(a->n_rungs + 1) * sizeof(*a->rungs));
		a->rungs[a->n_rungs++] = (struct dlk_asha_rung){ r, NULL, 0, 0 };
		if (r > (1L << 40))
			break;
	}
}

void dlk_asha_release(struct dlk_asha *a)
{
	for (int i = 0; i < a->n_rungs; i++)
		free(a->rungs[i].vals);
	free(a->rungs);
	*a = (struct dlk_asha)DLK_ASHA_INIT;
}

int dlk_asha_report(struct dlk_asha *a, int k, double v)
{
	struct dlk_asha_rung *g;
	int stop = 0;

	if (k < 0 || k >= a->n_rungs)
		return 0;
	g = &a->rungs[k];
	if (isnan(v))
		v = -INFINITY;
	else if (!a->maximize)
		v = -v;
	if (g->n > 0) {
		double *tmp = xmalloc((size_t)g->n * sizeof(double));
		memcpy(tmp, g->vals, (size_t)g->n * sizeof(double));
		stop = v < quantile(tmp, g->n, 1.0 - 1.0 / a->factor);
		free(tmp);
	}
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 8;
		g->vals = xrealloc(g->vals, (size_t)g->cap * sizeof(double));
	}
	g->vals[g->n++] = v;
	return stop;
}
