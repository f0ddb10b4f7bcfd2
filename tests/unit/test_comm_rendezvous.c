/* Rendezvous: environment, the DNS path, late and missing ranks, stale gangs, bad worlds. */
#include "tests/unit/check.h"
#include "tests/unit/test_comm_harness.h"

#include "lib/util/mem.h"

struct rz_arg {
	int timeout_ms;
	unsigned gen[H_MAX_RANKS];  /* 0: default 1 */
	const char *run_id[H_MAX_RANKS];
	int world_override[H_MAX_RANKS];
	int rank_override[H_MAX_RANKS];
	int delay_ms[H_MAX_RANKS];
	const char *master;
	int do_allreduce;
};

static int run_rz(struct h_ctx *h)
{
	struct rz_arg *a = h->arg;
	struct dist_rdzv_opts o;
	struct dist_group g = DIST_GROUP_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	const char blob[] = "nccl-unique-id-bytes";
	int r = h->rank;

	if (a->delay_ms[r])
		usleep((useconds_t)a->delay_ms[r] * 1000);
	h_opts(h, &o);
	if (a->timeout_ms)
		o.timeout_ms = a->timeout_ms;
	if (a->gen[r])
		o.generation = a->gen[r];
	if (a->run_id[r])
		o.run_id = a->run_id[r];
	if (a->world_override[r])
		o.world = a->world_override[r];
	if (a->rank_override[r])
		o.rank = a->rank_override[r];
	if (a->master)
		o.master_addr = a->master;
	if (r == 0) {
		o.blob = blob;
		o.blob_len = sizeof(blob);
	}
	h->res->t0 = dlk_now_ms();
	if (dist_rendezvous(&o, &g, &err)) {
		h_record(h, &err);
		return -1;
	}
	if (g.blob_len == sizeof(blob) && !memcmp(g.blob, blob, sizeof(blob)))
		snprintf(h->res->note, sizeof(h->res->note), "blob ok");
	if (a->do_allreduce) {
		struct dlk_comm *c = comm_tcp_new(&g, 10000);
		float v[5] = { 1, 2, 3, 4, (float)r };
		if (comm_allreduce(c, v, 5, COMM_SUM, &err))
			h_record(h, &err);
		else if (v[0] != (float)h->world || v[4] != (float)(h->world * (h->world - 1) / 2))
			h->res->fails++;
		comm_free(c);
	}
	dist_group_release(&g);
	return err.code ? -1 : 0;
}

static void env_tests(void)
{
	struct dist_env e;
	struct dlk_err err = DLK_ERR_INIT;

	unsetenv("RANK");
	unsetenv("JOB_COMPLETION_INDEX");
	unsetenv("WORLD_SIZE");
	unsetenv("MASTER_ADDR");
	unsetenv("MASTER_PORT");
	CHECK(dist_env_read(&e, &err) == 0 && e.rank == 0 && e.world == 1 && e.master_port == 29500);

	setenv("WORLD_SIZE", "4", 1);
	CHECK(dist_env_read(&e, &err) == -1 && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "neither RANK nor JOB_COMPLETION_INDEX is set");
	setenv("JOB_COMPLETION_INDEX", "2", 1);
	CHECK(dist_env_read(&e, &err) == -1);
	CHECK_CONTAINS(err.msg, "MASTER_ADDR is not set");
	setenv("MASTER_ADDR", "train-0.train", 1);
	setenv("MASTER_PORT", "23456", 1);
	CHECK(dist_env_read(&e, &err) == 0 && e.rank == 2 && e.world == 4 && e.master_port == 23456);
	CHECK_STR(e.master_addr, "train-0.train");
	setenv("RANK", "3", 1);
	CHECK(dist_env_read(&e, &err) == -1);
	CHECK_CONTAINS(err.msg, "RANK 3 and JOB_COMPLETION_INDEX 2 disagree");
	unsetenv("JOB_COMPLETION_INDEX");
	CHECK(dist_env_read(&e, &err) == 0 && e.rank == 3);
	setenv("RANK", "4", 1);
	CHECK(dist_env_read(&e, &err) == -1);
	CHECK_CONTAINS(err.msg, "rank 4 is out of range for WORLD_SIZE 4");
	setenv("RANK", "1x", 1);
	CHECK(dist_env_read(&e, &err) == -1);
	CHECK_CONTAINS(err.msg, "RANK '1x' is not a number");
	setenv("RANK", "1", 1);
	setenv("MASTER_PORT", "70000", 1);
	CHECK(dist_env_read(&e, &err) == -1);
	CHECK_CONTAINS(err.msg, "MASTER_PORT '70000'");
	setenv("MASTER_PORT", "23456", 1);
	setenv("WORLD_SIZE", "-2", 1);
	CHECK(dist_env_read(&e, &err) == -1 && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "WORLD_SIZE '-2'");
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("MASTER_ADDR");
	unsetenv("MASTER_PORT");
}

static struct rank_result *run(int world, unsigned skip, struct rz_arg *a, int wait_ms)
{
	struct rank_result *res = h_start(world, skip, run_rz, a);
	int clean = 1;

	h_wait(res, world, wait_ms);
	for (int r = 0; r < world; r++)
		if (!(skip & (1u << r)) && (!WIFEXITED(res[r].status) || WEXITSTATUS(res[r].status)))
			clean = 0;
	CHECK_MSG(clean, "world %d: every rank returned and exited cleanly", world);
	return res;
}

