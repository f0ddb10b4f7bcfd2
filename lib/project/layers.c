#include "lib/project/layers.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

_Static_assert(DLK_LAYER_MEANPOOL + 1 == DLK_LAYER_KINDS, "dlk_layer_names lists every kind");

const char *const dlk_layer_names[DLK_LAYER_KINDS + 1] = {
	[DLK_LAYER_DENSE] = "dense", [DLK_LAYER_CONV2D] = "conv2d", [DLK_LAYER_MAXPOOL] = "maxpool",
	[DLK_LAYER_FLATTEN] = "flatten", [DLK_LAYER_RELU] = "relu", [DLK_LAYER_TANH] = "tanh",
	[DLK_LAYER_SIGMOID] = "sigmoid", [DLK_LAYER_DROPOUT] = "dropout", [DLK_LAYER_ADD] = "add", [DLK_LAYER_CONCAT] = "concat",
	[DLK_LAYER_GLOBALAVGPOOL] = "globalavgpool",
	[DLK_LAYER_LAYERNORM] = "layernorm", [DLK_LAYER_GELU] = "gelu", [DLK_LAYER_SOFTMAX] = "softmax",
	[DLK_LAYER_EMBEDDING] = "embedding", [DLK_LAYER_UPSAMPLE] = "upsample",
	[DLK_LAYER_ATTENTION] = "attention",
	[DLK_LAYER_BATCHNORM] = "batchnorm", [DLK_LAYER_AVGPOOL] = "avgpool",
	[DLK_LAYER_CONVTRANSPOSE2D] = "convtranspose2d", [DLK_LAYER_RESHAPE] = "reshape",
	[DLK_LAYER_MEANPOOL] = "meanpool", NULL
};

const char *dlk_layer_name(enum dlk_layer_kind kind)
{
	return (int)kind >= 0 && (int)kind < DLK_LAYER_KINDS ? dlk_layer_names[kind] : "unknown";
}

int dlk_layer_kind_of(const char *name)
{
	for (int k = 0; name && k < DLK_LAYER_KINDS; k++)
		if (!strcmp(name, dlk_layer_names[k]))
			return k;
	return -1;
}

