/* The device communicator: a backend's collectives over device memory (NCCL in the CUDA
 * backend, struct dlk_device_comm) behind the communication interface, with a watchdog.
 *
 * A device collective can hang where a TCP one cannot: the GPU waits in a kernel for a peer
 * that is gone, and nothing on the host returns. So a thread polls the communicator's health
 * (NCCL's asynchronous error, and how long the oldest collective has been in flight) and, on an
 * error or a collective stalled past the timeout, aborts the communicator, which releases every
 * waiter; the failing call then reports the watchdog's reason, restartable. */
#include "lib/comm/comm.h"
#include "lib/comm/rendezvous.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/nn/backend.h"
#include "lib/util/mem.h"

#define WATCH_MS 100 /* how often the watchdog looks */

struct dev_comm {
	struct dlk_comm base;
	const struct dlk_device_comm *dc;
	void *h;
	int stall_ms;
	pthread_t watchdog;
	int watching;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;             /* the watchdog should end */
	int broken;           /* a call failed or the watchdog aborted: every call fails */
	struct dlk_err why;   /* the first reason */
};

static void step_str(const struct dev_comm *d, char *out, size_t len)
{
	if (d->base.step >= 0)
		snprintf(out, len, " (step %ld)", d->base.step);
	else
		out[0] = '\0';
}

/* Records the first failure; the caller holds mu. */
static void set_broken(struct dev_comm *d, const char *what, const char *msg)
{
	char step[48];

	if (d->broken)
		return;
	d->broken = 1;
	step_str(d, step, sizeof(step));
	dlk_errf(&d->why, DLK_EXIT_RESTARTABLE, "rank %d: %s%s%s%s", d->base.rank, what, *msg ? ": " : "", msg, step);
	dlk_err_hint(&d->why, "the gang restarts from the last checkpoint; NCCL_DEBUG=WARN in the pod's environment "
			      "shows NCCL's own account");
}