int main(void)
{
	struct rank_result *res;
	int ok;

	alarm(300);
	env_tests();

	{
		struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;
		struct dist_group g = DIST_GROUP_INIT;
		struct dlk_err err = DLK_ERR_INIT;
		o.blob = "x";
		o.blob_len = 1;
		CHECK_MSG(dist_rendezvous(&o, &g, &err) == 0 && g.next_fd < 0 && g.blob_len == 1,
			  "a world of one needs no sockets");
		dist_group_release(&g);
		o.world = 2;
		o.rank = 2;
		CHECK(dist_rendezvous(&o, &g, &err) == -1 && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "rank 2 is out of range");
	}

	/* the DNS path, with rank 0 starting last: workers retry until it listens */
	{
		struct rz_arg a = { 0 };
		a.master = "localhost";
		a.do_allreduce = 1;
		a.delay_ms[0] = 400;
		res = run(3, 0, &a, 30000);
		ok = 1;
		for (int r = 0; r < 3; r++)
			ok &= res[r].done && !res[r].rc && !res[r].fails && !strcmp(res[r].note, "blob ok");
		if (!ok)
			printf("# %s | %s | %s\n", res[0].msg, res[1].msg, res[2].msg);
		CHECK_MSG(ok, "MASTER_ADDR=localhost, rank 0 late: rendezvous, blob and all-reduce work");
		h_free(res);
	}

	/* rank 2 never arrives */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 1500;
		res = run(4, 1u << 2, &a, 20000);
		CHECK(res[0].done && res[0].rc == -1 && res[0].code == DLK_EXIT_RESTARTABLE);
		CHECK_CONTAINS(res[0].msg, "rendezvous: rank 2 of 4 did not join within 1.5s (MASTER_ADDR=127.0.0.1");
		CHECK_MSG(res[0].t_end - res[0].t0 < 4000, "rank 0 gives up within the timeout (%lld ms)",
			  res[0].t_end - res[0].t0);
		CHECK_CONTAINS(res[1].msg, "rank 2 of 4 did not join");
		CHECK_CONTAINS(res[3].msg, "rank 2 of 4 did not join");
		h_free(res);
	}
	/* ranks 2 and 3 never arrive */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 1000;
		res = run(4, (1u << 2) | (1u << 3), &a, 20000);
		CHECK_CONTAINS(res[0].msg, "rendezvous: ranks 2, 3 of 4 did not join within 1s");
		h_free(res);
	}
	/* a worker of an older generation is turned away; the gang does not form with it */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 1500;
		a.gen[0] = 5;
		a.gen[1] = 4;
		res = run(2, 0, &a, 20000);
		CHECK(res[1].rc == -1 && res[1].code == DLK_EXIT_RESTARTABLE);
		CHECK_CONTAINS(res[1].msg, "rank 1 has generation 4, older than rank 0's 5");
		CHECK_CONTAINS(res[0].msg, "rank 1 of 2 did not join");
		h_free(res);
	}
	/* a worker of a newer generation: this rank 0 is the stale one */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 1500;
		a.gen[0] = 2;
		a.gen[1] = 3;
		res = run(2, 0, &a, 20000);
		CHECK(res[0].rc == -1 && res[0].code == DLK_EXIT_RESTARTABLE);
		CHECK_CONTAINS(res[0].msg, "this worker is stale");
		CHECK(res[1].rc == -1 && res[1].code == DLK_EXIT_CONNECT);
		CHECK_CONTAINS(res[1].msg, "cannot reach rank 0 at '127.0.0.1'");
		h_free(res);
	}
	/* another run's worker */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 1500;
		a.run_id[1] = "other-run";
		res = run(2, 0, &a, 20000);
		CHECK(res[1].rc == -1);
		CHECK_CONTAINS(res[1].msg, "rank 1 belongs to run 'other-run', rank 0 to run 'test-run'");
		h_free(res);
	}
	/* world size disagreement is a configuration error for everyone */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 3000; /* a rank arriving after rank 0 gave up waits this long */
		a.world_override[2] = 4;
		res = run(3, 0, &a, 20000);
		CHECK(res[0].rc == -1 && res[0].code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(res[0].msg, "rank 2 says the world has 4 ranks, rank 0 says 3");
		CHECK(res[2].code == DLK_EXIT_CONFIG);
		h_free(res);
	}
	/* two workers claim rank 1 */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 3000;
		a.rank_override[2] = 1;
		a.delay_ms[2] = 300;
		res = run(3, 0, &a, 20000);
		CHECK(res[0].rc == -1 && res[0].code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(res[0].msg, "rank 1 joined twice");
		CHECK_CONTAINS(res[1].msg, "rank 1 joined twice");
		h_free(res);
	}
	/* a name that never resolves */
	{
		struct rz_arg a = { 0 };
		a.timeout_ms = 1200;
		a.master = "no-such-host.invalid";
		res = run(2, 1u << 0, &a, 20000);
		CHECK(res[1].rc == -1 && res[1].code == DLK_EXIT_CONNECT);
		CHECK_CONTAINS(res[1].msg, "cannot reach rank 0 at 'no-such-host.invalid' port");
		CHECK_MSG(res[1].t_end - res[1].t0 < 5000, "an unresolvable name fails within the timeout (%lld ms)",
			  res[1].t_end - res[1].t0);
		h_free(res);
	}
	return CHECK_DONE();
}
