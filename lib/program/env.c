/* The framework conventions (lib/program/env.h). Each block says which documentation it follows;
 * tests/unit/test_program_env.c checks the same fields. */
#include "lib/program/env.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setv(struct program_launch *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void setv(struct program_launch *l, const char *key, const char *fmt, ...)
{
	struct dlk_buf b = DLK_BUF_INIT;
	va_list ap;
	size_t kl = strlen(key);

	dlk_buf_addf(&b, "%s=", key);
	va_start(ap, fmt);
	dlk_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	/* a later value of the same variable replaces the earlier one: the framework's win over
	 * program.env */
	for (int i = 0; i < l->n_env; i++)
		if (!strncmp(l->env[i], key, kl) && l->env[i][kl] == '=') {
			free(l->env[i]);
			l->env[i] = dlk_buf_detach(&b, NULL);
			return;
		}
	l->env = xrealloc(l->env, (size_t)(l->n_env + 2) * sizeof(*l->env));
	l->env[l->n_env++] = dlk_buf_detach(&b, NULL);
	l->env[l->n_env] = NULL;
}

static void add_arg(struct program_launch *l, const char *s)
{
	l->argv = xrealloc(l->argv, (size_t)(l->argc + 2) * sizeof(*l->argv));
	l->argv[l->argc++] = xstrdup(s);
	l->argv[l->argc] = NULL;
}

