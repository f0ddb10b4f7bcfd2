/* The losses of a task, the host reference, and the backward from any of them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/kernels.h"
#include "lib/nn/loss.h"
#include "lib/nn/net.h"
#include "lib/util/mem.h"

_Static_assert(DLK_LOSS_SOFTMAX_CE == DLK_K_LOSS_CE && DLK_LOSS_BCE == DLK_K_LOSS_BCE && DLK_LOSS_MSE == DLK_K_LOSS_MSE &&
	       DLK_LOSS_L1 == DLK_K_LOSS_L1 && DLK_LOSS_HUBER == DLK_K_LOSS_HUBER &&
	       DLK_LOSS_TOKEN_CE == DLK_K_LOSS_TOKEN_CE,
               "gpu/loss.cu switches on the kernels.h values");

struct dlk_loss_spec dlk_loss_of(const struct dlk_model *m, const struct dlk_training *t)
{
	struct dlk_loss_spec l = { .kind = m->loss, .param = 0 };
	if (m->loss == DLK_LOSS_SOFTMAX_CE)
		l.param = t ? (float)t->label_smoothing : 0.0f;
	else if (m->loss == DLK_LOSS_HUBER)
		l.param = (float)m->huber_delta;
	return l;
}

int dlk_loss_wants_labels(enum dlk_loss kind) { return kind == DLK_LOSS_SOFTMAX_CE; }

const char *dlk_loss_name(enum dlk_loss kind)
{
	switch (kind) {
	case DLK_LOSS_SOFTMAX_CE: return "softmax_cross_entropy";
	case DLK_LOSS_BCE: return "binary_cross_entropy";
	case DLK_LOSS_MSE: return "mse";
	case DLK_LOSS_L1: return "l1";
	case DLK_LOSS_HUBER: return "huber";
	case DLK_LOSS_TOKEN_CE: return "token_cross_entropy";
	}
	return "unknown";
}

int dlk_loss_from_name(const char *name)
{
	for (int k = DLK_LOSS_SOFTMAX_CE; k <= DLK_LOSS_TOKEN_CE; k++)
		if (name && !strcmp(name, dlk_loss_name((enum dlk_loss)k)))
			return k;
	return -1;
}

static const char *const task_names[] = { "classification", "multilabel", "regression", "image", "lm" };

const char *dlk_task_name(enum dlk_task task)
{
	return (unsigned)task < sizeof(task_names) / sizeof(task_names[0]) ? task_names[task] : "unknown";
}

int dlk_task_from_name(const char *name)
{
	for (int t = 0; t < (int)(sizeof(task_names) / sizeof(task_names[0])); t++)
		if (name && !strcmp(name, task_names[t]))
			return t;
	return -1;
}

static float ce_ref(const float *out, const int32_t *labels, int batch, int k, float eps, float *dout)
{
	double total = 0;
	float inv = 1.0f / (float)batch;
	for (int b = 0; b < batch; b++) {
		const float *z = out + (size_t)b * k;
		float m = z[0], s = 0, zsum = 0;
		for (int j = 1; j < k; j++)
			m = z[j] > m ? z[j] : m;
		for (int j = 0; j < k; j++) {
			s += expf(z[j] - m);
			zsum += z[j] - m;
		}
		int y = labels[b];
		total += dlk_k_ce_smooth_loss(z[y], m, s, zsum, k, eps);
		for (int j = 0; dout && j < k; j++)
			dout[(size_t)b * k + j] = dlk_k_ce_smooth_grad(z[j], m, s, j == y, k, eps, inv);
	}
	return (float)(total / batch);
}

/* next-token cross-entropy: rows are positions, targets token ids held in floats, a negative one
 * ignored; the mean over the counted positions (0, and zero gradients, when none counts) */
