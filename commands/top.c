/* dlk top: what the runs here are doing, refreshed in place on a terminal, one sample as plain
 * lines or JSON otherwise. lib/top samples; this file prints. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "commands/cluster.h"
#include "lib/kube/client.h"
#include "lib/top/nvml.h"
#include "lib/train/progress.h"
#include "lib/util/utf8.h"
#include "lib/top/top.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double top_interval = 1.0;
static int top_once, top_cluster;
static const char *top_sort;
static volatile sig_atomic_t top_stop;

static void on_int(int s)
{
	(void)s;
	top_stop = 1;
}

static double pnum(const cJSON *p, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, k);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* a rank's shares of its step time, as three cells */
static void phase_cells(struct dlk_table_row *row, int at, const cJSON *e)
{
	for (int k = 0; k < DLK_PHASES; k++) {
		double v = pnum(e, dlk_step_phase_name(k));
		if (v >= 0)
			snprintf(row->c[at + k], DLK_TABLE_CELL, "%.0f", 100 * v);
		else
			snprintf(row->c[at + k], DLK_TABLE_CELL, "-");
	}
}

/* the run's model FLOP utilisation in percent, "-" when its peak or FLOPs are not known */
static void mfu_cell(char *cell, const cJSON *progress)
{
	double m = pnum(progress, DLK_PROGRESS_MFU);

	if (m >= 0)
		snprintf(cell, DLK_TABLE_CELL, "%.*f", m < 0.1 ? 2 : 1, 100 * m);
	else
		snprintf(cell, DLK_TABLE_CELL, "-");
}

static const char *const phase_head[DLK_PHASES] = { "DATA%", "COMPUTE%", "ALLREDUCE%" };

/* a GPU's figures as five cells: its index, utilisation, memory used / total, power, SM clock
 * (power < 0 and clock 0: not reported) */
#define GPU_CELLS 5
static const char *const gpu_head[GPU_CELLS] = { "GPU", "UTIL%", "MEMORY", "POWER", "SM CLOCK" };
static void gpu_cells(struct dlk_table_row *row, int at, double index, double util, double used, double total,
                      double power, double mhz)
{
	char u[32], t[32];

	dlk_fmt_bytes(u, sizeof(u), used > 0 ? (unsigned long long)used : 0);
	dlk_fmt_bytes(t, sizeof(t), total > 0 ? (unsigned long long)total : 0);
	snprintf(row->c[at], DLK_TABLE_CELL, "%.0f", index);
	snprintf(row->c[at + 1], DLK_TABLE_CELL, "%.0f", util);
	snprintf(row->c[at + 2], DLK_TABLE_CELL, "%s / %s", u, t);
	if (power >= 0)
		snprintf(row->c[at + 3], DLK_TABLE_CELL, "%.0f W", power);
	else
		snprintf(row->c[at + 3], DLK_TABLE_CELL, "-");
	if (mhz > 0)
		snprintf(row->c[at + 4], DLK_TABLE_CELL, "%.0f MHz", mhz);
	else
		snprintf(row->c[at + 4], DLK_TABLE_CELL, "-");
}

/* Below the ranks, a line per rank of a run that sampled its GPU: which GPU (NVML's index) and
 * its figures */
static void show_rank_gpus(struct dlk_ctx *ctx, struct dlk_buf *b, const cJSON *rows, const char *only)
{
	const cJSON *r, *e;
	int n = 0, cap = 1;
	struct dlk_table_row *t;

	cJSON_ArrayForEach(r, rows)
		cap += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "progress"),
		                                                           DLK_PROGRESS_GPUS));
	/* a run without step times (a user's program: its supervisor knows its GPUs, not its
	 * steps' split) has no line here, and still its GPUs' and warnings below */
	t = xcalloc((size_t)cap, sizeof(*t));
	snprintf(t[0].c[0], DLK_TABLE_CELL, "PROJECT");
	snprintf(t[0].c[1], DLK_TABLE_CELL, "RANK");
	for (int i = 0; i < GPU_CELLS; i++)
		snprintf(t[0].c[2 + i], DLK_TABLE_CELL, "%s", gpu_head[i]);
	cJSON_ArrayForEach(r, rows) {
		const char *p = cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring;
		if (only && strcmp(only, p))
			continue;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "progress"),
		                                                       DLK_PROGRESS_GPUS)) {
			if (n + 1 >= cap || pnum(e, "rank") < 0 || pnum(e, "gpu") < 0)
				continue;
			n++;
			snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", p);
			snprintf(t[n].c[1], DLK_TABLE_CELL, "%.0f", pnum(e, "rank"));
			gpu_cells(&t[n], 2, pnum(e, "gpu"), pnum(e, DLK_PROGRESS_GPU_UTIL), pnum(e, DLK_PROGRESS_GPU_MEM_USED),
			          pnum(e, DLK_PROGRESS_GPU_MEM_TOTAL), pnum(e, DLK_PROGRESS_GPU_POWER),
			          pnum(e, DLK_PROGRESS_GPU_SM_CLOCK));
		}
	}
	if (n) {
		dlk_buf_adds(b, "\n");
		dlk_table_print(ctx, b, t, n + 1, 2 + GPU_CELLS);
	}
	free(t);
}

