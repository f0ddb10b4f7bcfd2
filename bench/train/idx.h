/* Reads the Fashion-MNIST IDX .gz files into a struct dlk_dataset for the training tests and the
 * benchmark driver (libarchive's raw format + gzip filter). Header-only so that both can use it
 * without adding a second IDX decoder to the library: lib/data owns the real one. */
#ifndef DLK_BENCH_TRAIN_IDX_H
#define DLK_BENCH_TRAIN_IDX_H

#include <archive.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/dataset.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* whole decompressed file, at most max bytes; NULL on failure */
static unsigned char *idx_read_gz(const char *path, size_t max, size_t *len)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	unsigned char *buf = NULL;
	size_t n = 0, cap = 0;
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK || archive_read_next_header(a, &e) != ARCHIVE_OK)
		goto fail;
	for (;;) {
		if (cap - n < 1 << 16) {
			cap = cap ? cap * 2 : 1 << 20;
			if (cap > max + (1 << 17))
				goto fail;
			buf = realloc(buf, cap);
		}
		la_ssize_t r = archive_read_data(a, buf + n, cap - n);
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	archive_read_free(a);
	*len = n;
	return buf;
fail:
	archive_read_free(a);
	free(buf);
	return NULL;
}

static uint32_t idx_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* split "train" or "t10k"; keeps the first `limit` samples (0 = all). Returns 0 or -1. */
static int fmnist_load(const char *split, size_t limit, struct dlk_dataset *ds)
{
	char ip[256], lp[256];
	size_t ni, nl;
	snprintf(ip, sizeof(ip), FMNIST_DIR "/%s-images-idx3-ubyte.gz", split);
	snprintf(lp, sizeof(lp), FMNIST_DIR "/%s-labels-idx1-ubyte.gz", split);
	unsigned char *img = idx_read_gz(ip, 64u << 20, &ni), *lab = idx_read_gz(lp, 1u << 20, &nl);
	int ret = -1;
	if (!img || !lab || ni < 16 || nl < 8 || idx_be32(img) != 0x803 || idx_be32(lab) != 0x801)
		goto out;
	size_t n = idx_be32(img + 4);
	if (idx_be32(lab + 4) != n || idx_be32(img + 8) != 28 || idx_be32(img + 12) != 28 ||
	    ni != 16 + n * 784 || nl != 8 + n)
		goto out;
	if (limit && limit < n)
		n = limit;
	*ds = (struct dlk_dataset)DLK_DATASET_INIT;
	ds->n = n;
	ds->shape[0] = 1;
	ds->shape[1] = ds->shape[2] = 28;
	ds->sample_size = 784;
	ds->x = malloc(sizeof(float) * n * 784);
	ds->y = malloc(sizeof(int32_t) * n);
	for (size_t i = 0; i < n * 784; i++)
		ds->x[i] = (float)img[16 + i] * (1.0f / 255.0f);
	for (size_t i = 0; i < n; i++)
		ds->y[i] = lab[8 + i];
	ds->n_classes = 10;
	ret = 0;
out:
	free(img);
	free(lab);
	return ret;
}

static void fmnist_free(struct dlk_dataset *ds)
{
	free(ds->x);
	free(ds->y);
	*ds = (struct dlk_dataset)DLK_DATASET_INIT;
}

#endif
