/* `dlk status SWEEP`: the trials of a sweep, best first. */
#include "commands/sweep_show.h"
#include "commands/cluster.h"
#include "commands/ui.h"
#include "lib/runs/usage.h"
#include "lib/sweep/sweep.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int dlk_is_local_sweep(const struct dlk_ctx *ctx, const char *id)
{
	char *pdir = dlk_dir_of(ctx->file), *dir;
	struct stat st;
	int yes;

	if (!id || !*id || strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, "..")) {
		free(pdir);
		return 0;
	}
	dir = xasprintf("%s/.dlk/sweeps/%s", pdir, id);
	yes = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
	free(dir);
	free(pdir);
	return yes;
}

static void cell_value(char *out, const cJSON *v)
{
	if (cJSON_IsNumber(v))
		snprintf(out, DLK_TABLE_CELL, "%.4g", v->valuedouble);
	else if (cJSON_IsString(v))
		snprintf(out, DLK_TABLE_CELL, "%s", v->valuestring);
	else
		snprintf(out, DLK_TABLE_CELL, "-");
}

cJSON *dlk_sweep_doc(struct dlk_ctx *ctx, const char *id, struct dlk_err *err)
{
	char *ns = dlk_sweep_cluster_namespace(ctx->file, id);
	struct kube_client *c;
	cJSON *doc;

	if (!ns)
		return dlk_sweep_status(ctx->file, id, err);
	/* a sweep whose trials were Jobs: their records are in the cluster */
	c = dlk_kube_client(ctx, err);
	doc = c ? dlk_sweep_status_in(ctx->file, id, c, ctx->namespace_ ? ctx->namespace_ : ns, err) : NULL;
	dlk_kube_close(ctx, c);
	free(ns);
	return doc;
}

int dlk_show_sweep(struct dlk_ctx *ctx, const char *id)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *doc = dlk_sweep_doc(ctx, id, &err), *trials, *t, *p;
	const cJSON *best;
	struct dlk_table_row *rows;
	struct dlk_buf b = DLK_BUF_INIT;
	int n, r = 0, ncols;

	if (!doc)
		return dlk_report(ctx, &err);
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		int rc = dlk_doc_print(stdout, doc, ctx->output == DLK_OUTPUT_JSON, &err) ? dlk_report(ctx, &err) : 0;
		cJSON_Delete(doc);
		return rc;
	}
	trials = cJSON_GetObjectItemCaseSensitive(doc, "trials");
	n = cJSON_GetArraySize(trials);
	rows = xcalloc((size_t)n + 1, sizeof(*rows));
	/* the parameters' columns, in the order of the first trial's (the section's order) */
	p = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(trials, 0), "params");
	ncols = 4;
	snprintf(rows[0].c[0], DLK_TABLE_CELL, "TRIAL");
	snprintf(rows[0].c[1], DLK_TABLE_CELL, "OUTCOME");
	snprintf(rows[0].c[2], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(doc, "metric")->valuestring);
	for (char *c = rows[0].c[2]; *c; c++)
		*c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
	snprintf(rows[0].c[3], DLK_TABLE_CELL, "STOPPED AT");
	for (const cJSON *k = p ? p->child : NULL; k && ncols < DLK_TABLE_COLS - 1; k = k->next)
		snprintf(rows[0].c[ncols++], DLK_TABLE_CELL, "%s", k->string);
	snprintf(rows[0].c[ncols++], DLK_TABLE_CELL, "RUN");
	cJSON_ArrayForEach(t, trials) {
		const cJSON *tp = cJSON_GetObjectItemCaseSensitive(t, "params"), *sa = cJSON_GetObjectItemCaseSensitive(t, "stopped_at");
		int c = 4;
		r++;
		snprintf(rows[r].c[0], DLK_TABLE_CELL, "%d", cJSON_GetObjectItemCaseSensitive(t, "trial")->valueint);
		snprintf(rows[r].c[1], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(t, "outcome")->valuestring);
		cell_value(rows[r].c[2], cJSON_GetObjectItemCaseSensitive(t, "value"));
		if (cJSON_IsNumber(sa))
			snprintf(rows[r].c[3], DLK_TABLE_CELL, "%.0f", sa->valuedouble);
		else
			snprintf(rows[r].c[3], DLK_TABLE_CELL, "-");
		for (const cJSON *k = p ? p->child : NULL; k && c < ncols - 1; k = k->next)
			cell_value(rows[r].c[c++], cJSON_GetObjectItemCaseSensitive(tp, k->string));
		snprintf(rows[r].c[c], DLK_TABLE_CELL, "%.8s", cJSON_GetObjectItemCaseSensitive(t, "run")->valuestring);
	}
	dlk_table_print(ctx, &b, rows, r + 1, ncols);
	dlk_put_text(stdout, b.data, b.len);
	best = cJSON_GetObjectItemCaseSensitive(doc, "best");
	if (cJSON_IsObject(best) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(best, "job")) &&
	    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(best, "bundle")))
		/* on the trial's checkpoint claim: `dlk serve JOB` serves it from there */
		printf("best: trial %d, %s %.4g, bundle %s on the claim of job %s (dlk serve %s)\n",
		       cJSON_GetObjectItemCaseSensitive(best, "trial")->valueint,
		       cJSON_GetObjectItemCaseSensitive(doc, "metric")->valuestring,
		       cJSON_GetObjectItemCaseSensitive(best, "value")->valuedouble,
		       dlk_visible(cJSON_GetObjectItemCaseSensitive(best, "bundle")->valuestring),
		       dlk_visible(cJSON_GetObjectItemCaseSensitive(best, "job")->valuestring),
		       dlk_visible(cJSON_GetObjectItemCaseSensitive(best, "job")->valuestring));
	else if (cJSON_IsObject(best) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(best, "bundle")))
		printf("best: trial %d, %s %.4g, bundle %s (dlk serve --local %s)\n",
		       cJSON_GetObjectItemCaseSensitive(best, "trial")->valueint,
		       cJSON_GetObjectItemCaseSensitive(doc, "metric")->valuestring,
		       cJSON_GetObjectItemCaseSensitive(best, "value")->valuedouble,
		       dlk_visible(cJSON_GetObjectItemCaseSensitive(best, "bundle")->valuestring),
		       dlk_visible(cJSON_GetObjectItemCaseSensitive(best, "bundle")->valuestring));
	{
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(doc, "usage");
		struct dlk_prices pr;
		struct dlk_err perr = DLK_ERR_INIT;
		double cost = NAN;
		if (!dlk_prices_from_env(&pr, &perr))
			cost = dlk_usage_cost(u, &pr);
		else
			dlk_warn(ctx, "%s", perr.msg);
		printf("used: GPU time %.2f h, CPU time %.2f h", cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "gpu_seconds")) / 3600,
		       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "cpu_seconds")) / 3600);
		if (isfinite(cost))
			printf(", cost %.2f%s%s", cost, pr.currency[0] ? " " : "", pr.currency);
		printf("\n");
	}
	dlk_buf_release(&b);
	free(rows);
	cJSON_Delete(doc);
	return 0;
}