/* the warnings of a run or a job (lib/top: ranks starved by input) */
static void show_warnings(struct dlk_buf *b, const char *who, const cJSON *warnings)
{
	const cJSON *w;

	cJSON_ArrayForEach(w, warnings)
		if (cJSON_IsString(w))
			dlk_buf_addf(b, "warning: %s: %s\n", dlk_visible(who), w->valuestring);
}

/* Below the runs, a line per rank of each run that published its progress: the epoch, the step,
 * the throughput, and where the rank's step time goes; then the warnings. */
static void show_ranks(struct dlk_ctx *ctx, struct dlk_buf *b, const cJSON *rows, const char *only)
{
	static const char *const h[] = { "PROJECT", "RANK", "EPOCH", "STEP", "SAMPLES/S", "MFU%" };
	const cJSON *r, *e;
	int n = 0, cap = 1;
	struct dlk_table_row *t;

	cJSON_ArrayForEach(r, rows)
		cap += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "progress"),
		                                                           DLK_PROGRESS_PHASES));
	/* a run without step times (a user's program: its supervisor knows its GPUs, not its
	 * steps' split) has no line here, and still its GPUs' and warnings below */
	t = xcalloc((size_t)cap, sizeof(*t));
	for (int i = 0; i < 6; i++)
		snprintf(t[0].c[i], DLK_TABLE_CELL, "%s", h[i]);
	for (int k = 0; k < DLK_PHASES; k++)
		snprintf(t[0].c[6 + k], DLK_TABLE_CELL, "%s", phase_head[k]);
	cJSON_ArrayForEach(r, rows) {
		const char *p = cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring;
		const cJSON *pr = cJSON_GetObjectItemCaseSensitive(r, "progress");
		if (only && strcmp(only, p))
			continue;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pr, DLK_PROGRESS_PHASES)) {
			if (n + 1 >= cap)
				break;
			n++;
			snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", p);
			snprintf(t[n].c[1], DLK_TABLE_CELL, "%.0f", pnum(e, "rank"));
			snprintf(t[n].c[2], DLK_TABLE_CELL, "%.0f/%.0f", pnum(pr, DLK_PROGRESS_EPOCH), pnum(pr, DLK_PROGRESS_EPOCHS));
			snprintf(t[n].c[3], DLK_TABLE_CELL, "%.0f/%.0f", pnum(pr, DLK_PROGRESS_STEP), pnum(pr, DLK_PROGRESS_TOTAL_STEPS));
			snprintf(t[n].c[4], DLK_TABLE_CELL, "%.0f", pnum(pr, DLK_PROGRESS_SAMPLES_PER_SEC));
			mfu_cell(t[n].c[5], pr);
			phase_cells(&t[n], 6, e);
		}
	}
	if (n) {
		dlk_buf_adds(b, "\n");
		dlk_table_print(ctx, b, t, n + 1, 6 + DLK_PHASES);
	}
	free(t);
	show_rank_gpus(ctx, b, rows, only);
	cJSON_ArrayForEach(r, rows) {
		const char *p = cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring;
		if (!only || !strcmp(only, p))
			show_warnings(b, p, cJSON_GetObjectItemCaseSensitive(r, "warnings"));
	}
}

