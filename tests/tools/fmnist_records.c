/* Test fixture for the stream tests and bench/stream (built as build/tests/tools/fmnist_records):
 *   fmnist_records produce PROJECT BROKERS TOPIC N [FIRST [RATE]]
 *       produces N records to TOPIC: record i (from FIRST, default 0) has the key "img-%07d" and as
 *       value the raw pixels of test image i % 10000 (784 bytes, header dlk-datatype: UINT8; the
 *       scorer scales them as training did); at RATE records a second when given, else as fast as
 *       the broker takes them
 *   fmnist_records expect PROJECT BUNDLE N
 *       prints "KEY CLASS" for those N records, from dlk's in-process forward pass of the bundle
 * PROJECT is a dlk.yaml whose data.test is Fashion-MNIST's test split. */
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/train/bundle.h"
#include "lib/util/mem.h"

static int die(const char *what, const struct dlk_err *err)
{
	fprintf(stderr, "fmnist_records: %s: %s\n", what, err ? err->msg : "");
	return 1;
}

static int load(const char *project, struct dlk_dataset *ds)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *p = project_load(project, NULL, 0, &err);

	if (!p)
		return die(project, &err);
	if (dlk_data_load(&p->data, "test", NULL, ds, &err)) {
		project_free(p);
		return die("test data", &err);
	}
	project_free(p);
	return 0;
}

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	if (m->err) {
		fprintf(stderr, "fmnist_records: delivery failed: %s\n", rd_kafka_err2str(m->err));
		*(int *)opaque = 1;
	}
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int produce(struct dlk_dataset *ds, const char *brokers, const char *topic, long n, long first, double rate)
{
	double t0 = mono();
	char errstr[512], key[32];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	int failed = 0;

	if (ds->storage != DLK_STORE_U8) {
		fprintf(stderr, "fmnist_records: the test images are not 8-bit\n");
		return 1;
	}

	if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, sizeof(errstr)) ||
	    rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)) ||
	    rd_kafka_conf_set(conf, "linger.ms", "20", errstr, sizeof(errstr))) {
		fprintf(stderr, "fmnist_records: %s\n", errstr);
		return 1;
	}
	rd_kafka_conf_set_opaque(conf, &failed);
	rd_kafka_conf_set_dr_msg_cb(conf, dr);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		fprintf(stderr, "fmnist_records: %s\n", errstr);
		return 1;
	}
	for (long i = first; i < first + n && !failed; i++) {
		if (rate > 0 && (i - first) % 16 == 0) {
			double due = t0 + (double)(i - first) / rate, now = mono();
			if (due > now)
				usleep((useconds_t)((due - now) * 1e6));
		}
		const uint8_t *x = ds->x8 + (size_t)(i % (long)ds->n) * ds->sample_size;
		snprintf(key, sizeof(key), "img-%07ld", i);
		for (;;) {
			rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
			                                          RD_KAFKA_V_VALUE((void *)x, ds->sample_size),
			                                          RD_KAFKA_V_HEADER("dlk-datatype", "UINT8", 5),
			                                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
			if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
				rd_kafka_poll(rk, 50);
				continue;
			}
			if (e) {
				fprintf(stderr, "fmnist_records: produce: %s\n", rd_kafka_err2str(e));
				failed = 1;
			}
			break;
		}
		rd_kafka_poll(rk, 0);
	}
	if (rd_kafka_flush(rk, 60000))
		failed = 1;
	rd_kafka_destroy(rk);
	return failed;
}

static int expect(struct dlk_dataset *ds, const char *path, long n)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_net net = DLK_NET_INIT;
	const struct dlk_backend *be = dlk_backend_cpu();
	enum { BATCH = 100 };
	float *x = NULL;
	int rc = 1;

	be->set_threads(1);
	if (dlk_bundle_read(path, &b, &err) || dlk_bundle_net(&b, be, &net, &err) || dlk_net_reserve(&net, BATCH, &err)) {
		die(path, &err);
		goto out;
	}
	/* the 10,000 images' classes once, then one line per record */
	int *cls = xmalloc(sizeof(int) * ds->n);
	x = xmalloc(sizeof(float) * BATCH * ds->sample_size);
	for (size_t s = 0; s < ds->n; s += BATCH) {
		int nb = ds->n - s < BATCH ? (int)(ds->n - s) : BATCH;
		dlk_dataset_gather_range(ds, s, (size_t)nb, x);
		const float *z = dlk_net_forward(&net, x, nb, 0);
		for (int i = 0; i < nb; i++) {
			int best = 0;
			for (int k = 1; k < net.n_classes; k++)
				if (z[i * net.n_classes + k] > z[i * net.n_classes + best])
					best = k;
			cls[s + (size_t)i] = best;
		}
	}
	for (long i = 0; i < n; i++)
		printf("img-%07ld %d\n", i, cls[i % (long)ds->n]);
	free(cls);
	rc = 0;
out:
	free(x);
	dlk_net_release(&net);
	dlk_bundle_release(&b);
	return rc;
}

int main(int argc, char **argv)
{
	struct dlk_dataset ds = DLK_DATASET_INIT;
	int rc;

	if (argc >= 6 && !strcmp(argv[1], "produce")) {
		if (load(argv[2], &ds))
			return 1;
		rc = produce(&ds, argv[3], argv[4], atol(argv[5]), argc > 6 ? atol(argv[6]) : 0,
		             argc > 7 ? atof(argv[7]) : 0);
	} else if (argc == 5 && !strcmp(argv[1], "expect")) {
		if (load(argv[2], &ds))
			return 1;
		rc = expect(&ds, argv[3], atol(argv[4]));
	} else {
		fprintf(stderr, "usage: fmnist_records produce PROJECT BROKERS TOPIC N [FIRST]\n"
		                "       fmnist_records expect PROJECT BUNDLE N\n");
		return 2;
	}
	dlk_dataset_release(&ds);
	return rc;
}
