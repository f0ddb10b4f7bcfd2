/* The token ids and labels dlk trains the text classifier on, for the PyTorch peer of
 * bench/models/run.sh, made by dlk's own code (lib/data/text.h, lib/data/bpe.h):
 *   dlk_text_ids TOKENIZER LENGTH TRAIN.jsonl TEST.jsonl OUTDIR
 * TOKENIZER is a bundle's tokenizer.txt. Writes OUTDIR/{train,test}.ids (int32, LENGTH ids a row,
 * padded with the pad id) and OUTDIR/{train,test}.labels (int32 class indices: the training
 * split's distinct labels in byte order, as `dlk train` numbers them), native byte order. */
#include <stdio.h>
#include <stdlib.h>

#include "lib/data/bpe.h"
#include "lib/data/text.h"
#include "lib/util/buf.h"

static int write_all(const char *dir, const char *name, const void *p, size_t size, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, size, n, f) != n || fclose(f)) {
		fprintf(stderr, "error: %s: cannot write it\n", path);
		return -1;
	}
	return 0;
}

static int split(const struct dlk_tokenizer *t, int length, const char *path, const char *dir, const char *stem,
                 const char *const *classes, int n_classes, char ***found, int *n_found)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], name[64];
	int rc = -1;

	if (dlk_buf_read_file(&b, path, (size_t)1 << 31, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "error: %s: %s\n", path, msg);
		return -1;
	}
	if (dlk_text_rows_parse(b.data, b.len, path, 1, "text", "label", NULL, &r, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)length * (r.n ? r.n : 1));
	int32_t *y = malloc(sizeof(int32_t) * (r.n ? r.n : 1));
	float *row = malloc(sizeof(float) * (size_t)length);
	int32_t *scratch = malloc(sizeof(int32_t) * (size_t)length);
	if (!ids || !y || !row || !scratch) {
		fprintf(stderr, "error: out of memory\n");
		goto free_all;
	}
	if (dlk_text_labels(&r, path, classes, n_classes, y, found, n_found, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto free_all;
	}
	for (size_t i = 0; i < r.n; i++) {
		dlk_text_encode_row(t, r.text[i], r.len[i], length, scratch, row);
		for (int j = 0; j < length; j++)
			ids[i * (size_t)length + (size_t)j] = (int32_t)row[j];
	}
	snprintf(name, sizeof(name), "%s.ids", stem);
	if (write_all(dir, name, ids, sizeof(int32_t) * (size_t)length, r.n))
		goto free_all;
	snprintf(name, sizeof(name), "%s.labels", stem);
	if (write_all(dir, name, y, sizeof(int32_t), r.n))
		goto free_all;
	printf("%s: %zu rows of %d ids\n", stem, r.n, length);
	rc = 0;
free_all:
	free(ids);
	free(y);
	free(row);
	free(scratch);
out:
	dlk_text_rows_release(&r);
	dlk_buf_release(&b);
	return rc;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_tokenizer *t = NULL;
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], **classes = NULL, **again = NULL;
	int n_classes = 0, n_again = 0, rc = 1;

	if (argc != 6 || atoi(argv[2]) <= 0) {
		fprintf(stderr, "usage: dlk_text_ids TOKENIZER LENGTH TRAIN.jsonl TEST.jsonl OUTDIR\n");
		return 2;
	}
	if (dlk_buf_read_file(&b, argv[1], (size_t)1 << 30, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "error: %s: %s\n", argv[1], msg);
		return 1;
	}
	if (dlk_tokenizer_load(b.data, b.len, argv[1], &t, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (split(t, atoi(argv[2]), argv[3], argv[5], "train", NULL, 0, &classes, &n_classes) ||
	    split(t, atoi(argv[2]), argv[4], argv[5], "test", (const char *const *)classes, n_classes, &again, &n_again))
		goto out;
	printf("%d classes, vocabulary %d (pad %d)\n", n_classes, (int)t->vocab_size, (int)t->pad_id);
	rc = 0;
out:
	for (int i = 0; i < n_classes; i++)
		free(classes[i]);
	free(classes);
	for (int i = 0; i < n_again; i++)
		free(again[i]);
	free(again);
	dlk_tokenizer_free(t);
	dlk_buf_release(&b);
	return rc;
}
