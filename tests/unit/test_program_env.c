/* lib/program/env.c: the variables each framework documents, field by field, and torchrun's
 * flags. The documents each block follows are named beside it. */
#include "tests/unit/check.h"
#include "lib/program/env.h"

#include <stdlib.h>
#include <string.h>

static char *cmd_python[] = { "python", "train.py", NULL };
static char *cmd_torchrun[] = { "torchrun", "train.py", NULL };
static char *args[] = { "--epochs", "2", NULL };
static const char *const peers3[] = { "job-0.job", "job-1.job", "job-2.job" };

static struct dlk_program prog(enum dlk_framework fw, char **cmd)
{
	static struct dlk_program_kv env[] = { { "NCCL_DEBUG", "INFO" }, { "MASTER_PORT", "1" } };
	struct dlk_program p = { .present = 1, .framework = fw, .command = cmd, .n_command = 2, .args = args,
		                 .n_args = 2, .env = env, .n_env = 2, .procs_per_worker = 2, .port = 29500 };
	return p;
}

static struct program_place place(int node, int local)
{
	struct program_place at = { .node_rank = node, .n_nodes = 3, .procs_per_node = 2, .local_rank = local,
		                    .master_addr = "job-0.job", .port = 29500, .peers = peers3, .restart = 1,
		                    .run_id = "demo-7", .data_dir = "/data/ds", .checkpoint_dir = "/ckpt",
		                    .output_dir = "/out", .progress_file = "/out/progress.jsonl" };
	return at;
}

#define GET(l, k) program_launch_get(&(l), k)

static void test_pytorch(void)
{
	struct dlk_program p = prog(DLK_FW_PYTORCH, cmd_python);
	struct program_place at = place(1, 1);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;

	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	/* torchrun's "Environment Variables" (pytorch.org/docs/stable/elastic/run.html): rank 3 of 6 is
	 * local rank 1 of node (group) 1 */
	CHECK_STR(GET(l, "MASTER_ADDR"), "job-0.job");
	CHECK_STR(GET(l, "MASTER_PORT"), "29500"); /* the framework's value wins over program.env's */
	CHECK_STR(GET(l, "WORLD_SIZE"), "6");
	CHECK_STR(GET(l, "RANK"), "3");
	CHECK_STR(GET(l, "LOCAL_RANK"), "1");
	CHECK_STR(GET(l, "LOCAL_WORLD_SIZE"), "2");
	CHECK_STR(GET(l, "GROUP_RANK"), "1");
	CHECK_STR(GET(l, "GROUP_WORLD_SIZE"), "3");
	CHECK_STR(GET(l, "NODE_RANK"), "1");
	CHECK_STR(GET(l, "ROLE_RANK"), "3");
	CHECK_STR(GET(l, "ROLE_WORLD_SIZE"), "6");
	CHECK_STR(GET(l, "ROLE_NAME"), "default");
	CHECK_STR(GET(l, "TORCHELASTIC_RESTART_COUNT"), "1");
	CHECK_STR(GET(l, "TORCHELASTIC_RUN_ID"), "demo-7");
	CHECK_STR(GET(l, "NCCL_DEBUG"), "INFO");
	CHECK(l.argc == 4 && !strcmp(l.argv[0], "python") && !strcmp(l.argv[3], "2") && l.argv[4] == NULL);
	/* dlk's own */
	CHECK_STR(GET(l, "DLK_RANK"), "3");
	CHECK_STR(GET(l, "DLK_WORLD_SIZE"), "6");
	CHECK_STR(GET(l, "DLK_PEERS"), "job-0.job,job-1.job,job-2.job");
	CHECK_STR(GET(l, "DLK_DATA_DIR"), "/data/ds");
	CHECK_STR(GET(l, "DLK_CHECKPOINT_DIR"), "/ckpt");
	CHECK_STR(GET(l, "DLK_OUTPUT_DIR"), "/out");
	CHECK_STR(GET(l, "DLK_PROGRESS_FILE"), "/out/progress.jsonl");
	CHECK_STR(GET(l, "DLK_RUN_ID"), "demo-7");
	CHECK_STR(GET(l, "DLK_FRAMEWORK"), "pytorch");
	CHECK(GET(l, "TF_CONFIG") == NULL && GET(l, "JAX_COORDINATOR_ADDRESS") == NULL);
	program_launch_release(&l);
}

