/* The TCP ring: all-reduce (sum, average), broadcast and barrier between 1..8 forked ranks,
 * checked against a serial reference, for awkward sizes. */
#include "tests/unit/check.h"
#include "tests/unit/test_comm_harness.h"

#include <stdint.h>

#include "lib/util/hash.h"
#include "lib/util/mem.h"

static const size_t sizes[] = { 0, 1, 7, 13, 1009, 1000003 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static float input(int rank, size_t i)
{
	/* varied magnitudes and signs, exactly representable */
	return (float)((long)((i * 7919u + (size_t)rank * 104729u) % 2001) - 1000) / 64.0f;
}

/* Per rank: for every size and op, all-reduce and compare with the serial sum; record
 * the sha256 of each result so the parent can check every rank holds the same bits. */
struct ar_arg {
	const size_t *sizes;
	int nsizes;
	int repeat; /* run every case twice and require identical bits (determinism) */
};

static int run_allreduce(struct h_ctx *h)
{
	struct ar_arg *a = h->arg;
	struct dlk_comm *c = h_comm(h, 20000);
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_sha256 all = DLK_SHA256_INIT;
	char hex[65];

	if (!c)
		return -1;
	dlk_sha256_begin(&all);
	for (int k = 0; k < a->nsizes; k++) {
		size_t n = a->sizes[k];
		float *buf = xmalloc((n ? n : 1) * sizeof(float)), *first = NULL;

		for (int op = 0; op < 2; op++) {
			for (int rep = 0; rep < (a->repeat ? 2 : 1); rep++) {
				for (size_t i = 0; i < n; i++)
					buf[i] = input(h->rank, i);
				if (comm_allreduce(c, buf, n, op ? COMM_AVG : COMM_SUM, &err)) {
					h_record(h, &err);
					free(buf);
					free(first);
					comm_free(c);
					return -1;
				}
				for (size_t i = 0; i < n; i++) {
					double ref = 0;
					for (int r = 0; r < h->world; r++)
						ref += input(r, i);
					if (op)
						ref /= h->world;
					if (fabs(buf[i] - ref) > 1e-4 * (1 + fabs(ref))) {
						if (!h->res->fails++)
							snprintf(h->res->note, sizeof(h->res->note),
								 "size %zu %s: element %zu is %g, want %g", n,
								 op ? "avg" : "sum", i, buf[i], ref);
					}
				}
				if (rep == 0 && a->repeat) {
					first = xmalloc((n ? n : 1) * sizeof(float));
					memcpy(first, buf, n * sizeof(float));
				} else if (a->repeat && memcmp(first, buf, n * sizeof(float))) {
					if (!h->res->fails++)
						snprintf(h->res->note, sizeof(h->res->note),
							 "size %zu: two runs gave different bits", n);
				}
				if (rep == 0)
					dlk_sha256_update(&all, buf, n * sizeof(float));
			}
			free(first);
			first = NULL;
		}
		free(buf);
	}
	dlk_sha256_end(&all, hex);
	memcpy(h->res->data, hex, 65);
	comm_free(c);
	return 0;
}

static void check_world(int world, const size_t *sz, int nsz, int repeat, const char *label)
{
	struct ar_arg a = { sz, nsz, repeat };
	struct rank_result *res = h_start(world, 0, run_allreduce, &a);
	int ok = 1, same = 1;

	h_wait(res, world, 110000);
	for (int r = 0; r < world; r++) {
		if (!res[r].done || res[r].rc || res[r].fails) {
			ok = 0;
			printf("# world %d rank %d: done=%d rc=%d status=%d msg='%s' note='%s'\n", world, r,
			       res[r].done, res[r].rc, res[r].status, res[r].msg, res[r].note);
		}
		if (strcmp((char *)res[r].data, (char *)res[0].data))
			same = 0;
	}
	CHECK_MSG(ok, "world %d: %s all-reduce sum and average match the serial reference", world, label);
	CHECK_MSG(ok && same, "world %d: every rank holds the same bits", world);
	h_free(res);
}

/* Broadcast from several roots and a barrier that nobody leaves early. */
static int run_bcast(struct h_ctx *h)
{
	struct dlk_comm *c = h_comm(h, 20000);
	struct dlk_err err = DLK_ERR_INIT;
	static const size_t bsz[] = { 1, 13, (1u << 20) + 3 };

	if (!c)
		return -1;
	for (int root = 0; root < h->world; root += (h->world > 2 ? h->world - 1 : 1)) {
		for (size_t k = 0; k < 3; k++) {
			size_t n = bsz[k];
			unsigned char *b = xmalloc(n);

			for (size_t i = 0; i < n; i++)
				b[i] = h->rank == root ? (unsigned char)(i * 31 + (size_t)root) : 0xee;
			if (comm_broadcast(c, b, n, root, &err)) {
				h_record(h, &err);
				free(b);
				comm_free(c);
				return -1;
			}
			for (size_t i = 0; i < n; i++)
				if (b[i] != (unsigned char)(i * 31 + (size_t)root)) {
					if (!h->res->fails++)
						snprintf(h->res->note, sizeof(h->res->note),
							 "root %d size %zu: byte %zu differs", root, n, i);
					break;
				}
			free(b);
		}
	}
	/* barrier: rank r arrives r*60 ms late; nobody may leave before the last arrives */
	usleep((useconds_t)h->rank * 60000);
	h->res->t0 = dlk_now_ms();
	if (comm_barrier(c, &err)) {
		h_record(h, &err);
		comm_free(c);
		return -1;
	}
	h->res->t1 = dlk_now_ms();
	comm_free(c);
	return 0;
}

static void check_bcast(int world)
{
	struct rank_result *res = h_start(world, 0, run_bcast, NULL);
	long long last_in = 0, first_out = -1;
	int ok = 1;

	h_wait(res, world, 60000);
	for (int r = 0; r < world; r++) {
		if (!res[r].done || res[r].rc || res[r].fails) {
			ok = 0;
			printf("# world %d rank %d: rc=%d msg='%s' note='%s'\n", world, r, res[r].rc,
			       res[r].msg, res[r].note);
		}
		if (res[r].t0 > last_in)
			last_in = res[r].t0;
		if (first_out < 0 || res[r].t1 < first_out)
			first_out = res[r].t1;
	}
	CHECK_MSG(ok, "world %d: broadcast from first and last rank delivers root's bytes", world);
	CHECK_MSG(ok && first_out >= last_in, "world %d: barrier releases nobody before the last arrives (%lld >= %lld)",
		  world, first_out, last_in);
	h_free(res);
}

static int run_bucketed(struct h_ctx *h)
{
	struct dlk_comm *c = h_comm(h, 20000);
	struct dlk_err err = DLK_ERR_INIT;
	size_t n = (3u << 20) / 4 * 2 + 5; /* 2.x buckets of 1 MiB... times 3 */
	float *b = xmalloc(n * sizeof(float));

	if (!c) {
		free(b);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		b[i] = input(h->rank, i);
	if (comm_allreduce_bucketed(c, b, n, 1, COMM_AVG, &err)) {
		h_record(h, &err);
	} else {
		for (size_t i = 0; i < n; i++) {
			double ref = 0;
			for (int r = 0; r < h->world; r++)
				ref += input(r, i);
			ref /= h->world;
			if (fabs(b[i] - ref) > 1e-4 * (1 + fabs(ref))) {
				h->res->fails++;
				break;
			}
		}
	}
	free(b);
	comm_free(c);
	return err.code ? -1 : 0;
}

int main(void)
{
	static const size_t large[] = { 8u << 20 };
	struct dlk_comm *one = comm_single_new();
	struct dlk_err err = DLK_ERR_INIT;
	float x[3] = { 1, 2, 3 };

	alarm(600);
	CHECK(comm_world(one) == 1 && comm_rank(one) == 0);
	CHECK(comm_allreduce(one, x, 3, COMM_AVG, &err) == 0 && x[0] == 1 && x[2] == 3);
	CHECK(comm_broadcast(one, x, 12, 0, &err) == 0);
	CHECK(comm_broadcast(one, x, 12, 1, &err) == -1);
	CHECK_CONTAINS(err.msg, "root 1 is not a rank");
	CHECK(comm_barrier(one, &err) == 0);
	comm_free(one);

	for (int w = 1; w <= 8; w++)
		check_world(w, sizes, (int)NSIZES, w == 3 || w == 4, "sizes 0, 1, 7, 13, 1009, 1000003:");
	check_world(2, large, 1, 0, "8M floats:");
	for (int w = 2; w <= 5; w += 3)
		check_bcast(w);
	check_bcast(3);
	{
		struct rank_result *res = h_start(3, 0, run_bucketed, NULL);
		h_wait(res, 3, 60000);
		CHECK_MSG(res[0].done && !res[0].rc && !res[0].fails && res[1].done && !res[1].rc &&
			  !res[1].fails && res[2].done && !res[2].rc && !res[2].fails,
			  "bucketed all-reduce (1 MiB buckets) averages like one call");
		h_free(res);
	}
	return CHECK_DONE();
}
