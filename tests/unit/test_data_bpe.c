/* Tokenizers: the byte tokenizer's round trip, BPE training against a known merge sequence, word
 * edges, GPT-2's vocab.json/merges.txt format and ids, and the text form bundles keep. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#include "lib/data/bpe.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

static struct dlk_err err = DLK_ERR_INIT;

static int round_trips(const struct dlk_tokenizer *t, const void *text, size_t len)
{
	int32_t *ids = xmalloc((len + 1) * sizeof(*ids));
	struct dlk_buf back = DLK_BUF_INIT;
	size_t n = dlk_tokenizer_encode(t, text, len, ids, len + 1);
	int ok = n <= len;
	for (size_t i = 0; ok && i < n; i++)
		ok = ids[i] >= 0 && ids[i] < t->vocab_size && ids[i] != t->pad_id;
	dlk_tokenizer_decode(t, ids, n < len ? n : len, &back);
	ok = ok && back.len == len && !memcmp(back.data, text, len);
	dlk_buf_release(&back);
	free(ids);
	return ok;
}

static void test_byte(void)
{
	struct dlk_tokenizer *t = dlk_tokenizer_byte();
	unsigned char all[256];
	int32_t ids[300];

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	CHECK(t->vocab_size == 257 && t->pad_id == 0);
	CHECK(dlk_tokenizer_encode(t, all, 256, ids, 300) == 256);
	CHECK(ids[0] == 1 && ids[255] == 256 && ids['A'] == 'A' + 1);
	CHECK(round_trips(t, all, 256));
	CHECK(round_trips(t, "caf\xc3\xa9 \n\t x", 11));
	/* max bounds what is written, not what is counted */
	CHECK(dlk_tokenizer_encode(t, "hello", 5, ids, 2) == 5 && ids[0] == 'h' + 1 && ids[1] == 'e' + 1);
	dlk_tokenizer_free(t);
}

/* The example every BPE text uses: aaabdaaabac -> Z=aa, Y=ab, X=ZY -> XdXac */
static void test_known_merges(void)
{
	struct dlk_tokenizer *t = dlk_bpe_train("aaabdaaabac", 11, 300, &err);
	int32_t ids[16];
	const int32_t a = 'a' + 1, b = 'b' + 1;

	CHECK_MSG(t != NULL, "trains: %s", err.msg);
	if (!t)
		return;
	CHECK_MSG(t->n_merges == 3 && t->vocab_size == 260, "3 merges (no pair occurs twice after them): %d", t->n_merges);
	CHECK(t->merges[0].left == a && t->merges[0].right == a && t->merges[0].result == 257);
	CHECK(t->merges[1].left == a && t->merges[1].right == b && t->merges[1].result == 258);
	CHECK(t->merges[2].left == 257 && t->merges[2].right == 258 && t->merges[2].result == 259);
	CHECK(dlk_tokenizer_encode(t, "aaabdaaabac", 11, ids, 16) == 5);
	CHECK(ids[0] == 259 && ids[1] == 'd' + 1 && ids[2] == 259 && ids[3] == a && ids[4] == 'c' + 1);
	CHECK(round_trips(t, "aaabdaaabac", 11));
	CHECK(round_trips(t, "abacaaaa ab\x00\xff", 13));
	dlk_tokenizer_free(t);
	CHECK(dlk_bpe_train("x", 1, 257, &err) == NULL);
	CHECK_STR(err.msg, "a BPE vocabulary needs at least 258 ids (257 for padding and bytes), not 257");
}

/* merges stay inside GPT-2's words: a space begins the word after it, never ends one */
static void test_word_edges(void)
{
	const char *text = "a b a b a b a b it's it's 12 12 !! !! a  b a  b";
	struct dlk_tokenizer *t = dlk_bpe_train(text, strlen(text), 400, &err);
	int ok = 1, saw_space_a = 0, saw_s = 0;

	if (!t)
		return;
	for (int32_t r = 0; r < t->n_merges; r++) {
		int32_t id = t->merges[r].result;
		const uint8_t *p = t->tok_bytes + t->tok_off[id];
		size_t n = t->tok_off[id + 1] - t->tok_off[id];
		/* a space only at the start, followed by one class of bytes */
		for (size_t i = 1; i < n; i++)
			ok = ok && p[i] != ' ' && !(p[0] != ' ' && p[0] != '\'' && ((p[0] >= 'a') != (p[i] >= 'a')));
		saw_space_a |= n == 2 && !memcmp(p, " a", 2);
		saw_s |= n == 2 && !memcmp(p, "'s", 2);
	}
	CHECK_MSG(ok, "no merge crosses a word edge");
	CHECK(saw_space_a && saw_s);
	CHECK(round_trips(t, text, strlen(text)));
	dlk_tokenizer_free(t);
}

