/* A sequence's generation state with a byte tokenizer and hand-made logits: the window (last
 * `context` tokens, padded after), the position read in a [context, vocab] output, stop strings
 * cut from the text and never handed out in part, a multi-byte character held back until whole,
 * a byte that can never be UTF-8 handed out as U+FFFD, and the pad id never generated. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/gen/lm.h"

#define V 257

/* logits choosing byte b greedily */
static void choose(float *row, int b)
{
	for (int i = 0; i < V; i++)
		row[i] = 0;
	row[1 + b] = 10;
}

static const char *take(struct dlk_gen_seq *s, struct dlk_buf *b)
{
	dlk_buf_reset(b);
	dlk_gen_seq_take(s, b);
	dlk_buf_addc(b, '\0');
	return b->data;
}

int main(void)
{
	struct dlk_tokenizer *tok = dlk_tokenizer_byte();
	struct dlk_lm lm;
	memset(&lm, 0, sizeof(lm));
	lm.tok = tok, lm.context = 4, lm.vocab = V, lm.out_size = V;
	struct dlk_gen_params p = { 100, { 0, 0, 1, 1 }, 1, { "END" }, { 3 } };
	struct dlk_gen_seq s;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	float row[V], win[4];

	/* the window */
	CHECK(!dlk_gen_seq_init(&s, &lm, "ab", 2, &p, &err));
	CHECK(s.prompt_tokens == 2);
	int pos = dlk_gen_seq_input(&s, &lm, win);
	CHECK(pos == 1 && win[0] == 1 + 'a' && win[1] == 1 + 'b' && win[2] == tok->pad_id && win[3] == tok->pad_id);
	/* "xE" then "N": "E" and "EN" may start the stop string, so they wait */
	choose(row, 'x');
	dlk_gen_seq_push(&s, &lm, row, pos);
	CHECK_STR(take(&s, &b), "x");
	choose(row, 'E');
	dlk_gen_seq_push(&s, &lm, row, pos);
	CHECK_STR(take(&s, &b), "");
	choose(row, 'N');
	dlk_gen_seq_push(&s, &lm, row, pos);
	CHECK_STR(take(&s, &b), "");
	/* the window slides: the last four tokens */
	pos = dlk_gen_seq_input(&s, &lm, win);
	CHECK(pos == 3 && win[0] == 1 + 'b' && win[1] == 1 + 'x' && win[3] == 1 + 'N');
	choose(row, 'D');
	dlk_gen_seq_push(&s, &lm, row, pos);
	CHECK(s.finish == DLK_FINISH_STOP);
	CHECK_STR(take(&s, &b), "");
	CHECK_MSG(s.text.len == 1 && s.generated == 4, "the text is cut before the stop string");
	dlk_gen_seq_release(&s);

	/* a partial stop string that does not complete is handed out */
	CHECK(!dlk_gen_seq_init(&s, &lm, "a", 1, &p, &err));
	choose(row, 'E');
	dlk_gen_seq_push(&s, &lm, row, 0);
	choose(row, 'Z');
	dlk_gen_seq_push(&s, &lm, row, 0);
	CHECK_STR(take(&s, &b), "EZ");
	dlk_gen_seq_release(&s);

	/* UTF-8: "é" (c3 a9) waits for its second byte; 0xff becomes U+FFFD */
	p.n_stop = 0;
	p.max_tokens = 3;
	CHECK(!dlk_gen_seq_init(&s, &lm, "a", 1, &p, &err));
	choose(row, 0xc3);
	dlk_gen_seq_push(&s, &lm, row, 0);
	CHECK_STR(take(&s, &b), "");
	choose(row, 0xa9);
	dlk_gen_seq_push(&s, &lm, row, 0);
	CHECK_STR(take(&s, &b), "\xc3\xa9");
	choose(row, 0xff);
	dlk_gen_seq_push(&s, &lm, row, 0);
	CHECK(s.finish == DLK_FINISH_LENGTH);
	CHECK_STR(take(&s, &b), "\xef\xbf\xbd");
	dlk_gen_seq_release(&s);

	/* the pad id is never generated, even when its logit is the largest */
	CHECK(!dlk_gen_seq_init(&s, &lm, "a", 1, &p, &err));
	choose(row, 'q');
	row[tok->pad_id] = 100;
	CHECK(dlk_gen_seq_push(&s, &lm, row, 0) == 1 + 'q');
	dlk_gen_seq_release(&s);

	/* [context, vocab] outputs: the logits at the last token's position */
	struct dlk_lm lp = lm;
	lp.per_position = 1;
	lp.out_size = 4 * V;
	float *out = calloc(4 * V, sizeof(float));
	CHECK(!dlk_gen_seq_init(&s, &lp, "abc", 3, &p, &err));
	pos = dlk_gen_seq_input(&s, &lp, win);
	CHECK(pos == 2);
	choose(out + 0 * V, 'w');
	choose(out + 2 * V, 'k');
	CHECK(dlk_gen_seq_push(&s, &lp, out, pos) == 1 + 'k');
	dlk_gen_seq_release(&s);
	free(out);

	CHECK(dlk_gen_seq_init(&s, &lm, "", 0, &p, &err) == -1);
	CHECK_CONTAINS(err.msg, "prompt is empty");

	dlk_buf_release(&b);
	dlk_tokenizer_free(tok);
	return CHECK_DONE();
}
