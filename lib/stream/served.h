/* The stream's scorer on a model the inference server serves: a round of records is cut into jobs
 * of at most max_batch rows, all handed to the model's batcher at once (so the compute workers
 * run them side by side, and HTTP requests share their batches), and waited for together. */
#ifndef DLK_STREAM_SERVED_H
#define DLK_STREAM_SERVED_H

#include <pthread.h>

#include "lib/serve/batcher.h"
#include "lib/serve/model.h"
#include "lib/stream/stream.h"

struct dlk_stream_served {
	struct dlk_batcher *batcher;
	int max_batch;
	size_t in_size, out_size;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int left;                 /* jobs of the current round not done */
	char digest[80];          /* "sha256:" + the weights' sha256 */
	struct dlk_stream_scorer sc;
};

/* Makes a scorer of a loaded, ready model (its batcher set); release with _release. */
void dlk_stream_served_init(struct dlk_stream_served *s, struct dlk_serve_model *m, int max_batch);
void dlk_stream_served_release(struct dlk_stream_served *s);

#endif
