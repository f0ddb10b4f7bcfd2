/* Plain text corpora for language models: reading, splitting, packing and the token cache. */
#include "lib/data/corpus.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/unpack.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

int dlk_corpus_read(const char *path, const char *name, unsigned long long max_bytes, struct dlk_buf *out,
                    struct dlk_err *err)
{
	struct archive_entry *e;
	unsigned long long total = 0;
	int r, files = 0;
	struct archive *a = dlk_archive_open_file(path, name, err);

	if (!a)
		return -1;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *member = archive_entry_pathname(e) ? archive_entry_pathname(e) : "?";
		if (archive_entry_filetype(e) != AE_IFREG && archive_format(a) != ARCHIVE_FORMAT_RAW)
			continue;
		if (dlk_archive_read_entry(a, name, member, max_bytes, &total, NULL, NULL, out, err) < 0) {
			dlk_archive_close(a);
			return -1;
		}
		files++;
	}
	if (r != ARCHIVE_EOF) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s (after %llu unpacked bytes)", name, archive_error_string(a), total);
		dlk_archive_close(a);
		return -1;
	}
	dlk_archive_close(a);
	return files;
}

void dlk_corpus_split(size_t n, double f, int test, size_t *lo, size_t *hi)
{
	size_t cut = n;
	if (f > 0 && f < 1)
		cut = n - (size_t)((double)n * f);
	*lo = test ? cut : 0;
	*hi = test ? n : cut;
}

size_t dlk_corpus_pack(const int32_t *ids, size_t n, int T, float **x, float **t)
{
	size_t count = T > 0 && n > (size_t)T ? (n - 1) / (size_t)T : 0, k = (size_t)(T > 0 ? T : 0);
	*x = xmalloc(sizeof(float) * (count * k + 1));
	*t = xmalloc(sizeof(float) * (count * k + 1));
	for (size_t i = 0; i < count; i++)
		for (size_t j = 0; j < k; j++) {
			(*x)[i * k + j] = (float)ids[i * k + j];
			(*t)[i * k + j] = (float)ids[i * k + j + 1];
		}
	return count;
}

void dlk_corpus_key(const void *text, size_t len, const char *recipe, char hex[65])
{
	struct dlk_sha256 h;
	char th[65];
	dlk_sha256_hex(text, len, th);
	dlk_sha256_begin(&h);
	dlk_sha256_update(&h, "dlk-tokens 1\n", 13);
	dlk_sha256_update(&h, th, 64);
	dlk_sha256_update(&h, "\n", 1);
	dlk_sha256_update(&h, recipe, strlen(recipe));
	dlk_sha256_end(&h, hex);
}

void dlk_token_cache_write(struct dlk_buf *out, const struct dlk_tokenizer *tok, const int32_t *ids, size_t n)
{
	struct dlk_buf tb = DLK_BUF_INIT;
	dlk_tokenizer_save(tok, &tb);
	dlk_buf_addf(out, "dlk-tokens 1\ntokenizer %zu\n", tb.len);
	dlk_buf_add(out, tb.data, tb.len);
	dlk_buf_addf(out, "ids %zu\n", n);
	dlk_buf_grow(out, n * 4);
	for (size_t i = 0; i < n; i++) {
		uint32_t v = (uint32_t)ids[i];
		unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
		                       (unsigned char)(v >> 24) };
		dlk_buf_add(out, b, 4);
	}
	dlk_buf_release(&tb);
}

/* "KEY N\n" at *pos: N into *v, *pos past the line; -1 when it is not that */
static int header_line(const char *p, size_t len, size_t *pos, const char *key, size_t *v)
{
	size_t k = strlen(key), i = *pos + k, val = 0, digits = 0;
	if (len - *pos < k + 2 || memcmp(p + *pos, key, k) || p[i] != ' ')
		return -1;
	for (i++; i < len && p[i] >= '0' && p[i] <= '9' && digits < 19; i++, digits++)
		val = val * 10 + (size_t)(p[i] - '0');
	if (!digits || i >= len || p[i] != '\n')
		return -1;
	*v = val;
	*pos = i + 1;
	return 0;
}

int dlk_token_cache_parse(const void *buf, size_t len, const char *name, struct dlk_tokenizer **tok, int32_t **ids,
                          size_t *n, struct dlk_err *err)
{
	const char *p = buf, *magic = "dlk-tokens 1\n";
	const unsigned char *u = buf;
	size_t pos = strlen(magic), tlen, count;

	*tok = NULL;
	*ids = NULL;
	*n = 0;
	if (len < pos || memcmp(p, magic, pos))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a token cache (no 'dlk-tokens 1' line)", name);
	if (header_line(p, len, &pos, "tokenizer", &tlen) || tlen > len - pos)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': line 2: expected 'tokenizer BYTES' within the file", name);
	if (dlk_tokenizer_load(p + pos, tlen, name, tok, err) < 0)
		return -1;
	pos += tlen;
	if (header_line(p, len, &pos, "ids", &count) || count > (len - pos) / 4 || (len - pos) != count * 4) {
		dlk_tokenizer_free(*tok);
		*tok = NULL;
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': expected 'ids N' and then exactly N 4-byte ids (byte %zu)", name,
		                pos);
	}
	*ids = xmalloc(sizeof(int32_t) * (count + 1));
	for (size_t i = 0; i < count; i++) {
		const unsigned char *b = u + pos + 4 * i;
		uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		if (v >= (uint32_t)(*tok)->vocab_size) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': id %zu is %u, outside the tokenizer's %d", name, i, v,
			         (int)(*tok)->vocab_size);
			dlk_tokenizer_free(*tok);
			free(*ids);
			*tok = NULL;
			*ids = NULL;
			return -1;
		}
		(*ids)[i] = (int32_t)v;
	}
	*n = count;
	return 0;
}