/* trained on English, the tokenizer is deterministic, compresses, and round-trips any bytes */
static void test_train_text(void)
{
	struct dlk_buf text = DLK_BUF_INIT;
	static const char *const words[] = { "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as",
		                             "was", "with", "be", "by", "on", "not", "he", "I", "this", "are", "or" };
	unsigned s = 1;
	for (int i = 0; i < 20000; i++) {
		s = s * 1103515245u + 12345u;
		dlk_buf_addf(&text, "%s%s", words[(s >> 16) % 22], (s >> 8) % 13 ? " " : ".\n");
	}
	struct dlk_tokenizer *t1 = dlk_bpe_train(text.data, text.len, 320, &err);
	struct dlk_tokenizer *t2 = dlk_bpe_train(text.data, text.len, 320, &err);
	if (!t1 || !t2)
		return;
	/* it stops before 63 merges: by then every word is one token and no pair occurs again */
	CHECK_MSG(t1->n_merges == t2->n_merges && t1->n_merges < 63, "%d merges", t1->n_merges);
	int32_t one[8];
	CHECK(dlk_tokenizer_encode(t1, " that", 5, one, 8) == 1 && dlk_tokenizer_encode(t1, "with", 4, one, 8) == 1);
	CHECK(!memcmp(t1->merges, t2->merges, (size_t)t1->n_merges * sizeof(*t1->merges)));
	size_t n = dlk_tokenizer_encode(t1, text.data, text.len, NULL, 0);
	CHECK_MSG(n * 3 < text.len, "%zu ids for %zu bytes", n, text.len);
	CHECK(round_trips(t1, text.data, text.len));
	unsigned char junk[512];
	for (int i = 0; i < 512; i++) {
		s = s * 1103515245u + 12345u;
		junk[i] = (unsigned char)(s >> 24);
	}
	CHECK(round_trips(t1, junk, sizeof(junk)));

	/* the text form gives back a tokenizer that encodes the same */
	struct dlk_buf saved = DLK_BUF_INIT;
	struct dlk_tokenizer *back = NULL;
	dlk_tokenizer_save(t1, &saved);
	CHECK_MSG(dlk_tokenizer_load(saved.data, saved.len, "tok", &back, &err) == 0, "loads: %s", err.msg);
	if (back) {
		int32_t *a = xmalloc(n * sizeof(*a)), *b = xmalloc(n * sizeof(*b));
		dlk_tokenizer_encode(t1, text.data, text.len, a, n);
		CHECK(dlk_tokenizer_encode(back, text.data, text.len, b, n) == n && !memcmp(a, b, n * sizeof(*a)));
		CHECK(back->vocab_size == t1->vocab_size && back->pad_id == 0);
		free(a), free(b);
	}
	dlk_tokenizer_free(back);
	/* damaged forms name the line */
	char *bad = xstrndup(saved.data, saved.len);
	char *l = strstr(bad, "merges ");
	l = strchr(l, '\n') + 1;
	l[0] = '9';
	l[1] = '9';
	l[2] = '9';
	CHECK(dlk_tokenizer_load(bad, strlen(bad), "tok", &back, &err) < 0 && back == NULL);
	CHECK_STR(err.msg, "tok:7: not a dlk tokenizer line (the file is damaged)");
	CHECK(dlk_tokenizer_load("dlk-tokenizer 2\n", 16, "tok", &back, &err) < 0);
	CHECK_STR(err.msg, "tok:1: not a dlk tokenizer line (the file is damaged)");
	free(bad);
	dlk_buf_release(&saved);
	dlk_tokenizer_free(t1);
	dlk_tokenizer_free(t2);
	dlk_buf_release(&text);
}

static void add_utf8(struct dlk_buf *b, unsigned cp)
{
	if (cp < 0x80) {
		if (cp == '"' || cp == '\\')
			dlk_buf_addc(b, '\\');
		dlk_buf_addc(b, (char)cp);
	} else {
		dlk_buf_addc(b, (char)(0xC0 | (cp >> 6)));
		dlk_buf_addc(b, (char)(0x80 | (cp & 0x3F)));
	}
}

