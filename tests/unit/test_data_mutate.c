/* The decoders on mutated inputs: every mutant of the fuzz seed corpora (tests/fuzz/data/) must
 * decode or fail with a message, never crash, hang or leak (run under SANITIZE=1 for the teeth).
 * The mutations come from a fixed-seed generator, so a failure reproduces. */
#include "tests/unit/check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/data/decode.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#define MUTANTS 1000

static uint64_t rng = 0x243F6A8885A308D3ULL;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* One random edit: flip a byte, set an interesting value, truncate, insert, or duplicate. */
static void mutate(struct dlk_buf *b)
{
	static const unsigned char interesting[] = { 0, 1, 0x7f, 0x80, 0xff, '"', ',', '\n', '.', '0' };
	size_t pos = b->len ? next() % b->len : 0;

	switch (next() % 5) {
	case 0:
		if (b->len)
			b->data[pos] ^= (char)(1 << (next() % 8));
		break;
	case 1:
		if (b->len)
			b->data[pos] = (char)interesting[next() % sizeof(interesting)];
		break;
	case 2:
		b->len = pos;
		break;
	case 3: {
		size_t n = 1 + next() % 8;
		dlk_buf_grow(b, n);
		memmove(b->data + pos + n, b->data + pos, b->len - pos);
		for (size_t i = 0; i < n; i++)
			b->data[pos + i] = (char)next();
		b->len += n;
		break;
	}
	default: {
		size_t n = b->len - pos < 64 ? b->len - pos : 64;
		char tmp[64];
		memcpy(tmp, b->data + pos, n);
		dlk_buf_add(b, tmp, n);
		break;
	}
	}
}

static int decode(const char *kind, const struct dlk_buf *b, struct dlk_err *err)
{
	struct dlk_samples s = DLK_SAMPLES_INIT;
	struct dlk_idx idx = DLK_IDX_INIT;
	struct dlk_csv_opts co = { -1, -1, 0, 0, NULL, 0, 0 };
	int r;

	if (!strcmp(kind, "idx")) {
		r = dlk_idx_decode(b->data, b->len, "seed", &idx, err);
		dlk_idx_release(&idx);
	} else if (!strcmp(kind, "csv")) {
		r = dlk_csv_decode(b->data, b->len, "seed", &co, &s, err);
	} else {
		r = dlk_tar_decode(b->data, b->len, "seed", NULL, 1 << 20, &s, err);
	}
	dlk_samples_release(&s);
	return r;
}

int main(void)
{
	static const char *const kinds[] = { "idx", "csv", "tar" };

	for (size_t k = 0; k < DLK_ARRAY_SIZE(kinds); k++) {
		char *dir = xasprintf("tests/fuzz/data/%s", kinds[k]);
		DIR *d = opendir(dir);
		struct dirent *de;
		int seeds = 0;

		CHECK_MSG(d != NULL, "seed corpus %s exists", dir);
		while (d && (de = readdir(d))) {
			struct dlk_buf seed = DLK_BUF_INIT, b = DLK_BUF_INIT;
			char msg[256], *path;
			int bad = 0;

			if (de->d_name[0] == '.')
				continue;
			path = xasprintf("%s/%s", dir, de->d_name);
			if (dlk_buf_read_file(&seed, path, 1 << 20, msg, sizeof(msg)) < 0) {
				CHECK_MSG(0, "%s", msg);
				free(path);
				continue;
			}
			seeds++;
			for (int m = 0; m < MUTANTS; m++) {
				struct dlk_err err = DLK_ERR_INIT;
				int edits = 1 + (int)(next() % 4), r;
				dlk_buf_reset(&b);
				dlk_buf_add(&b, seed.data, seed.len);
				while (edits--)
					mutate(&b);
				r = decode(kinds[k], &b, &err);
				if (!(r == 0 || (r == -1 && err.msg[0] && err.code == DLK_EXIT_CONFIG))) {
					if (!bad++)
						printf("# %s mutant %d: r=%d code=%d msg='%s'\n", path, m, r, err.code, err.msg);
				}
			}
			CHECK_MSG(!bad, "%s: %d mutants decode or fail with a message", path, MUTANTS);
			dlk_buf_release(&seed);
			dlk_buf_release(&b);
			free(path);
		}
		if (d)
			closedir(d);
		CHECK_MSG(seeds > 0, "%s has seeds", dir);
		free(dir);
	}
	return CHECK_DONE();
}
