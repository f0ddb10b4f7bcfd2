/* Fashion-MNIST through lib/data (dlk_data_load), for the training tests and the benchmark
 * driver: the Debian package's IDX files (or DLK_FMNIST_DIR's), scaled to [0, 1]. */
#ifndef DLK_BENCH_TRAIN_FMNIST_H
#define DLK_BENCH_TRAIN_FMNIST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/dataset.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* The directory of the IDX files: DLK_FMNIST_DIR where set (the GPU kit carries its own copy),
 * else the Debian package's. */
static inline const char *fmnist_dir(void)
{
	const char *d = getenv("DLK_FMNIST_DIR");
	return d && *d ? d : FMNIST_DIR;
}

/* fmnist_dir()/name in buf; returns buf */
static inline const char *fmnist_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", fmnist_dir(), name);
	return buf;
}

/* split "train" or "test"; keeps the first `limit` samples (0 = all). Returns 0, or -1 with the
 * data layer's message in err. */
static int fmnist_load(const char *split, size_t limit, struct dlk_dataset *ds, struct dlk_err *err)
{
	struct dlk_data d;
	memset(&d, 0, sizeof(d));
	d.format = DLK_DATA_IDX;
	char tri[4096], trl[4096], tei[4096], tel[4096];
	d.train.images.url = (char *)fmnist_path(tri, sizeof(tri), "train-images-idx3-ubyte.gz");
	d.train.labels.url = (char *)fmnist_path(trl, sizeof(trl), "train-labels-idx1-ubyte.gz");
	d.test.images.url = (char *)fmnist_path(tei, sizeof(tei), "t10k-images-idx3-ubyte.gz");
	d.test.labels.url = (char *)fmnist_path(tel, sizeof(tel), "t10k-labels-idx1-ubyte.gz");
	d.csv_header = -1;
	d.csv_label_column = -1;
	d.scale = 1.0f / 255.0f;
	d.mean = 0.0f;
	d.std = 1.0f;
	d.max_bytes = 1LL << 30;
	struct dlk_data_opts o;
	memset(&o, 0, sizeof(o));
	o.shape[0] = 1;
	o.shape[1] = o.shape[2] = 28;
	/* local files are read in place; the cache directory is only named, never filled */
	o.cache_dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	*ds = (struct dlk_dataset)DLK_DATASET_INIT;
	if (dlk_data_load(&d, split, &o, ds, err))
		return -1;
	if (limit && limit < ds->n)
		ds->n = limit;
	return 0;
}

#endif