/* A GPT-2 vocabulary's first 256 ids are the bytes in bytes_to_unicode() order (printable ones
 * first), so the space is 220 ('Ġ'), as in GPT-2's own vocab.json; then three merges. */
static void test_gpt2(void)
{
	struct dlk_buf v = DLK_BUF_INIT;
	unsigned cp[256];
	int order[256], k = 0, id = 0;
	struct dlk_tokenizer *t = NULL;
	int32_t ids[16];

	for (int b = 0; b < 256; b++) {
		int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
		cp[b] = keep ? (unsigned)b : 0;
	}
	for (int b = 0; b < 256; b++)
		if (cp[b])
			order[k++] = b;
	int extra = 0;
	for (int b = 0; b < 256; b++)
		if (!cp[b] && !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
			cp[b] = 256u + (unsigned)extra++;
			order[k++] = b;
		}
	dlk_buf_adds(&v, "{");
	for (int i = 0; i < 256; i++) {
		dlk_buf_adds(&v, i ? ", \"" : "\"");
		add_utf8(&v, cp[order[i]]);
		dlk_buf_addf(&v, "\": %d", id++);
	}
	/* Ġt, he, Ġthe */
	dlk_buf_adds(&v, ", \"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258}");
	const char *merges = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";
	CHECK_MSG(dlk_bpe_read_gpt2(v.data, v.len, "vocab.json", merges, strlen(merges), "merges.txt", &t, &err) == 0,
	          "reads: %s", err.msg);
	if (t) {
		CHECK(t->vocab_size == 260 && t->pad_id == 259 && t->n_merges == 3);
		CHECK(dlk_tokenizer_encode(t, " ", 1, ids, 16) == 1 && ids[0] == 220);
		CHECK(dlk_tokenizer_encode(t, "!", 1, ids, 16) == 1 && ids[0] == 0);
		CHECK(dlk_tokenizer_encode(t, " the", 4, ids, 16) == 1 && ids[0] == 258);
		CHECK(dlk_tokenizer_encode(t, "the the", 7, ids, 16) == 3 && ids[0] == 't' - '!' && ids[1] == 257 &&
		      ids[2] == 258);
		CHECK(round_trips(t, "the\xff\x00 theme", 11));
		dlk_tokenizer_free(t);
	}
	const char *bad = "#version: 0.2\n\xc4\xa0 t\nh e\nq z\n";
	CHECK(dlk_bpe_read_gpt2(v.data, v.len, "vocab.json", bad, strlen(bad), "merges.txt", &t, &err) < 0);
	CHECK_STR(err.msg, "merges.txt:4: 'q z' makes a token that is not in vocab.json");
	const char *three = "h e x\n";
	CHECK(dlk_bpe_read_gpt2(v.data, v.len, "vocab.json", three, strlen(three), "merges.txt", &t, &err) < 0);
	CHECK_STR(err.msg, "merges.txt:1: expected two tokens separated by one space");
	CHECK(dlk_bpe_read_gpt2("{\"a\": 0}", 8, "vocab.json", "", 0, "merges.txt", &t, &err) < 0);
	CHECK_STR(err.msg, "'vocab.json': byte 0x00 has no token (GPT-2 vocabularies hold all 256)");
	/* two tokens with one id would decode wrongly (found by fuzz_bpe) */
	char *dup = xstrndup(v.data, v.len), *at = strstr(dup, "\": 256");
	memcpy(at, "\":   5", 6);
	CHECK(dlk_bpe_read_gpt2(dup, strlen(dup), "vocab.json", "", 0, "merges.txt", &t, &err) < 0);
	CHECK_STR(err.msg, "'vocab.json': id 5 is given to two tokens");
	free(dup);
	CHECK(dlk_bpe_read_gpt2("[1]", 3, "vocab.json", "", 0, "merges.txt", &t, &err) < 0);
	CHECK_STR(err.msg, "'vocab.json': not a JSON object of tokens and ids");
	dlk_buf_release(&v);
}

int main(void)
{
	test_byte();
	test_known_merges();
	test_word_edges();
	test_train_text();
	test_gpt2();
	return CHECK_DONE();
}