int dlk_layer_shape(const struct dlk_layer_spec *ls, const long long in[3], long long out[3])
{
	long long k, pad = 0, n;

	switch (ls->kind) {
	case DLK_LAYER_CONVTRANSPOSE2D:
		out[0] = ls->filters;
		out[1] = (in[1] - 1) * ls->stride - 2LL * ls->padding + ls->kernel + ls->output_padding;
		out[2] = (in[2] - 1) * ls->stride - 2LL * ls->padding + ls->kernel + ls->output_padding;
		if (out[1] <= 0 || out[2] <= 0)
			return -1;
		return 0;
	case DLK_LAYER_CONV2D:
	case DLK_LAYER_MAXPOOL:
	case DLK_LAYER_AVGPOOL:
		k = ls->kind == DLK_LAYER_CONV2D ? ls->kernel : ls->size;
		if (ls->kind != DLK_LAYER_MAXPOOL)
			pad = ls->padding;
		if (in[1] + 2 * pad < k || in[2] + 2 * pad < k)
			return -1;
		out[0] = ls->kind == DLK_LAYER_CONV2D ? ls->filters : in[0];
		out[1] = (in[1] + 2 * pad - k) / ls->stride + 1;
		out[2] = (in[2] + 2 * pad - k) / ls->stride + 1;
		return 0;
	case DLK_LAYER_FLATTEN:
		/* saturates rather than overflows: any caller refuses a size that large */
		if (__builtin_mul_overflow(in[0], in[1], &n) || __builtin_mul_overflow(n, in[2], &n))
			n = LLONG_MAX;
		out[0] = out[1] = 1;
		out[2] = n;
		return 0;
	case DLK_LAYER_DENSE:
		/* nn.Linear: over the last axis, so a flat [1, 1, n] stays flat and a sequence [1, T, d]
		 * becomes [1, T, units] (the engine and the loader refuse more than one channel) */
		out[0] = in[0];
		out[1] = in[1];
		out[2] = ls->units;
		return 0;
	case DLK_LAYER_RESHAPE: {
		/* [n] -> [1, 1, n], [a, b] -> [1, a, b]; one -1 takes what the others leave */
		long long t[3] = { 1, 1, 1 }, known = 1, total;
		int free_at = -1, r = ls->target_rank;
		if (r < 1 || r > 3 || __builtin_mul_overflow(in[0], in[1], &total) ||
		    __builtin_mul_overflow(total, in[2], &total))
			return -1;
		for (int d = 0; d < r; d++) {
			long long v = ls->target[d];
			if (v == -1 && free_at < 0)
				free_at = 3 - r + d;
			else if (v < 1)
				return -1;
			else
				known *= v, t[3 - r + d] = v; /* each at most 2^30: no overflow in three */
		}
		if (free_at >= 0) {
			if (total % known)
				return -1;
			t[free_at] = total / known;
		} else if (known != total)
			return -1;
		memcpy(out, t, sizeof(t));
		return 0;
	}
	case DLK_LAYER_GLOBALAVGPOOL:
		out[2] = in[0];
		out[0] = out[1] = 1;
		return 0;
	case DLK_LAYER_MEANPOOL: /* [1, T, D] -> D features */
		out[2] = in[2];
		out[0] = out[1] = 1;
		return 0;
	case DLK_LAYER_UPSAMPLE:
		out[0] = in[0];
		out[1] = in[1] * ls->scale; /* scale <= 64 and sizes below 2^31: no overflow */
		out[2] = in[2] * ls->scale;
		return 0;
	case DLK_LAYER_EMBEDDING:
		/* a token id per input value, each becoming a row of dim values */
		if (__builtin_mul_overflow(in[0], in[1], &n) || __builtin_mul_overflow(n, in[2], &n))
			n = LLONG_MAX;
		out[0] = 1;
		out[1] = n;
		out[2] = ls->dim;
		return 0;
	default:
		memmove(out, in, 3 * sizeof(*in));
		return 0;
	}
}

void dlk_layer_path(char *buf, size_t len, int i, const struct dlk_layer_spec *ls)
{
	if (ls->block[0] && ls->reps > 1)
		snprintf(buf, len, "model.blocks.%s[%d] (model.layers[%d], repeat %d of %d)", ls->block, ls->block_pos,
		         ls->use - 1, ls->rep + 1, ls->reps);
	else if (ls->block[0])
		snprintf(buf, len, "model.blocks.%s[%d] (model.layers[%d])", ls->block, ls->block_pos, ls->use - 1);
	else
		snprintf(buf, len, "model.layers[%d]", ls->use > 0 ? ls->use - 1 : i);
}

void dlk_layer_where(char *buf, size_t len, int i, const struct dlk_layer_spec *ls, const char *file)
{
	char p[160];

	dlk_layer_path(p, sizeof(p), i, ls);
	if (ls->line > 0)
		snprintf(buf, len, "%s (%s, %s:%d)", p, dlk_layer_name(ls->kind), file ? file : "dlk.yaml", ls->line);
	else
		snprintf(buf, len, "%s (%s)", p, dlk_layer_name(ls->kind));
}

int dlk_layer_arity(enum dlk_layer_kind kind)
{
	return kind == DLK_LAYER_ADD || kind == DLK_LAYER_CONCAT ? 2 : 1;
}

int dlk_layer_shape2(const struct dlk_layer_spec *ls, const long long a[3], const long long b[3], long long out[3])
{
	if (ls->kind == DLK_LAYER_ADD) {
		if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2])
			return -1;
		memmove(out, a, 3 * sizeof(*a));
		return 0;
	}
	/* concat: along channels; flat inputs [1, 1, n] along features */
	if (a[1] != b[1])
		return -1;
	if (a[0] == 1 && a[1] == 1 && b[0] == 1) {
		out[0] = out[1] = 1;
		out[2] = a[2] + b[2];
		return 0;
	}
	if (a[2] != b[2])
		return -1;
	out[0] = a[0] + b[0];
	out[1] = a[1];
	out[2] = a[2];
	return 0;
}
