/* Plain text corpora for task lm (lib/data/corpus.h): packing into context + 1 sequences, the
 * validation split at the corpus's end, the token cache (a second load reads it, a changed corpus
 * tokenizes again, a damaged cache is refused by its parser and tokenized over), archives of
 * several text files, and a BPE trained on the corpus kept with its tokens. */
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/data/corpus.h"
#include "lib/data/dataset.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

static struct dlk_err err = DLK_ERR_INIT;
static char *dir;

static void put(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(data, 1, len, f) == len);
	if (f)
		fclose(f);
}

/* the token cache files in dir/cache, and the first one's name */
static int cache_files(char *first, size_t len)
{
	char *c = xasprintf("%s/cache", dir);
	DIR *d = opendir(c);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "tokens-", 7) && n++ == 0 && first)
			snprintf(first, len, "%s/%s", c, e->d_name);
	if (d)
		closedir(d);
	free(c);
	return n;
}

static void test_pack_split(void)
{
	int32_t ids[21];
	float *x, *t;
	size_t lo, hi;
	for (int i = 0; i < 21; i++)
		ids[i] = 100 + i;
	/* 21 tokens, context 4: 5 sequences sharing their edges, every token after the first a target */
	CHECK(dlk_corpus_pack(ids, 21, 4, &x, &t) == 5);
	CHECK(x[0] == 100 && x[3] == 103 && t[0] == 101 && t[3] == 104 && x[4] == 104 && t[19] == 120);
	free(x), free(t);
	CHECK(dlk_corpus_pack(ids, 4, 4, &x, &t) == 0); /* 4 tokens: no sequence of 4 + 1 */
	free(x), free(t);
	dlk_corpus_split(100, 0.1, 0, &lo, &hi);
	CHECK(lo == 0 && hi == 90);
	dlk_corpus_split(100, 0.1, 1, &lo, &hi);
	CHECK(lo == 90 && hi == 100);
	dlk_corpus_split(100, 0, 0, &lo, &hi);
	CHECK(lo == 0 && hi == 100);
}

static void spec_of(struct dlk_data *d, struct dlk_data_opts *o, const char *corpus, char *cache)
{
	memset(d, 0, sizeof(*d));
	memset(o, 0, sizeof(*o));
	d->format = DLK_DATA_TEXT;
	d->train.source.url = (char *)corpus;
	d->scale = 1, d->std = 1;
	d->max_bytes = 1 << 24;
	d->text.tokenizer = DLK_TOKENIZER_BYTE;
	d->validation = 0.25;
	d->cache_dir = cache;
	o->shape[0] = o->shape[1] = 1, o->shape[2] = 8;
	o->task = DLK_TASK_LM;
}

static void test_load_and_cache(void)
{
	char *corpus = xasprintf("%s/c.txt", dir), *cache = xasprintf("%s/cache", dir), path[1024];
	struct dlk_data d;
	struct dlk_data_opts o;
	struct dlk_dataset tr = DLK_DATASET_INIT, te = DLK_DATASET_INIT, again = DLK_DATASET_INIT;
	char text[401];
	for (int i = 0; i < 400; i++)
		text[i] = (char)('a' + i % 26);
	put(corpus, text, 400);
	spec_of(&d, &o, corpus, cache);

	/* 400 bytes, byte ids 1 + b: 300 for training (37 sequences of 8 + 1), 100 held out (12) */
	CHECK_MSG(dlk_data_load(&d, "train", &o, &tr, &err) == 0, "the corpus loads: %s", err.msg);
	CHECK(tr.n == 37 && tr.sample_size == 8 && tr.target_size == 8 && tr.tokenizer && tr.n_classes == 0);
	CHECK(tr.x[0] == 1 + 'a' && tr.t[0] == 1 + 'b' && tr.x[8] == 1 + 'i' && tr.t[7] == 1 + 'i');
	CHECK(cache_files(path, sizeof(path)) == 1);
	o.train = &tr;
	CHECK_MSG(dlk_data_load(&d, "test", &o, &te, &err) == 0, "the held-out split loads: %s", err.msg);
	/* token 300 is byte 300: 300 % 26 = 14, 'o' */
	CHECK(te.n == 12 && te.x[0] == 1 + 'o' && te.t[0] == 1 + 'p');
	dlk_dataset_release(&te);
	o.train = NULL;

	/* the second load reads the cache: a cache rewritten with other ids gives those ids */
	{
		int32_t ids[400];
		struct dlk_buf b = DLK_BUF_INIT;
		for (int i = 0; i < 400; i++)
			ids[i] = 7;
		dlk_token_cache_write(&b, tr.tokenizer, ids, 400);
		put(path, b.data, b.len);
		dlk_buf_release(&b);
	}
	CHECK(dlk_data_load(&d, "train", &o, &again, &err) == 0);
	CHECK_MSG(again.n == 37 && again.x[0] == 7 && again.t[5] == 7, "the second load took the cache's tokens");
	dlk_dataset_release(&again);

	/* a damaged cache is tokenized over, and rewritten */
	put(path, "dlk-tokens 1\ntokenizer 99999\n", 29);
	CHECK(dlk_data_load(&d, "train", &o, &again, &err) == 0 && again.x[0] == 1 + 'a');
	dlk_dataset_release(&again);
	CHECK(dlk_data_load(&d, "train", &o, &again, &err) == 0 && again.x[0] == 1 + 'a');
	dlk_dataset_release(&again);

	/* a changed corpus is tokenized again, into a second cache file */
	text[0] = 'z';
	put(corpus, text, 400);
	CHECK(dlk_data_load(&d, "train", &o, &again, &err) == 0 && again.x[0] == 1 + 'z');
	CHECK(cache_files(NULL, 0) == 2);
	dlk_dataset_release(&again);

	/* too short for one sequence: the error says so and what to do */
	put(corpus, "abc", 3);
	dlk_err_clear(&err);
	CHECK(dlk_data_load(&d, "train", &o, &again, &err) < 0);
	CHECK_CONTAINS(err.msg, "c.txt': 3 tokens, too few for one sequence of 8 + 1");
	CHECK_CONTAINS(err.hint, "a shorter model.input");
	dlk_dataset_release(&tr);
	free(corpus);
	free(cache);
}

