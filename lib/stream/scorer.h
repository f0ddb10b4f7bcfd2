/* A model bundle as a stream scorer: the bundle read and verified, its network built on the CPU
 * backend, score() running forward passes of up to max_batch examples. */
#ifndef DLK_STREAM_SCORER_H
#define DLK_STREAM_SCORER_H

#include "lib/nn/net.h"
#include "lib/stream/stream.h"
#include "lib/train/bundle.h"

struct dlk_net_scorer {
	struct dlk_bundle bundle;
	struct dlk_net net;
	float *xdev;
	int max_batch;
	char digest[80];          /* "sha256:" + the weights' sha256 */
	struct dlk_stream_scorer sc;
};

/* Reads the bundle at `path` and makes it ready to score batches of up to max_batch examples with
 * `threads` BLAS threads (0 = all cores). -1 with a message naming the bundle on failure. */
int dlk_net_scorer_open(struct dlk_net_scorer *s, const char *path, int max_batch, int threads,
                        struct dlk_err *err);
void dlk_net_scorer_close(struct dlk_net_scorer *s);

#endif