static void show(struct dlk_ctx *ctx, const cJSON *rows, const char *only)
{
	struct dlk_table_row *t;
	struct dlk_buf b = DLK_BUF_INIT;
	const cJSON *r;
	int n = 0;

	t = xcalloc((size_t)cJSON_GetArraySize(rows) + 1, sizeof(*t));
	snprintf(t[0].c[0], DLK_TABLE_CELL, "PROJECT");
	snprintf(t[0].c[1], DLK_TABLE_CELL, "RUN");
	snprintf(t[0].c[2], DLK_TABLE_CELL, "PID");
	snprintf(t[0].c[3], DLK_TABLE_CELL, "PROCS");
	snprintf(t[0].c[4], DLK_TABLE_CELL, "CPU%%");
	snprintf(t[0].c[5], DLK_TABLE_CELL, "RSS");
	snprintf(t[0].c[6], DLK_TABLE_CELL, "SINCE");
	cJSON_ArrayForEach(r, rows) {
		const char *p = cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring;
		if (only && strcmp(only, p))
			continue;
		n++;
		snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", p);
		snprintf(t[n].c[1], DLK_TABLE_CELL, "%.8s", cJSON_GetObjectItemCaseSensitive(r, "run")->valuestring);
		snprintf(t[n].c[2], DLK_TABLE_CELL, "%.0f", cJSON_GetObjectItemCaseSensitive(r, "pid")->valuedouble);
		snprintf(t[n].c[3], DLK_TABLE_CELL, "%.0f", cJSON_GetObjectItemCaseSensitive(r, "processes")->valuedouble);
		snprintf(t[n].c[4], DLK_TABLE_CELL, "%.0f", cJSON_GetObjectItemCaseSensitive(r, "cpu_percent")->valuedouble);
		dlk_fmt_bytes(t[n].c[5], DLK_TABLE_CELL,
		              (unsigned long long)cJSON_GetObjectItemCaseSensitive(r, "rss_bytes")->valuedouble);
		snprintf(t[n].c[6], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(r, "since")->valuestring);
	}
	if (n)
		dlk_table_print(ctx, &b, t, n + 1, 7);
	else
		dlk_buf_adds(&b, "no runs going on here\n");
	free(t);
	show_ranks(ctx, &b, rows, only);
	dlk_put_text(stdout, b.data, b.len);
	fflush(stdout);
	dlk_buf_release(&b);
}

/* the model servers here (dlk serve --local): a line per model with its rates over the interval */
static void show_served(struct dlk_ctx *ctx, const cJSON *served)
{
	static const char *const h[] = { "SERVED", "MODEL", "PID", "REQ/S", "ERR/S", "ROWS/S", "LATENCY", "CPU%", "RSS" };
	const cJSON *s, *m;
	struct dlk_table_row *t;
	struct dlk_buf b = DLK_BUF_INIT;
	int n = 0, cap = 1;

	cJSON_ArrayForEach(s, served)
		cap += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s, "models")) + 1;
	/* a run without step times (a user's program: its supervisor knows its GPUs, not its
	 * steps' split) has no line here, and still its GPUs' and warnings below */
	t = xcalloc((size_t)cap, sizeof(*t));
	for (int i = 0; i < 9; i++)
		snprintf(t[0].c[i], DLK_TABLE_CELL, "%s", h[i]);
	cJSON_ArrayForEach(s, served) {
		const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(s, "cpu_percent");
		int up = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "up"));
		cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(s, "models")) {
			const cJSON *lat = cJSON_GetObjectItemCaseSensitive(m, "latency_ms");
			n++;
			snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(s, "address")->valuestring);
			snprintf(t[n].c[1], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(m, "model")->valuestring);
			snprintf(t[n].c[2], DLK_TABLE_CELL, "%.0f", pnum(s, "pid"));
			if (up) {
				snprintf(t[n].c[3], DLK_TABLE_CELL, "%.1f", pnum(m, "requests_per_s"));
				snprintf(t[n].c[4], DLK_TABLE_CELL, "%.1f", pnum(m, "errors_per_s"));
				snprintf(t[n].c[5], DLK_TABLE_CELL, "%.1f", pnum(m, "rows_per_s"));
				if (cJSON_IsNumber(lat))
					snprintf(t[n].c[6], DLK_TABLE_CELL, "%.2f ms", lat->valuedouble);
				else
					snprintf(t[n].c[6], DLK_TABLE_CELL, "-");
			} else {
				for (int i = 3; i < 7; i++)
					snprintf(t[n].c[i], DLK_TABLE_CELL, "%s", i == 3 ? "no /metrics" : "-");
			}
			if (cJSON_IsNumber(cpu))
				snprintf(t[n].c[7], DLK_TABLE_CELL, "%.0f", cpu->valuedouble);
			else
				snprintf(t[n].c[7], DLK_TABLE_CELL, "-");
			dlk_fmt_bytes(t[n].c[8], DLK_TABLE_CELL, (unsigned long long)pnum(s, "rss_bytes"));
		}
	}
	dlk_buf_adds(&b, "\n");
	dlk_table_print(ctx, &b, t, n + 1, 9);
	dlk_put_text(stdout, b.data, b.len);
	fflush(stdout);
	dlk_buf_release(&b);
	free(t);
}