static void add_argf(struct program_launch *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_argf(struct program_launch *l, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	add_arg(l, buf);
}

int program_is_torchrun(const struct dlk_program *p)
{
	return p->n_command > 0 && !strcmp(p->command[0], "torchrun");
}

int program_procs_started(const struct dlk_program *p, int procs_per_node)
{
	return program_is_torchrun(p) ? 1 : procs_per_node;
}

const char *program_launch_get(const struct program_launch *l, const char *key)
{
	size_t kl = strlen(key);
	for (int i = 0; i < l->n_env; i++)
		if (!strncmp(l->env[i], key, kl) && l->env[i][kl] == '=')
			return l->env[i] + kl + 1;
	return NULL;
}

void program_launch_release(struct program_launch *l)
{
	for (int i = 0; i < l->n_env; i++)
		free(l->env[i]);
	for (int i = 0; i < l->argc; i++)
		free(l->argv[i]);
	free(l->env);
	free(l->argv);
	memset(l, 0, sizeof(*l));
}

static const char *peer(const struct program_place *at, int node)
{
	return at->peers ? at->peers[node] : at->master_addr;
}

static int host_ok(const char *h)
{
	return h && *h && !strpbrk(h, " \t\n\r,\"\\");
}

/* "h0:p0,h1:p1,..." one endpoint per process of the gang */
static void endpoints(struct dlk_buf *b, const struct program_place *at, int json)
{
	int world = at->n_nodes * at->procs_per_node;
	for (int r = 0; r < world; r++)
		dlk_buf_addf(b, json ? "%s\"%s:%d\"" : "%s%s:%d", r ? "," : "", peer(at, r / at->procs_per_node),
		             at->port + r);
}

int program_launch_build(const struct dlk_program *p, const struct program_place *at, struct program_launch *out,
                         struct dlk_err *err)
{
	int torchrun = program_is_torchrun(p);
	int ppn = at->procs_per_node, world = at->n_nodes * ppn;
	int rank = at->node_rank * ppn + at->local_rank;
	struct dlk_buf b = DLK_BUF_INIT;

	program_launch_release(out);
	if (at->n_nodes < 1 || at->node_rank < 0 || at->node_rank >= at->n_nodes)
		return dlk_errf(err, DLK_EXIT_USAGE, "node rank %d is outside a gang of %d", at->node_rank, at->n_nodes);
	if (ppn < 1 || at->local_rank < 0 || (!torchrun && at->local_rank >= ppn))
		return dlk_errf(err, DLK_EXIT_USAGE, "local rank %d is outside %d processes per node", at->local_rank, ppn);
	if (at->port < 1 || at->port > 65535 || at->port + world - 1 > 65535)
		return dlk_errf(err, DLK_EXIT_USAGE, "port %d: the gang's %d processes need ports up to %d, past 65535",
		                at->port, world, at->port + world - 1);
	if (!host_ok(at->master_addr))
		return dlk_errf(err, DLK_EXIT_USAGE, "rank 0's address is empty or holds a space, comma or quote");
	for (int i = 0; at->peers && i < at->n_nodes; i++)
		if (!host_ok(at->peers[i]))
			return dlk_errf(err, DLK_EXIT_USAGE, "the host name of node %d is empty or holds a space, comma or quote", i);
	if (!at->run_id || !*at->run_id || !at->checkpoint_dir || !at->output_dir)
		return dlk_errf(err, DLK_EXIT_USAGE, "a run id, a checkpoint and an output directory are required");

	for (int i = 0; i < p->n_env; i++)
		setv(out, p->env[i].key, "%s", p->env[i].value);

	/* dlk's own: every framework, documented in docs/program.md */
	setv(out, "DLK_FRAMEWORK", "%s", dlk_framework_name(p->framework));
	setv(out, "DLK_RUN_ID", "%s", at->run_id);
	setv(out, "DLK_NODE_RANK", "%d", at->node_rank);
	setv(out, "DLK_NUM_NODES", "%d", at->n_nodes);
	setv(out, "DLK_PROCS_PER_NODE", "%d", ppn);
	if (!torchrun) {
		setv(out, "DLK_RANK", "%d", rank);
		setv(out, "DLK_WORLD_SIZE", "%d", world);
		setv(out, "DLK_LOCAL_RANK", "%d", at->local_rank);
	}
	for (int i = 0; i < at->n_nodes; i++)
		dlk_buf_addf(&b, "%s%s", i ? "," : "", peer(at, i));
	setv(out, "DLK_PEERS", "%s", b.data ? b.data : "");
	dlk_buf_reset(&b);
	setv(out, "DLK_MASTER_ADDR", "%s", at->master_addr);
	setv(out, "DLK_MASTER_PORT", "%d", at->port);
	setv(out, "DLK_RESTART_COUNT", "%d", at->restart);
	if (at->data_dir)
		setv(out, "DLK_DATA_DIR", "%s", at->data_dir);
	setv(out, "DLK_CHECKPOINT_DIR", "%s", at->checkpoint_dir);
	setv(out, "DLK_OUTPUT_DIR", "%s", at->output_dir);
	if (at->progress_file)
		setv(out, "DLK_PROGRESS_FILE", "%s", at->progress_file);

	switch (p->framework) {
	case DLK_FW_PYTORCH:
		if (torchrun)
			break; /* torchrun sets these itself from its flags (below) */
		/* torchrun's "Environment Variables" (pytorch.org/docs/stable/elastic/run.html), which
		 * torch.distributed.init_process_group's env:// method reads (MASTER_ADDR, MASTER_PORT,
		 * WORLD_SIZE, RANK); NODE_RANK is what torch.distributed.launch and Lightning read */
		setv(out, "MASTER_ADDR", "%s", at->master_addr);
		setv(out, "MASTER_PORT", "%d", at->port);
		setv(out, "WORLD_SIZE", "%d", world);
		setv(out, "RANK", "%d", rank);
		setv(out, "LOCAL_RANK", "%d", at->local_rank);
		setv(out, "LOCAL_WORLD_SIZE", "%d", ppn);
		setv(out, "GROUP_RANK", "%d", at->node_rank);
		setv(out, "GROUP_WORLD_SIZE", "%d", at->n_nodes);
		setv(out, "NODE_RANK", "%d", at->node_rank);
		setv(out, "ROLE_NAME", "default");
		setv(out, "ROLE_RANK", "%d", rank);
		setv(out, "ROLE_WORLD_SIZE", "%d", world);
		setv(out, "TORCHELASTIC_RESTART_COUNT", "%d", at->restart);
		setv(out, "TORCHELASTIC_MAX_RESTARTS", "0");
		setv(out, "TORCHELASTIC_RUN_ID", "%s", at->run_id);
		break;
	case DLK_FW_JAX:
		/* jax.distributed.initialize() reads JAX_COORDINATOR_ADDRESS when coordinator_address is
		 * not given (jax/_src/distributed.py); num_processes and process_id it takes only as
		 * arguments outside the clusters it detects, so a program passes DLK_WORLD_SIZE and
		 * DLK_RANK (docs/program.md shows the call) */
		setv(out, "JAX_COORDINATOR_ADDRESS", "%s:%d", at->master_addr, at->port);
		break;
	case DLK_FW_TENSORFLOW:
		/* TF_CONFIG for MultiWorkerMirroredStrategy (tensorflow.org/guide/distributed_training,
		 * "Setting up the TF_CONFIG environment variable"): every worker's host:port in rank
		 * order, and this task's type and index; the chief is worker 0 */
		dlk_buf_adds(&b, "{\"cluster\":{\"worker\":[");
		endpoints(&b, at, 1);
		dlk_buf_addf(&b, "]},\"task\":{\"type\":\"worker\",\"index\":%d}}", rank);
		setv(out, "TF_CONFIG", "%s", b.data);
		dlk_buf_reset(&b);
		break;
	case DLK_FW_PADDLE:
		/* what paddle.distributed.launch gives each trainer in collective mode, and
		 * paddle.distributed.init_parallel_env() reads (ParallelEnv): the trainers' endpoints
		 * in rank order, this trainer's endpoint, id and count */
		endpoints(&b, at, 0);
		setv(out, "PADDLE_TRAINER_ENDPOINTS", "%s", b.data);
		dlk_buf_reset(&b);
		setv(out, "PADDLE_CURRENT_ENDPOINT", "%s:%d", peer(at, at->node_rank), at->port + rank);
		setv(out, "PADDLE_TRAINER_ID", "%d", rank);
		setv(out, "PADDLE_TRAINERS_NUM", "%d", world);
		setv(out, "PADDLE_RANK_IN_NODE", "%d", at->local_rank);
		setv(out, "PADDLE_LOCAL_SIZE", "%d", ppn);
		setv(out, "PADDLE_NNODES", "%d", at->n_nodes);
		setv(out, "PADDLE_MASTER", "%s:%d", at->master_addr, at->port);
		setv(out, "PADDLE_GLOBAL_SIZE", "%d", world);
		setv(out, "PADDLE_GLOBAL_RANK", "%d", rank);
		setv(out, "PADDLE_LOCAL_RANK", "%d", at->local_rank);
		/* the launcher's collective controller, on a node without devices, names gloo as the
		 * backend: init_parallel_env() then creates the default group the collectives use
		 * (with its 'auto', a CPU-only Paddle sets up a context but no group, and
		 * paddle.distributed.all_reduce fails: "The global group is not initialized").
		 * With GPUs, each process its GPU (one process: all of them), as the launcher does */
		if (at->gpus <= 0) {
			if (!program_launch_get(out, "PADDLE_DISTRI_BACKEND"))
				setv(out, "PADDLE_DISTRI_BACKEND", "gloo");
		} else if (!program_launch_get(out, "FLAGS_selected_gpus")) {
			if (ppn == 1) {
				for (int g = 0; g < at->gpus; g++)
					dlk_buf_addf(&b, "%s%d", g ? "," : "", g);
				setv(out, "FLAGS_selected_gpus", "%s", b.data);
				dlk_buf_reset(&b);
			} else {
				setv(out, "FLAGS_selected_gpus", "%d", at->local_rank % at->gpus);
			}
		}
		break;
	case DLK_FW_NONE:
		break;
	}
	dlk_buf_release(&b);

	add_arg(out, p->command[0]);
	if (torchrun) {
		/* torchrun's own flags (pytorch.org/docs/stable/elastic/run.html): the c10d rendezvous
		 * on rank 0's node; no restarts of its own, since dlk restarts the whole gang under the
		 * Job's failure policy and a second layer of restarts would hide a failing rank */
		add_argf(out, "--nnodes=%d", at->n_nodes);
		add_argf(out, "--node-rank=%d", at->node_rank);
		add_argf(out, "--nproc-per-node=%d", ppn);
		add_arg(out, "--rdzv-backend=c10d");
		add_argf(out, "--rdzv-endpoint=%s:%d", at->master_addr, at->port);
		add_argf(out, "--rdzv-id=%s", at->run_id);
		add_arg(out, "--max-restarts=0");
	}
	for (int i = 1; i < p->n_command; i++)
		add_arg(out, p->command[i]);
	for (int i = 0; i < p->n_args; i++)
		add_arg(out, p->args[i]);
	return 0;
}
