/* A model's FLOPs per sample from its layer list (lib/nn/net.h), for its model FLOP utilisation. */
#include "lib/nn/net.h"

double dlk_net_flops_per_sample(const struct dlk_net *net)
{
	double f = 0;

	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		double T = L->in[1], D = L->in[2];
		switch (L->spec.kind) {
		case DLK_LAYER_DENSE:
			/* a tied head has no weights of its own: the embedding's table, units x in */
			f += 2 * T * D * L->out[2];
			break;
		case DLK_LAYER_CONV2D:
			f += 2 * (double)L->n_w * L->out[1] * L->out[2];
			break;
		case DLK_LAYER_CONVTRANSPOSE2D:
			f += 2 * (double)L->n_w * L->in[1] * L->in[2];
			break;
		case DLK_LAYER_ATTENTION:
			/* qkv and the output projection ([4D, D] weights over T positions), q k^T and a v */
			f += 2 * (double)L->n_w * T + 4 * T * T * D;
			break;
		default:
			break;
		}
	}
	return f;
}
