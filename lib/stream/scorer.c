/* Forward passes of a bundle's network for the stream. */
#include "lib/stream/scorer.h"

#include <stdio.h>
#include <string.h>

static int score(void *ctx, const float *x, int n, float *logits, struct dlk_err *err)
{
	struct dlk_net_scorer *s = ctx;
	const struct dlk_backend *be = s->net.be;
	char msg[256];

	for (int i = 0; i < n; i += s->max_batch) {
		int nb = n - i < s->max_batch ? n - i : s->max_batch;
		be->to_device(s->xdev, x + (size_t)i * s->net.input_size, sizeof(float) * (size_t)nb * s->net.input_size);
		const float *z = dlk_net_forward(&s->net, s->xdev, nb, 0);
		be->to_host(logits + (size_t)i * s->net.n_classes, z, sizeof(float) * (size_t)nb * s->net.n_classes);
	}
	if (be->check(msg, sizeof(msg)))
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: forward pass failed: %s", be->name, msg);
	return 0;
}

int dlk_net_scorer_open(struct dlk_net_scorer *s, const char *path, int max_batch, int threads,
                        struct dlk_err *err)
{
	const struct dlk_backend *be = dlk_backend_cpu();

	memset(s, 0, sizeof(*s));
	s->bundle = (struct dlk_bundle)DLK_BUNDLE_INIT;
	s->net = (struct dlk_net)DLK_NET_INIT;
	s->max_batch = max_batch;
	be->set_threads(threads);
	if (dlk_bundle_read(path, &s->bundle, err) || dlk_bundle_net(&s->bundle, be, &s->net, err) ||
	    dlk_net_reserve(&s->net, max_batch, err))
		goto fail;
	if (!(s->xdev = be->alloc(sizeof(float) * (size_t)max_batch * s->net.input_size))) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for a batch of %d", be->name, max_batch);
		goto fail;
	}
	snprintf(s->digest, sizeof(s->digest), "sha256:%s", s->bundle.weights_sha256);
	s->sc.score = score;
	s->sc.ctx = s;
	s->sc.input_size = s->net.input_size;
	memcpy(s->sc.shape, s->net.input, sizeof(s->sc.shape));
	s->sc.n_classes = s->net.n_classes;
	s->sc.classes = s->bundle.classes;
	s->sc.digest = s->digest;
	return 0;
fail:
	dlk_net_scorer_close(s);
	return -1;
}

void dlk_net_scorer_close(struct dlk_net_scorer *s)
{
	if (s->xdev)
		s->net.be->free(s->xdev);
	s->xdev = NULL;
	dlk_net_release(&s->net);
	dlk_bundle_release(&s->bundle);
}