static cJSON *gpus_json(const struct dlk_gpu_sample *g, int n)
{
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "index", g[i].index);
		cJSON_AddStringToObject(o, "name", g[i].name);
		cJSON_AddNumberToObject(o, "utilization_percent", g[i].util_percent);
		cJSON_AddNumberToObject(o, "memory_used_bytes", (double)g[i].mem_used);
		cJSON_AddNumberToObject(o, "memory_total_bytes", (double)g[i].mem_total);
		if (g[i].power_w >= 0)
			cJSON_AddNumberToObject(o, "power_watts", g[i].power_w);
		if (g[i].sm_clock_mhz)
			cJSON_AddNumberToObject(o, "sm_clock_mhz", g[i].sm_clock_mhz);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static void show_gpus(struct dlk_ctx *ctx, const struct dlk_gpu_sample *g, int n)
{
	struct dlk_table_row *t = xcalloc((size_t)n + 1, sizeof(*t));
	struct dlk_buf b = DLK_BUF_INIT;
	char used[32], total[32];

	snprintf(t[0].c[0], DLK_TABLE_CELL, "GPU");
	snprintf(t[0].c[1], DLK_TABLE_CELL, "UTIL%%");
	snprintf(t[0].c[2], DLK_TABLE_CELL, "MEMORY");
	snprintf(t[0].c[3], DLK_TABLE_CELL, "POWER");
	snprintf(t[0].c[4], DLK_TABLE_CELL, "SM CLOCK");
	snprintf(t[0].c[5], DLK_TABLE_CELL, "NAME");
	for (int i = 0; i < n; i++) {
		dlk_fmt_bytes(used, sizeof(used), g[i].mem_used);
		dlk_fmt_bytes(total, sizeof(total), g[i].mem_total);
		snprintf(t[i + 1].c[0], DLK_TABLE_CELL, "%d", g[i].index);
		snprintf(t[i + 1].c[1], DLK_TABLE_CELL, "%u", g[i].util_percent);
		snprintf(t[i + 1].c[2], DLK_TABLE_CELL, "%s / %s", used, total);
		if (g[i].power_w >= 0)
			snprintf(t[i + 1].c[3], DLK_TABLE_CELL, "%.0f W", g[i].power_w);
		else
			snprintf(t[i + 1].c[3], DLK_TABLE_CELL, "-");
		if (g[i].sm_clock_mhz)
			snprintf(t[i + 1].c[4], DLK_TABLE_CELL, "%u MHz", g[i].sm_clock_mhz);
		else
			snprintf(t[i + 1].c[4], DLK_TABLE_CELL, "-");
		snprintf(t[i + 1].c[5], DLK_TABLE_CELL, "%s", g[i].name);
	}
	dlk_buf_adds(&b, "\n");
	dlk_table_print(ctx, &b, t, n + 1, 6);
	dlk_put_text(stdout, b.data, b.len);
	dlk_buf_release(&b);
	free(t);
}

