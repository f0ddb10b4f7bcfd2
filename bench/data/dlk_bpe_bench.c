/* How fast dlk trains a BPE tokenizer and encodes with it (lib/data/bpe.c):
 *   dlk_bpe_bench VOCAB_SIZE FILE...
 * trains on the files' bytes (each cut into words on its own), then encodes them all, and prints
 * the size, the seconds of each phase and MB/s. bench/data/run.sh runs it on 40 MB of English. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lib/data/bpe.h"
#include "lib/util/buf.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf *files;
	size_t total = 0, ids = 0;
	char msg[256];

	if (argc < 3) {
		fprintf(stderr, "usage: dlk_bpe_bench VOCAB_SIZE FILE...\n");
		return 2;
	}
	files = calloc((size_t)argc, sizeof(*files));
	for (int i = 2; i < argc; i++) {
		if (dlk_buf_read_file(&files[i], argv[i], (size_t)1 << 32, msg, sizeof(msg)) < 0) {
			fprintf(stderr, "error: %s: %s\n", argv[i], msg);
			return 1;
		}
		total += files[i].len;
	}
	double t0 = now();
	struct dlk_bpe_counter *c = dlk_bpe_counter_new();
	for (int i = 2; i < argc; i++)
		dlk_bpe_counter_add(c, files[i].data, files[i].len);
	double t1 = now();
	struct dlk_tokenizer *t = dlk_bpe_counter_train(c, atoi(argv[1]), &err);
	double t2 = now();
	if (!t) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	for (int i = 2; i < argc; i++)
		ids += dlk_tokenizer_encode(t, files[i].data, files[i].len, NULL, 0);
	double t3 = now();
	double mb = (double)total / 1e6;
	printf("text %.1f MB, vocab %d (%d merges)\n", mb, (int)t->vocab_size, (int)t->n_merges);
	printf("train: count words %.2f s + merges %.2f s = %.2f s (%.1f MB/s)\n", t1 - t0, t2 - t1, t2 - t0,
	       mb / (t2 - t0));
	printf("encode: %zu ids (%.2f bytes/id) in %.2f s (%.1f MB/s, one thread)\n", ids, (double)total / (double)ids,
	       t3 - t2, mb / (t3 - t2));
	dlk_bpe_counter_free(c);
	dlk_tokenizer_free(t);
	for (int i = 2; i < argc; i++)
		dlk_buf_release(&files[i]);
	free(files);
	return 0;
}