/* a tar of two text files is one corpus, the files in the archive's order; a BPE trained on it is
 * cached with the tokens, so the second load has the same tokenizer without training one */
static void test_archive_bpe(void)
{
	char *a = xasprintf("%s/t", dir), *cmd, *tarf = xasprintf("%s/corpus.tar.gz", dir),
	     *cache = xasprintf("%s/cache2", dir);
	struct dlk_data d;
	struct dlk_data_opts o;
	struct dlk_dataset one = DLK_DATASET_INIT, two = DLK_DATASET_INIT;
	cmd = xasprintf("mkdir -p '%s' && printf 'the cat sat on the mat. ' >'%s/1.txt' && "
	                "printf 'the dog sat on the log. the cat and the dog. ' >'%s/2.txt' && "
	                "tar -czf '%s' -C '%s' 1.txt 2.txt", a, a, a, tarf, a);
	CHECK(system(cmd) == 0);
	spec_of(&d, &o, tarf, cache);
	d.validation = 0;
	d.text.tokenizer = DLK_TOKENIZER_BPE;
	d.text.vocab_size = 270;
	o.shape[2] = 4;
	CHECK_MSG(dlk_data_load(&d, "train", &o, &one, &err) == 0, "a tar of text loads: %s", err.msg);
	CHECK(one.tokenizer && one.tokenizer->n_merges > 0 && one.n > 0);
	CHECK(dlk_data_load(&d, "train", &o, &two, &err) == 0);
	CHECK(two.tokenizer && two.tokenizer->n_merges == one.tokenizer->n_merges && two.n == one.n &&
	      !memcmp(two.x, one.x, sizeof(float) * one.n * 4));
	dlk_dataset_release(&one);
	dlk_dataset_release(&two);
	free(cmd);
	free(a);
	free(tarf);
	free(cache);
}

static void test_cache_parse(void)
{
	struct dlk_tokenizer *byte = dlk_tokenizer_byte(), *t;
	struct dlk_buf b = DLK_BUF_INIT;
	int32_t ids[3] = { 1, 256, 3 }, *got;
	size_t n;
	dlk_token_cache_write(&b, byte, ids, 3);
	CHECK(dlk_token_cache_parse(b.data, b.len, "c.tok", &t, &got, &n, &err) == 0 && n == 3 && got[1] == 256 &&
	      t->vocab_size == 257);
	dlk_tokenizer_free(t);
	free(got);
	/* cut short, an id past the vocabulary, not a cache */
	CHECK(dlk_token_cache_parse(b.data, b.len - 1, "c.tok", &t, &got, &n, &err) < 0 && !t && !got);
	CHECK_CONTAINS(err.msg, "'c.tok': expected 'ids N' and then exactly N 4-byte ids");
	b.data[b.len - 8] = 1, b.data[b.len - 7] = 1; /* the second id becomes 257 */
	CHECK(dlk_token_cache_parse(b.data, b.len, "c.tok", &t, &got, &n, &err) < 0);
	CHECK_CONTAINS(err.msg, "'c.tok': id 1 is 257, outside the tokenizer's 257");
	CHECK(dlk_token_cache_parse("hello", 5, "c.tok", &t, &got, &n, &err) < 0);
	CHECK_CONTAINS(err.msg, "not a token cache");
	dlk_buf_release(&b);
	dlk_tokenizer_free(byte);
}

int main(void)
{
	dir = test_tmpdir("datalm");
	if (!dir)
		return 1;
	test_pack_split();
	test_load_and_cache();
	test_archive_bpe();
	test_cache_parse();
	test_tmpdir_remove(dir);
	return CHECK_DONE();
}