/* a line per pod whose rank sampled its GPU: the GPU (NVML's index on its node) and its figures */
static void show_pod_gpus(struct dlk_ctx *ctx, struct dlk_buf *b, const cJSON *jobs)
{
	const cJSON *j, *p;
	int n = 0, cap = 1;
	struct dlk_table_row *t;

	cJSON_ArrayForEach(j, jobs)
		cap += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "pods"));
	t = xcalloc((size_t)cap, sizeof(*t));
	snprintf(t[0].c[0], DLK_TABLE_CELL, "JOB");
	snprintf(t[0].c[1], DLK_TABLE_CELL, "RANK");
	snprintf(t[0].c[2], DLK_TABLE_CELL, "POD");
	for (int i = 0; i < GPU_CELLS; i++)
		snprintf(t[0].c[3 + i], DLK_TABLE_CELL, "%s", gpu_head[i]);
	cJSON_ArrayForEach(j, jobs) {
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(j, "pods")) {
			const cJSON *g = cJSON_GetObjectItemCaseSensitive(p, "gpu");
			if (!cJSON_IsObject(g) || n + 1 >= cap)
				continue;
			n++;
			snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", dlk_visible(cJSON_GetObjectItemCaseSensitive(j, "job")->valuestring));
			snprintf(t[n].c[1], DLK_TABLE_CELL, "%.0f", pnum(p, "rank"));
			snprintf(t[n].c[2], DLK_TABLE_CELL, "%s", dlk_visible(cJSON_GetObjectItemCaseSensitive(p, "pod")->valuestring));
			gpu_cells(&t[n], 3, pnum(g, "index"), pnum(g, "utilization_percent"), pnum(g, "memory_used_bytes"),
			          pnum(g, "memory_total_bytes"), pnum(g, "power_watts"), pnum(g, "sm_clock_mhz"));
		}
	}
	if (n) {
		dlk_buf_adds(b, "\n");
		dlk_table_print(ctx, b, t, n + 1, 3 + GPU_CELLS);
	}
	free(t);
}

/* a line per pod: its job, rank, phase, node, restarts, and the job's progress on rank 0's line */
static void show_cluster(struct dlk_ctx *ctx, const cJSON *doc)
{
	const cJSON *j, *p, *jobs = cJSON_GetObjectItemCaseSensitive(doc, "jobs");
	struct dlk_table_row *t;
	struct dlk_buf b = DLK_BUF_INIT;
	int n = 0, rows = 1;
	static const char *const h[] = { "JOB", "RANK", "POD", "PHASE", "NODE", "RESTARTS", "PROGRESS", "SAMPLES/S", "MFU%" };
	const int nc = 9 + DLK_PHASES;

	cJSON_ArrayForEach(j, jobs)
		rows += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "pods")) + 1;
	t = xcalloc((size_t)rows, sizeof(*t));
	for (int i = 0; i < 9; i++)
		snprintf(t[0].c[i], DLK_TABLE_CELL, "%s", h[i]);
	for (int k = 0; k < DLK_PHASES; k++)
		snprintf(t[0].c[9 + k], DLK_TABLE_CELL, "%s", phase_head[k]);
	cJSON_ArrayForEach(j, jobs) {
		const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "progress"), *pods = cJSON_GetObjectItemCaseSensitive(j, "pods");
		const char *name = cJSON_GetObjectItemCaseSensitive(j, "job")->valuestring;
		char prog[DLK_TABLE_CELL] = "-", sps[32] = "-", mfu[DLK_TABLE_CELL] = "-";
		int first = 1;
		if (cJSON_IsObject(pr)) {
			snprintf(prog, sizeof(prog), "epoch %.0f/%.0f step %.0f/%.0f loss %.4g", pnum(pr, DLK_PROGRESS_EPOCH),
			         pnum(pr, DLK_PROGRESS_EPOCHS), pnum(pr, DLK_PROGRESS_STEP), pnum(pr, DLK_PROGRESS_TOTAL_STEPS),
			         pnum(pr, DLK_PROGRESS_LOSS));
			if (pnum(pr, DLK_PROGRESS_SAMPLES_PER_SEC) >= 0)
				snprintf(sps, sizeof(sps), "%.0f", pnum(pr, DLK_PROGRESS_SAMPLES_PER_SEC));
			mfu_cell(mfu, pr);
		}
		if (!cJSON_GetArraySize(pods)) {
			n++;
			snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", dlk_visible(name));
			snprintf(t[n].c[1], DLK_TABLE_CELL, "-");
			snprintf(t[n].c[2], DLK_TABLE_CELL, "-");
			snprintf(t[n].c[3], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(j, "state")->valuestring);
			for (int i = 4; i < nc; i++)
				snprintf(t[n].c[i], DLK_TABLE_CELL, "%s", i == 6 ? prog : i == 7 ? sps : i == 8 ? mfu : "-");
			continue;
		}
		cJSON_ArrayForEach(p, pods) {
			const cJSON *rank = cJSON_GetObjectItemCaseSensitive(p, "rank"), *node = cJSON_GetObjectItemCaseSensitive(p, "node");
			n++;
			snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", dlk_visible(name));
			if (cJSON_IsNumber(rank))
				snprintf(t[n].c[1], DLK_TABLE_CELL, "%d", rank->valueint);
			else
				snprintf(t[n].c[1], DLK_TABLE_CELL, "-");
			snprintf(t[n].c[2], DLK_TABLE_CELL, "%s", dlk_visible(cJSON_GetObjectItemCaseSensitive(p, "pod")->valuestring));
			snprintf(t[n].c[3], DLK_TABLE_CELL, "%s%s", dlk_visible(cJSON_GetObjectItemCaseSensitive(p, "phase")->valuestring),
			         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "terminating")) ? " (terminating)" : "");
			snprintf(t[n].c[4], DLK_TABLE_CELL, "%s", cJSON_IsString(node) ? dlk_visible(node->valuestring) : "-");
			snprintf(t[n].c[5], DLK_TABLE_CELL, "%d", cJSON_GetObjectItemCaseSensitive(p, "restarts")->valueint);
			/* rank 0 publishes the job's progress: on its line */
			snprintf(t[n].c[6], DLK_TABLE_CELL, "%s", first ? prog : "");
			snprintf(t[n].c[7], DLK_TABLE_CELL, "%s", first ? sps : "");
			snprintf(t[n].c[8], DLK_TABLE_CELL, "%s", first ? mfu : "");
			phase_cells(&t[n], 9, cJSON_GetObjectItemCaseSensitive(p, "step_time"));
			first = 0;
		}
	}
	if (n)
		dlk_table_print(ctx, &b, t, n + 1, nc);
	else
		dlk_buf_addf(&b, "no training jobs running in namespace '%s'\n",
		             dlk_visible(cJSON_GetObjectItemCaseSensitive(doc, "namespace")->valuestring));
	show_pod_gpus(ctx, &b, jobs);
	cJSON_ArrayForEach(j, jobs)
		show_warnings(&b, cJSON_GetObjectItemCaseSensitive(j, "job")->valuestring,
		              cJSON_GetObjectItemCaseSensitive(j, "warnings"));
	dlk_put_text(stdout, b.data, b.len);
	fflush(stdout);
	dlk_buf_release(&b);
	free(t);
}