static void test_torchrun(void)
{
	struct dlk_program p = prog(DLK_FW_PYTORCH, cmd_torchrun);
	struct program_place at = place(2, 0);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;
	const char *want[] = { "torchrun", "--nnodes=3", "--node-rank=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
		               "--rdzv-endpoint=job-0.job:29500", "--rdzv-id=demo-7", "--max-restarts=0",
		               "train.py", "--epochs", "2" };
	int same = 1;

	CHECK(program_is_torchrun(&p) && program_procs_started(&p, 2) == 1);
	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	/* torchrun's flags (pytorch.org/docs/stable/elastic/run.html, "Usage") before the script */
	CHECK_MSG(l.argc == 11, "argc %d", l.argc);
	for (int i = 0; i < 11 && i < l.argc; i++)
		same &= !strcmp(l.argv[i], want[i]);
	CHECK(same);
	/* torchrun sets the ranks of its own processes */
	CHECK(GET(l, "RANK") == NULL && GET(l, "DLK_RANK") == NULL && GET(l, "LOCAL_RANK") == NULL);
	CHECK_STR(GET(l, "DLK_NODE_RANK"), "2");
	CHECK_STR(GET(l, "MASTER_PORT"), "1"); /* only program.env's: torchrun sets the workers' own */
	program_launch_release(&l);
}

static void test_jax(void)
{
	struct dlk_program p = prog(DLK_FW_JAX, cmd_python);
	struct program_place at = place(0, 1);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;

	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	/* jax.distributed.initialize reads JAX_COORDINATOR_ADDRESS ("host:port" of process 0's
	 * coordinator service); num_processes and process_id are passed from DLK_WORLD_SIZE, DLK_RANK */
	CHECK_STR(GET(l, "JAX_COORDINATOR_ADDRESS"), "job-0.job:29500");
	CHECK_STR(GET(l, "DLK_WORLD_SIZE"), "6");
	CHECK_STR(GET(l, "DLK_RANK"), "1");
	CHECK(GET(l, "RANK") == NULL);
	program_launch_release(&l);
}

static void test_tensorflow(void)
{
	struct dlk_program p = prog(DLK_FW_TENSORFLOW, cmd_python);
	struct program_place at = place(2, 1);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;

	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	/* tensorflow.org/guide/distributed_training and the MultiWorkerMirroredStrategy tutorial:
	 * TF_CONFIG = {"cluster": {"worker": [host:port, ...]}, "task": {"type": "worker", "index": i}},
	 * one entry per worker process, this process's index into it */
	CHECK_STR(GET(l, "TF_CONFIG"),
	          "{\"cluster\":{\"worker\":[\"job-0.job:29500\",\"job-0.job:29501\",\"job-1.job:29502\","
	          "\"job-1.job:29503\",\"job-2.job:29504\",\"job-2.job:29505\"]},"
	          "\"task\":{\"type\":\"worker\",\"index\":5}}");
	program_launch_release(&l);
}

