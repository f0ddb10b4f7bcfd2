/* dlk predict --workers N, the library part: which samples each rank scores (whole batches,
 * covering every sample once), the rows of a part (their global indexes), the key and tag of a
 * part, part.json read back, and the check that rank 0 makes of the parts before joining them. */
#include "check.h"
#include "lib/serve/predict.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

static void test_range(void)
{
	static const size_t ns[] = { 0, 1, 255, 256, 257, 10000 };
	static const int batches[] = { 1, 7, 256 };
	size_t lo, hi;

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++)
			for (int w = 1; w <= 5; w++) {
				size_t next = 0;
				for (int r = 0; r < w; r++) {
					dlk_predict_part_range(ns[a], batches[b], r, w, &lo, &hi);
					/* in order, contiguous, each starting on a batch of the whole */
					CHECK(lo == next && hi >= lo && hi <= ns[a]);
					CHECK(lo % (size_t)batches[b] == 0 || lo == ns[a]);
					next = hi;
				}
				CHECK(next == ns[a]);
			}
	/* 10,000 in batches of 256: 40 batches, 20 each */
	dlk_predict_part_range(10000, 256, 1, 2, &lo, &hi);
	CHECK(lo == 5120 && hi == 10000);
	/* more ranks than batches: the ranks past them score nothing */
	dlk_predict_part_range(300, 256, 0, 3, &lo, &hi);
	CHECK(lo == 0 && hi == 0);
	dlk_predict_part_range(300, 256, 2, 3, &lo, &hi);
	CHECK(lo == 256 && hi == 300);
	dlk_predict_part_range(300, 256, 3, 3, &lo, &hi);
	CHECK(lo == 0 && hi == 0);
}

static void test_rows(void)
{
	struct dlk_dataset ds = DLK_DATASET_INIT;
	int32_t y[3] = { 1, 0, 1 }, cls[3] = { 1, 1, 0 };
	float probs[6] = { 0.25f, 0.75f, 0.1f, 0.9f, 0.5f, 0.5f };
	struct dlk_predictions whole = { 3, 2, cls, probs, 2, 0 }, a = { 1, 2, cls, probs, 1, 0 },
	                       b = { 2, 2, cls + 1, probs + 2, 1, 1 };
	char *s, *h, *ra, *rb, *joined;
	size_t len, hl, al, bl;

	ds.n = 3;
	ds.y = y;
	s = dlk_predict_csv(&whole, &ds, NULL, &len);
	h = dlk_predict_csv_header(&whole, NULL, &hl);
	ra = dlk_predict_csv_rows(&a, &ds, NULL, &al);
	rb = dlk_predict_csv_rows(&b, &ds, NULL, &bl);
	CHECK_STR(rb, "1,0,1,0.100000001,0.899999976\n2,1,0,0.5,0.5\n");
	joined = xasprintf("%s%s%s", h, ra, rb);
	CHECK_STR(joined, s);
	CHECK(hl + al + bl == len);
	free(s);
	free(h);
	free(ra);
	free(rb);
	free(joined);
}

static void test_key_and_tag(void)
{
	char k1[17], k2[17], k3[17], *t;

	dlk_predict_part_key("in", "model", "i", "l", 256, 2, 3, k1);
	dlk_predict_part_key("in", "model", "i", "l", 256, 2, 3, k2);
	CHECK_STR(k1, k2);
	CHECK(strlen(k1) == 16);
	/* anything that changes the bytes or the split changes the key */
	dlk_predict_part_key("in", "model", "i", "l", 256, 1, 3, k3);
	CHECK(strcmp(k1, k3));
	dlk_predict_part_key("in", "model", "i", "l", 128, 2, 3, k3);
	CHECK(strcmp(k1, k3));
	dlk_predict_part_key("in", "model", "i", "l", 256, 2, 2, k3);
	CHECK(strcmp(k1, k3));
	dlk_predict_part_key("in", "modelx", "i", "l", 256, 2, 3, k3);
	CHECK(strcmp(k1, k3));
	/* fields do not run into each other */
	dlk_predict_part_key("in", "model", "il", "", 256, 2, 3, k3);
	CHECK(strcmp(k1, k3));
	t = dlk_predict_part_tag("preds@v1", 1, 3, k1);
	CHECK(!strncmp(t, "preds-part-1-of-3@", 18) && !strcmp(t + 18, k1));
	free(t);
	t = dlk_predict_part_tag("preds", 0, 2, k1);
	CHECK(!strncmp(t, "preds-part-0-of-2@", 18));
	free(t);
}