/* the models dlk serve deployed: a line per track, replicas ready/desired, the rates their pods'
 * /metrics gave through the API server's pod proxy, and why not where none could be read */
static void show_cluster_served(struct dlk_ctx *ctx, const cJSON *served)
{
	static const char *const h[] = { "SERVED", "TRACK", "READY", "REQ/S", "ERR/S", "ROWS/S", "LATENCY", "ROLLOUT" };
	const cJSON *s;
	struct dlk_table_row *t;
	struct dlk_buf b = DLK_BUF_INIT;
	int n = 0;

	if (!cJSON_GetArraySize(served))
		return;
	t = xcalloc((size_t)cJSON_GetArraySize(served) + 1, sizeof(*t));
	for (int i = 0; i < 8; i++)
		snprintf(t[0].c[i], DLK_TABLE_CELL, "%s", h[i]);
	cJSON_ArrayForEach(s, served) {
		const cJSON *lat = cJSON_GetObjectItemCaseSensitive(s, "latency_ms");
		const char *reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "reason"));
		int have = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(s, "requests_per_s"));
		n++;
		snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", dlk_visible(cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring));
		snprintf(t[n].c[1], DLK_TABLE_CELL, "%s", dlk_visible(cJSON_GetObjectItemCaseSensitive(s, "track")->valuestring));
		snprintf(t[n].c[2], DLK_TABLE_CELL, "%.0f/%.0f", pnum(s, "ready"), pnum(s, "desired"));
		if (have) {
			snprintf(t[n].c[3], DLK_TABLE_CELL, "%.1f", pnum(s, "requests_per_s"));
			snprintf(t[n].c[4], DLK_TABLE_CELL, "%.1f", pnum(s, "errors_per_s"));
			snprintf(t[n].c[5], DLK_TABLE_CELL, "%.1f", pnum(s, "rows_per_s"));
		} else {
			for (int i = 3; i < 6; i++)
				snprintf(t[n].c[i], DLK_TABLE_CELL, "-");
		}
		if (cJSON_IsNumber(lat))
			snprintf(t[n].c[6], DLK_TABLE_CELL, "%.2f ms", lat->valuedouble);
		else
			snprintf(t[n].c[6], DLK_TABLE_CELL, "-");
		snprintf(t[n].c[7], DLK_TABLE_CELL, "%s%s%.150s",
		         cJSON_GetObjectItemCaseSensitive(s, "rollout")->valuestring, reason ? ": " : "",
		         reason ? dlk_visible(reason) : "");
	}
	dlk_buf_adds(&b, "\n");
	dlk_table_print(ctx, &b, t, n + 1, 8);
	cJSON_ArrayForEach(s, served) {
		const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "metrics"));
		if (why) {
			dlk_buf_addf(&b, "note: %s: no request rates: ", dlk_visible(cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring));
			dlk_buf_addf(&b, "%s\n", dlk_visible(why));
		}
	}
	dlk_put_text(stdout, b.data, b.len);
	fflush(stdout);
	dlk_buf_release(&b);
	free(t);
}