static void test_paddle(void)
{
	struct dlk_program p = prog(DLK_FW_PADDLE, cmd_python);
	struct program_place at = place(1, 0);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;

	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	/* PaddlePaddle's collective launch (paddle.distributed.launch) and ParallelEnv: every
	 * trainer's endpoint in id order, this trainer's endpoint, its id and the count */
	CHECK_STR(GET(l, "PADDLE_TRAINER_ENDPOINTS"),
	          "job-0.job:29500,job-0.job:29501,job-1.job:29502,job-1.job:29503,job-2.job:29504,job-2.job:29505");
	CHECK_STR(GET(l, "PADDLE_CURRENT_ENDPOINT"), "job-1.job:29502");
	CHECK_STR(GET(l, "PADDLE_TRAINER_ID"), "2");
	CHECK_STR(GET(l, "PADDLE_TRAINERS_NUM"), "6");
	CHECK_STR(GET(l, "PADDLE_RANK_IN_NODE"), "0");
	CHECK_STR(GET(l, "PADDLE_LOCAL_SIZE"), "2");
	CHECK_STR(GET(l, "PADDLE_NNODES"), "3");
	CHECK_STR(GET(l, "PADDLE_GLOBAL_SIZE"), "6");
	CHECK_STR(GET(l, "PADDLE_GLOBAL_RANK"), "2");
	CHECK_STR(GET(l, "PADDLE_LOCAL_RANK"), "0");
	/* a node without GPUs: gloo, as the launcher names it there; no device list */
	CHECK_STR(GET(l, "PADDLE_DISTRI_BACKEND"), "gloo");
	CHECK(GET(l, "FLAGS_selected_gpus") == NULL);
	program_launch_release(&l);

	/* two GPUs, two processes a node: each its own; no backend named (Paddle's NCCL) */
	at = place(1, 1);
	at.gpus = 2;
	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	CHECK_STR(GET(l, "FLAGS_selected_gpus"), "1");
	CHECK(GET(l, "PADDLE_DISTRI_BACKEND") == NULL);
	program_launch_release(&l);

	/* one process a node with 4 GPUs: all of them */
	p.procs_per_worker = 1;
	at = place(1, 0);
	at.procs_per_node = 1;
	at.gpus = 4;
	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	CHECK_STR(GET(l, "FLAGS_selected_gpus"), "0,1,2,3");
	CHECK_STR(GET(l, "PADDLE_TRAINER_ENDPOINTS"), "job-0.job:29500,job-1.job:29501,job-2.job:29502");
	program_launch_release(&l);

	/* the user's program.env names the backend: kept */
	{
		struct dlk_program_kv env[] = { { "PADDLE_DISTRI_BACKEND", "xccl" } };
		p.env = env;
		p.n_env = 1;
		at = place(0, 0);
		CHECK(program_launch_build(&p, &at, &l, &e) == 0);
		CHECK_STR(GET(l, "PADDLE_DISTRI_BACKEND"), "xccl");
		program_launch_release(&l);
	}
}

static void test_none_and_local(void)
{
	struct dlk_program p = prog(DLK_FW_NONE, cmd_python);
	struct program_place at = place(0, 0);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;

	at.peers = NULL; /* here: every node at 127.0.0.1 */
	at.master_addr = "127.0.0.1";
	at.data_dir = NULL;
	CHECK(program_launch_build(&p, &at, &l, &e) == 0);
	CHECK_STR(GET(l, "DLK_PEERS"), "127.0.0.1,127.0.0.1,127.0.0.1");
	CHECK_STR(GET(l, "DLK_RANK"), "0");
	CHECK(GET(l, "DLK_DATA_DIR") == NULL && GET(l, "MASTER_ADDR") == NULL && GET(l, "TF_CONFIG") == NULL);
	program_launch_release(&l);
}

static void test_refused(void)
{
	struct dlk_program p = prog(DLK_FW_TENSORFLOW, cmd_python);
	struct program_place at = place(3, 0);
	struct program_launch l = PROGRAM_LAUNCH_INIT;
	struct dlk_err e = DLK_ERR_INIT;
	const char *const bad_peers[] = { "a", "b c", "d" };

	CHECK(program_launch_build(&p, &at, &l, &e) == -1);
	CHECK_STR(e.msg, "node rank 3 is outside a gang of 3");
	at = place(0, 2);
	CHECK(program_launch_build(&p, &at, &l, &e) == -1);
	CHECK_STR(e.msg, "local rank 2 is outside 2 processes per node");
	at = place(0, 0);
	at.port = 65533;
	CHECK(program_launch_build(&p, &at, &l, &e) == -1);
	CHECK_STR(e.msg, "port 65533: the gang's 6 processes need ports up to 65538, past 65535");
	at = place(0, 0);
	at.peers = bad_peers;
	CHECK(program_launch_build(&p, &at, &l, &e) == -1);
	CHECK_STR(e.msg, "the host name of node 1 is empty or holds a space, comma or quote");
	CHECK(l.argc == 0 && l.n_env == 0);
}

int main(void)
{
	test_pytorch();
	test_torchrun();
	test_jax();
	test_tensorflow();
	test_paddle();
	test_none_and_local();
	test_refused();
	return CHECK_DONE();
}