static void test_json(void)
{
	struct dlk_predict_part p = { "0123456789abcdef", 1, 3, 100, 50, 300, 40 }, q;
	struct dlk_err err = DLK_ERR_INIT;
	char *s = dlk_predict_part_json(&p);
	static const char *const bad[] = {
		"[]",
		"{\"kind\": \"predictions\"}",
		"{\"kind\": \"predictions-part\", \"key\": \"0123\"}",
		"{\"kind\": \"predictions-part\", \"key\": \"0123456789abcdef\", \"rank\": 0, \"workers\": 1, \"first\": 0, "
		"\"count\": 1.5, \"samples\": 2, \"correct\": 0}",
		"{\"kind\": \"predictions-part\", \"key\": \"0123456789abcdef\", \"rank\": 2, \"workers\": 2, \"first\": 0, "
		"\"count\": 1, \"samples\": 2, \"correct\": 0}",
		"{\"kind\": \"predictions-part\", \"key\": \"0123456789abcdef\", \"rank\": 0, \"workers\": 2, \"first\": 2, "
		"\"count\": 1, \"samples\": 2, \"correct\": 0}",
		"{\"kind\": \"predictions-part\", \"key\": \"0123456789abcdef\", \"rank\": 0, \"workers\": 2, \"first\": 0, "
		"\"count\": 1, \"samples\": 2, \"correct\": 2}",
		"{\"kind\": \"predictions-part\", \"key\": \"0123456789abcdef\", \"rank\": -1, \"workers\": 2, \"first\": 0, "
		"\"count\": 1, \"samples\": 2, \"correct\": 0}",
	};

	CHECK(!dlk_predict_part_parse(s, strlen(s), &q, &err));
	CHECK(!strcmp(q.key, p.key) && q.rank == 1 && q.workers == 3 && q.first == 100 && q.count == 50 && q.samples == 300 &&
	      q.correct == 40);
	free(s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dlk_err_clear(&err);
		CHECK(dlk_predict_part_parse(bad[i], strlen(bad[i]), &q, &err) && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "part.json");
	}
}

static void test_check(void)
{
	const char *k = "0123456789abcdef";
	struct dlk_predict_part parts[3] = { { "", 0, 3, 0, 100, 250, 0 }, { "", 1, 3, 100, 100, 250, 0 },
		                             { "", 2, 3, 200, 50, 250, 0 } };
	struct dlk_err err = DLK_ERR_INIT;

	for (int i = 0; i < 3; i++)
		memcpy(parts[i].key, k, 17);
	CHECK(!dlk_predict_parts_check(parts, 3, k, &err));
	/* a part of another run (its key), named */
	CHECK(dlk_predict_parts_check(parts, 3, "fedcba9876543210", &err) && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "part 0 of 3");
	/* a gap */
	parts[2].first = 210;
	dlk_err_clear(&err);
	CHECK(dlk_predict_parts_check(parts, 3, k, &err));
	CHECK_CONTAINS(err.msg, "part 2 holds samples [210, 260)");
	/* short of the whole */
	parts[2].first = 200;
	parts[2].count = 40;
	dlk_err_clear(&err);
	CHECK(dlk_predict_parts_check(parts, 3, k, &err));
	CHECK_CONTAINS(err.msg, "hold 240 of the 250 samples");
	/* ranks out of order */
	parts[2].count = 50;
	parts[1].rank = 2;
	dlk_err_clear(&err);
	CHECK(dlk_predict_parts_check(parts, 3, k, &err));
	CHECK_CONTAINS(err.msg, "part 1 of 3 is rank 2");
}

int main(void)
{
	test_range();
	test_rows();
	test_key_and_tag();
	test_json();
	test_check();
	printf("1..%d\n", check_n);
	return check_failed ? 1 : 0;
}