static float token_ce_ref(const float *out, const float *targets, int rows, int k, float *dout)
{
	double total = 0;
	int counted = 0;
	for (int b = 0; b < rows; b++)
		counted += dlk_k_token_id(targets[b]) >= 0;
	float inv = counted ? 1.0f / (float)counted : 0.0f;
	for (int b = 0; b < rows; b++) {
		const float *z = out + (size_t)b * k;
		int y = dlk_k_token_id(targets[b]);
		float m = z[0], s = 0;
		if (y < 0 || y >= k) {
			for (int j = 0; dout && j < k; j++)
				dout[(size_t)b * k + j] = 0;
			continue;
		}
		for (int j = 1; j < k; j++)
			m = z[j] > m ? z[j] : m;
		for (int j = 0; j < k; j++)
			s += expf(z[j] - m);
		total += dlk_k_ce_smooth_loss(z[y], m, s, 0, k, 0);
		for (int j = 0; dout && j < k; j++)
			dout[(size_t)b * k + j] = dlk_k_ce_smooth_grad(z[j], m, s, j == y, k, 0, inv);
	}
	return counted ? (float)(total / counted) : 0.0f;
}

float dlk_loss_ref(int kind, const float *out, const int32_t *labels, const float *targets, int batch, int k,
                   float param, float *dout)
{
	size_t n = (size_t)batch * (size_t)k;
	double total = 0;

	if (batch <= 0 || k <= 0)
		return NAN;
	if (kind == DLK_LOSS_SOFTMAX_CE)
		return ce_ref(out, labels, batch, k, param, dout);
	if (kind == DLK_LOSS_TOKEN_CE)
		return token_ce_ref(out, targets, batch, k, dout);
	/* the mean over every element: each gradient is divided by their number */
	float inv = 1.0f / (float)n;
	for (size_t i = 0; i < n; i++) {
		float z = out[i], t = targets[i], l, g;
		switch (kind) {
		case DLK_LOSS_BCE: l = dlk_k_bce_loss(z, t); g = dlk_k_bce_grad(z, t); break;
		case DLK_LOSS_MSE: l = dlk_k_mse_loss(z, t); g = dlk_k_mse_grad(z, t); break;
		case DLK_LOSS_L1: l = dlk_k_l1_loss(z, t); g = dlk_k_l1_grad(z, t); break;
		case DLK_LOSS_HUBER: l = dlk_k_huber_loss(z, t, param); g = dlk_k_huber_grad(z, t, param); break;
		default: return NAN;
		}
		total += l;
		if (dout)
			dout[i] = g * inv;
	}
	return (float)(total / (double)n);
}

void dlk_loss_rows(const struct dlk_net *net, int *batch, int *k)
{
	const struct dlk_layer *L = &net->layers[net->n_layers - 1];
	int V = L->out[2] > 0 ? L->out[2] : 1;
	*batch *= net->n_classes / V;
	*k = V;
}

float dlk_loss_backward(struct dlk_net *net, const struct dlk_loss_spec *loss, const int32_t *labels,
                        const float *targets, int batch)
{
	const struct dlk_backend *be = net->be;
	int k = net->n_classes;
	size_t n = (size_t)batch * (size_t)k;
	int samples = batch;

	/* next-token: a row of V logits per position, one target per position */
	if (loss->kind == DLK_LOSS_TOKEN_CE)
		dlk_loss_rows(net, &batch, &k);
	const float *out = dlk_net_output(net);
	float *dout = dlk_net_out_grad(net), l;

	if (be->loss) {
		l = be->loss((int)loss->kind, out, labels, targets, batch, k, loss->param, dout);
	} else {
		/* a backend without the kernels: the reference on host copies */
		int lab = dlk_loss_wants_labels(loss->kind);
		float *ho = xmalloc(sizeof(float) * n), *hd = xmalloc(sizeof(float) * n);
		float *ht = lab ? NULL : xmalloc(sizeof(float) * n);
		int32_t *hl = lab ? xmalloc(sizeof(int32_t) * (size_t)batch) : NULL;
		size_t nt = loss->kind == DLK_LOSS_TOKEN_CE ? (size_t)batch : n;
		be->to_host(ho, out, sizeof(float) * n);
		if (lab)
			be->to_host(hl, labels, sizeof(int32_t) * (size_t)batch);
		else
			be->to_host(ht, targets, sizeof(float) * nt);
		l = dlk_loss_ref((int)loss->kind, ho, hl, ht, batch, k, loss->param, hd);
		be->to_device(dout, hd, sizeof(float) * n);
		free(ho);
		free(hd);
		free(ht);
		free(hl);
	}
	dlk_net_backward_grad(net, samples);
	return l;
}