/* --cluster: the namespace's training Jobs and their pods, from the API */
static int run_top_cluster(struct dlk_ctx *ctx, const char *only, int live)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = dlk_kube_client(ctx, &err);
	const char *ns;
	int rc = 0, said_served = 0;

	if (!c)
		return dlk_report(ctx, &err);
	ns = ctx->namespace_ ? ctx->namespace_ : kube_client_namespace(c);
	do {
		double t0 = dlk_now();
		cJSON *doc = dlk_top_cluster(c, ns, only, &err), *served;
		if (!doc) {
			rc = dlk_report(ctx, &err);
			break;
		}
		/* the served models, their rates over the interval (it waits it when it reads a pod) */
		served = dlk_top_cluster_served(c, ns, only, top_interval, &err);
		if (!served) {
			/* the jobs still show to a user who may not list Deployments: why not, once */
			if (!said_served++ && ctx->output != DLK_OUTPUT_JSON)
				dlk_warn(ctx, "served models not shown: %s", err.msg);
			cJSON_AddStringToObject(doc, "served_error", err.msg);
			dlk_err_clear(&err);
			served = cJSON_CreateArray();
		}
		cJSON_AddItemToObject(doc, "served", served);
		if (top_sort)
			dlk_top_sort_cluster(doc, top_sort);
		if (ctx->output == DLK_OUTPUT_JSON) {
			char *s = cJSON_Print(doc);
			printf("%s\n", s);
			free(s);
		} else {
			if (live)
				fputs("\033[H\033[J", stdout);
			show_cluster(ctx, doc);
			show_cluster_served(ctx, served);
		}
		cJSON_Delete(doc);
		while (live && !top_stop && dlk_now() - t0 < top_interval)
			usleep(50000);
	} while (live && !top_stop);
	dlk_kube_close(ctx, c);
	return rc;
}