static void *watch(void *arg)
{
	struct dev_comm *d = arg;
	char msg[512];

	pthread_mutex_lock(&d->mu);
	while (!d->stop && !d->broken) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += WATCH_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
		if (d->stop || d->broken)
			break;
		pthread_mutex_unlock(&d->mu);
		msg[0] = '\0';
		int h = d->dc->health(d->h, d->stall_ms, msg, sizeof(msg));
		pthread_mutex_lock(&d->mu);
		if (h && !d->stop) {
			set_broken(d, h > 0 ? "the watchdog gave up on a collective" : "the watchdog saw a collective fail",
				   msg);
			pthread_mutex_unlock(&d->mu);
			d->dc->abort(d->h); /* releases whoever waits in the collective */
			pthread_mutex_lock(&d->mu);
		}
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* The error of a failed call: the watchdog's reason when it aborted, else the call's own. */
static int call_failed(struct dev_comm *d, const char *what, const char *msg, struct dlk_err *err)
{
	pthread_mutex_lock(&d->mu);
	set_broken(d, what, msg);
	*err = d->why;
	pthread_mutex_unlock(&d->mu);
	d->dc->abort(d->h); /* the other ranks learn it through NCCL; no collective is left half-done */
	return -1;
}

static int is_broken(struct dev_comm *d, struct dlk_err *err)
{
	int b;
	pthread_mutex_lock(&d->mu);
	b = d->broken;
	if (b)
		*err = d->why;
	pthread_mutex_unlock(&d->mu);
	return b;
}

static int dev_start(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err)
{
	struct dev_comm *d = (struct dev_comm *)c;
	char msg[512] = "";

	if (is_broken(d, err))
		return -1;
	if (d->dc->allreduce(d->h, buf, count, op == COMM_AVG, msg, sizeof(msg)))
		return call_failed(d, "all-reduce", msg, err);
	return 0;
}

static int dev_wait(struct dlk_comm *c, struct dlk_err *err)
{
	struct dev_comm *d = (struct dev_comm *)c;
	char msg[512] = "";

	if (is_broken(d, err))
		return -1;
	if (d->dc->wait(d->h, 1, msg, sizeof(msg)))
		return call_failed(d, "waiting for a collective", msg, err);
	return 0;
}

static int dev_allreduce(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err)
{
	return dev_start(c, buf, count, op, err) || dev_wait(c, err) ? -1 : 0;
}

static int dev_broadcast(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err)
{
	struct dev_comm *d = (struct dev_comm *)c;
	char msg[512] = "";

	if (is_broken(d, err))
		return -1;
	if (d->dc->broadcast(d->h, buf, nbytes, root, msg, sizeof(msg)))
		return call_failed(d, "broadcast", msg, err);
	return dev_wait(c, err);
}

static int dev_reduce_scatter(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			      struct dlk_err *err)
{
	struct dev_comm *d = (struct dev_comm *)c;
	char msg[512] = "";

	if (!d->dc->reduce_scatter)
		return dev_allreduce(c, buf, count, op, err);
	if (is_broken(d, err))
		return -1;
	if (d->dc->reduce_scatter(d->h, buf, count, op == COMM_AVG, msg, sizeof(msg)))
		return call_failed(d, "reduce-scatter", msg, err);
	return dev_wait(c, err);
}

static int dev_allgather(struct dlk_comm *c, float *buf, size_t count, struct dlk_err *err)
{
	struct dev_comm *d = (struct dev_comm *)c;
	char msg[512] = "";

	if (!d->dc->allgather) {
		for (int r = 0; r < c->world; r++) {
			size_t off, len;
			comm_shard(count, c->world, r, &off, &len);
			if (len && dev_broadcast(c, buf + off, len * sizeof(float), r, err))
				return -1;
		}
		return 0;
	}
	if (is_broken(d, err))
		return -1;
	if (d->dc->allgather(d->h, buf, count, msg, sizeof(msg)))
		return call_failed(d, "all-gather", msg, err);
	return dev_wait(c, err);
}

static int dev_barrier(struct dlk_comm *c, struct dlk_err *err)
{
	struct dev_comm *d = (struct dev_comm *)c;
	/* NCCL has no barrier; the host communicator beside this one has */
	return dlk_errf(err, DLK_EXIT_FAIL, "%s: no barrier over device memory; use the host communicator", d->dc->name);
}

static void dev_free(struct dlk_comm *c)
{
	struct dev_comm *d = (struct dev_comm *)c;

	if (d->watching) {
		pthread_mutex_lock(&d->mu);
		d->stop = 1;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->watchdog, NULL);
	}
	if (d->h)
		d->dc->close(d->h);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static const struct dlk_comm_ops dev_ops = {
	.name = "device",
	.allreduce = dev_allreduce,
	.broadcast = dev_broadcast,
	.barrier = dev_barrier,
	.free = dev_free,
	.allreduce_start = dev_start,
	.wait = dev_wait,
	.reduce_scatter = dev_reduce_scatter,
	.allgather = dev_allgather,
};

struct dlk_comm *comm_device_new(const struct dlk_device_comm *dc, const void *id, int rank, int world,
				 int stall_timeout_ms, struct dlk_err *err)
{
	struct dev_comm *d;
	char msg[512] = "";
	void *h;
	int ms = stall_timeout_ms > 0 ? stall_timeout_ms : 300000;

	h = dc->open(id, rank, world, ms, msg, sizeof(msg));
	if (!h) {
		dlk_errf(err, DLK_EXIT_RESTARTABLE, "%s: %s", dc->name, msg);
		dlk_err_hint(err, "NCCL_DEBUG=INFO in the pod's environment shows how NCCL connects; NCCL_SOCKET_IFNAME "
				  "picks the network interface");
		return NULL;
	}
	d = xcalloc(1, sizeof(*d));
	d->base.ops = &dev_ops;
	d->base.rank = rank;
	d->base.world = world;
	d->base.step = -1;
	d->base.device_buffers = 1;
	d->dc = dc;
	d->h = h;
	d->stall_ms = ms;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if (pthread_create(&d->watchdog, NULL, watch, d) != 0) {
		dev_free(&d->base);
		dlk_errf(err, DLK_EXIT_FAIL, "%s: cannot start the watchdog thread", dc->name);
		return NULL;
	}
	d->watching = 1;
	return &d->base;
}

int dist_join(const struct dist_rdzv_opts *o, const struct dlk_device_comm *dc, int stall_timeout_ms,
	      struct dlk_comm **host, struct dlk_comm **device, struct dlk_err *err)
{
	struct dist_rdzv_opts ro = *o;
	struct dist_group g = DIST_GROUP_INIT;
	unsigned char *id = NULL;

	*host = NULL;
	if (device)
		*device = NULL;
	if (dc && device && o->world > 1) {
		char msg[512] = "";
		if (dc->id_bytes == 0 || dc->id_bytes > 4096)
			return dlk_errf(err, DLK_EXIT_FAIL, "%s: an id of %zu bytes", dc->name, dc->id_bytes);
		/* a rank that cannot load the library says so now, not as a timeout of everyone */
		if (dc->load(msg, sizeof(msg)))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s", dc->name, msg);
		if (o->rank == 0) {
			id = xcalloc(1, dc->id_bytes);
			if (dc->make_id(id, msg, sizeof(msg))) {
				free(id);
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s", dc->name, msg);
			}
			ro.blob = id;
			ro.blob_len = dc->id_bytes;
		}
	}
	if (dist_rendezvous(&ro, &g, err)) {
		free(id);
		return -1;
	}
	free(id);
	if (dc && device && g.world > 1) {
		if (g.blob_len != dc->id_bytes) {
			dist_group_release(&g);
			/* rank 0 runs without a device communicator (another backend) */
			return dlk_errf(err, DLK_EXIT_CONFIG, "rank %d uses %s but rank 0 sent no %s id (%zu bytes)",
					g.rank, dc->name, dc->name, g.blob_len);
		}
		*device = comm_device_new(dc, g.blob, g.rank, g.world, stall_timeout_ms, err);
		if (!*device) {
			dist_group_release(&g);
			return -1;
		}
	}
	*host = comm_tcp_new(&g, stall_timeout_ms);
	dist_group_release(&g);
	return 0;
}
