#include "lib/comm/rendezvous.h"
#include "lib/jobs/podenv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a whole non-negative decimal number no larger than max. */
static int parse_num(const char *name, const char *s, long max, long *out, struct dlk_err *err)
{
	char *end;
	long v;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		goto bad;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s '%.64s' is not a number from 0 to %ld", name, s, max);
}

int dist_env_read(struct dist_env *env, struct dlk_err *err)
{
	const char *rank = getenv(DLK_ENV_RANK), *idx = getenv(DLK_ENV_COMPLETION_INDEX);
	const char *world = getenv(DLK_ENV_WORLD_SIZE), *addr = getenv(DLK_ENV_MASTER_ADDR);
	const char *port = getenv(DLK_ENV_MASTER_PORT);
	const char *lrank = getenv(DLK_ENV_LOCAL_RANK), *lworld = getenv(DLK_ENV_LOCAL_WORLD_SIZE);
	long r = 0, w = 1, p = DIST_DEFAULT_PORT, ri, lr = 0, lw = 1;

	memset(env, 0, sizeof(*env));
	if (world && *world) {
		if (parse_num(DLK_ENV_WORLD_SIZE, world, DIST_WORLD_MAX, &w, err))
			return -1;
		if (w < 1)
			return dlk_errf(err, DLK_EXIT_CONFIG, "WORLD_SIZE must be at least 1");
	}
	if (rank && *rank) {
		if (parse_num(DLK_ENV_RANK, rank, DIST_WORLD_MAX, &r, err))
			return -1;
		if (idx && *idx) {
			if (parse_num(DLK_ENV_COMPLETION_INDEX, idx, DIST_WORLD_MAX, &ri, err))
				return -1;
			if (ri != r)
				return dlk_errf(err, DLK_EXIT_CONFIG,
						"RANK %ld and JOB_COMPLETION_INDEX %ld disagree", r, ri);
		}
	} else if (idx && *idx) {
		if (parse_num(DLK_ENV_COMPLETION_INDEX, idx, DIST_WORLD_MAX, &r, err))
			return -1;
	} else if (w > 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "neither RANK nor JOB_COMPLETION_INDEX is set (WORLD_SIZE is %ld)", w);
		return dlk_err_hint(err, "run workers as an Indexed Job, or set RANK for each worker");
	}
	if (r >= w)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rank %ld is out of range for WORLD_SIZE %ld", r, w);
	if (port && *port) {
		if (parse_num(DLK_ENV_MASTER_PORT, port, 65535, &p, err))
			return -1;
		if (p < 1)
			return dlk_errf(err, DLK_EXIT_CONFIG, "MASTER_PORT must be from 1 to 65535");
	}
	if (addr && *addr) {
		if (strlen(addr) >= sizeof(env->master_addr))
			return dlk_errf(err, DLK_EXIT_CONFIG, "MASTER_ADDR is longer than %zu bytes",
					sizeof(env->master_addr) - 1);
		snprintf(env->master_addr, sizeof(env->master_addr), "%s", addr);
	} else if (w > 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "MASTER_ADDR is not set (WORLD_SIZE is %ld)", w);
		return dlk_err_hint(err, "set MASTER_ADDR to the address or DNS name of rank 0");
	}
	if (lworld && *lworld) {
		if (parse_num(DLK_ENV_LOCAL_WORLD_SIZE, lworld, DIST_WORLD_MAX, &lw, err))
			return -1;
		if (lw < 1)
			return dlk_errf(err, DLK_EXIT_CONFIG, "LOCAL_WORLD_SIZE must be at least 1");
	}
	if (lrank && *lrank) {
		if (parse_num(DLK_ENV_LOCAL_RANK, lrank, DIST_WORLD_MAX, &lr, err))
			return -1;
		if (lr >= lw && lworld && *lworld)
			return dlk_errf(err, DLK_EXIT_CONFIG, "LOCAL_RANK %ld is out of range for LOCAL_WORLD_SIZE %ld", lr, lw);
	}
	env->local_rank = (int)lr;
	env->local_world = (int)lw;
	env->rank = (int)r;
	env->world = (int)w;
	env->master_port = (int)p;
	return 0;
}
