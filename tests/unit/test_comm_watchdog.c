/* The watchdog: a rank killed or frozen in the middle of an all-reduce makes every other
 * rank fail within the stall timeout, restartable, naming the culprit. */
#include "tests/unit/check.h"
#include "tests/unit/test_comm_harness.h"

#include "lib/util/mem.h"

struct wd_arg {
	int stall_ms;
	int mismatch_rank; /* >= 0: this rank passes one element fewer */
};

static int run_loop(struct h_ctx *h)
{
	struct wd_arg *a = h->arg;
	struct dlk_comm *c = h_comm(h, a->stall_ms);
	struct dlk_err err = DLK_ERR_INIT, again = DLK_ERR_INIT;
	size_t n = 1u << 20;
	float *buf = xcalloc(n, sizeof(float));
	long step;

	if (!c) {
		free(buf);
		return -1;
	}
	h->res->t0 = dlk_now_ms();
	for (step = 1000; step < 1000 + 100000; step++) {
		size_t cnt = a->mismatch_rank == h->rank ? n - 1 : n;
		comm_set_step(c, step);
		if (comm_allreduce(c, buf, cnt, COMM_AVG, &err))
			break;
		h->res->t1 = step;
	}
	h_record(h, &err);
	/* a broken communicator fails again at once, with the same message */
	if (comm_allreduce(c, buf, 10, COMM_SUM, &again) != -1 || strcmp(again.msg, err.msg))
		h->res->fails++;
	comm_free(c);
	free(buf);
	return -1;
}

/* Waits until every started rank is past the rendezvous and a few all-reduces in. */
static void wait_running(struct rank_result *res, int world)
{
	long long give_up = dlk_now_ms() + 20000;
	for (;;) {
		int all = 1;
		for (int r = 0; r < world; r++)
			if (res[r].t1 < 1003)
				all = 0;
		if (all || dlk_now_ms() > give_up)
			return;
		usleep(5000);
	}
}

int main(void)
{
	alarm(240);

	/* kill -9 rank 2 of 4 in the middle of the training loop */
	{
		struct wd_arg a = { 3000, -1 };
		struct rank_result *res = h_start(4, 0, run_loop, &a);
		long long t_kill;

		wait_running(res, 4);
		t_kill = dlk_now_ms();
		kill(h_pids[2], SIGKILL);
		h_wait(res, 4, 15000);
		for (int r = 0; r < 4; r++) {
			if (r == 2)
				continue;
			CHECK_MSG(res[r].done && res[r].code == DLK_EXIT_RESTARTABLE,
				  "rank %d fails restartable after rank 2 is killed (code %d)", r, res[r].code);
			CHECK_CONTAINS(res[r].msg, "rank 2 closed its connection during all-reduce (step ");
			CHECK_MSG(res[r].t_end - t_kill < 3000 + 1500, "rank %d fails within the stall timeout (%lld ms)",
				  r, res[r].t_end - t_kill);
			CHECK_MSG(!res[r].fails, "rank %d: the broken communicator keeps failing", r);
		}
		h_free(res);
	}

	/* SIGSTOP rank 2: nobody hears from it; the stall timeout fires */
	{
		struct wd_arg a = { 1500, -1 };
		struct rank_result *res = h_start(4, 0, run_loop, &a);
		long long t_stop;
		pid_t frozen;

		wait_running(res, 4);
		t_stop = dlk_now_ms();
		frozen = h_pids[2];
		kill(frozen, SIGSTOP);
		h_pids[2] = -1; /* waited for below, after the others */
		h_wait(res, 4, 15000);
		for (int r = 0; r < 4; r++) {
			if (r == 2)
				continue;
			CHECK_MSG(res[r].done && res[r].code == DLK_EXIT_RESTARTABLE,
				  "rank %d fails restartable when rank 2 freezes (code %d)", r, res[r].code);
			CHECK_CONTAINS(res[r].msg, "all-reduce: no data from rank 2 for 1.5s (step ");
			CHECK_MSG(res[r].t_end - t_stop < 1500 + 2500, "rank %d gives up within the stall timeout (%lld ms)",
				  r, res[r].t_end - t_stop);
			CHECK_MSG(!res[r].fails, "rank %d keeps failing and exits cleanly", r);
		}
		kill(frozen, SIGKILL);
		waitpid(frozen, NULL, 0);
		h_free(res);
	}

	/* ranks that disagree about the size fail instead of corrupting or hanging */
	{
		struct wd_arg a = { 5000, 1 };
		struct rank_result *res = h_start(3, 0, run_loop, &a);
		h_wait(res, 3, 15000);
		for (int r = 0; r < 3; r++)
			CHECK_MSG(res[r].done && !res[r].fails && res[r].code == DLK_EXIT_FAIL,
				  "rank %d: size mismatch fails (code %d: %s)", r, res[r].code, res[r].msg);
		for (int r = 0; r < 3; r++) {
			CHECK_CONTAINS(res[r].msg, "4194300 bytes");
			CHECK_CONTAINS(res[r].msg, "4194304 bytes");
		}
		h_free(res);
	}
	return CHECK_DONE();
}