static int run_top(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *only = args->n_pos ? args->pos[0] : NULL;
	int live = ctx->tty_out && !top_once && ctx->output != DLK_OUTPUT_JSON && ctx->output != DLK_OUTPUT_YAML;
	struct sigaction sa = { 0 };

	sa.sa_handler = on_int;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	if (top_sort && !dlk_top_sort_key_ok(top_sort)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--sort: '%s' is not a column to sort by; one of " DLK_TOP_SORT_KEYS,
		         dlk_visible(top_sort));
		return dlk_report(ctx, &err);
	}
	if (top_cluster && top_sort && strcmp(top_sort, "rank") && strcmp(top_sort, "data") && strcmp(top_sort, "compute") &&
	    strcmp(top_sort, "allreduce")) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--sort %s sorts the runs here; with --cluster the pods sort by rank, data, "
		         "compute or allreduce", dlk_visible(top_sort));
		return dlk_report(ctx, &err);
	}
	if (top_cluster)
		return run_top_cluster(ctx, only, live);
	int said = 0;
	do {
		cJSON *begun = dlk_top_served_begin();
		cJSON *rows = dlk_top_local(ctx->file, top_interval, &err);
		cJSON *served = dlk_top_served_end(begun, top_interval);
		struct dlk_gpu_sample *g = NULL;
		int ng = 0;
		char why[512] = "";
		int nvml = dlk_nvml_sample(&g, &ng, why, sizeof(why));
		if (!rows) {
			free(g);
			cJSON_Delete(served);
			return dlk_report(ctx, &err);
		}
		if (top_sort)
			dlk_top_sort(rows, top_sort);
		/* without NVML the CPU figures still show; why is said once */
		if (nvml && !said++ && ctx->output != DLK_OUTPUT_JSON)
			dlk_info(ctx, "%s", why);
		if (ctx->output == DLK_OUTPUT_JSON) {
			cJSON *doc = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(doc, "runs"), *r, *next;
			char *s;
			for (r = rows->child; r; r = next) {
				next = r->next;
				if (only && strcmp(only, cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring))
					continue;
				cJSON_AddItemToArray(arr, cJSON_DetachItemViaPointer(rows, r));
			}
			cJSON_AddNumberToObject(doc, "interval_s", top_interval);
			cJSON_AddItemToObject(doc, "served", served);
			served = NULL;
			cJSON_AddItemToObject(doc, "gpus", gpus_json(g, ng));
			if (nvml)
				cJSON_AddStringToObject(doc, "nvml", why);
			else
				cJSON_AddNullToObject(doc, "nvml");
			s = cJSON_Print(doc);
			printf("%s\n", s);
			free(s);
			cJSON_Delete(doc);
		} else {
			/* in place: home, clear to the end, the table */
			if (live)
				fputs("\033[H\033[J", stdout);
			show(ctx, rows, only);
			if (!only)
				show_served(ctx, served);
			if (ng)
				show_gpus(ctx, g, ng);
		}
		cJSON_Delete(served);
		free(g);
		cJSON_Delete(rows);
	} while (live && !top_stop);
	return 0;
}

static const struct dlk_option top_options[] = {
	OPT_DURATION(0, "interval", &top_interval, "DURATION", "sample CPU use over this long (and refresh as often)",
	             .def_doc = "1s"),
	OPT_STRING(0, "sort", &top_sort, "KEY", NULL, "sort the runs by cpu (the default), rss, project or since, or the "
	           "lines of ranks by rank (the default), data, compute or allreduce (largest first)"),
	OPT_BOOL(0, "once", &top_once, "one sample, even on a terminal", .flags = OPT_NONEG),
	OPT_BOOL(0, "cluster", &top_cluster, "the training jobs of the namespace (-n) and their pods, and the models dlk serve "
	         "deployed there, from the cluster",
	         .flags = OPT_NONEG),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_top = {
	.usage = "[PROJECT]",
	.description = "Show what the runs going on here are doing: for each project trained on this machine\n"
	               "(dlk train --local, the trials of dlk sweep --local), its run, the processes (a gang's\n"
	               "workers included), their CPU use (100% is one core) and resident memory. On a terminal\n"
	               "the view refreshes in place until Ctrl-C; piped, it prints one sample; -o json prints\n"
	               "one sample as {\"runs\": [...], \"interval_s\"}. Below the runs, a line per rank: its epoch,\n"
	               "step, the run's MFU and where its step time goes (data wait, compute, all-reduce), and\n"
	               "the GPU it samples (utilisation, memory, power, SM clock), with a warning on a rank\n"
	               "starved by input and on an idle rank (its GPU unused, or the others waiting for it).\n"
	               "With --cluster: the training jobs of the namespace that have not ended, a line per pod\n"
	               "(rank, phase, node, restarts, GPU) and the progress rank 0 publishes; and the models\n"
	               "dlk serve deployed: replicas ready/desired, rollout, and requests/s and latency from\n"
	               "their pods' /metrics through the API server's pod proxy.",
	.options = top_options,
	.min_pos = 0,
	.max_pos = 1,
	.run = run_top,
	.examples = "  $ dlk top\n"
	            "  $ dlk top --once fashion-mlp\n"
	            "  $ dlk top -o json --interval 2s\n"
	            "  $ dlk top --cluster -n team-a\n",
};
