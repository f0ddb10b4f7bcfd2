/* dlk lineage: what made a model, from its bundle's provenance: the dataset (id, the tag it was
 * resolved from, the store) or the data files, the project file's digest, the git commit, the
 * image, dlk's version, the run, and the bundle it was fine-tuned from when there is one. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/train/bundle.h"
#include "lib/util/mem.h"
#include "lib/util/jsonprint.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdlib.h>
#include <string.h>

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void line(const char *key, const char *value)
{
	/* every value comes from the bundle: an escape sequence in one must not reach the terminal */
	printf("%-12s %s\n", key, value && *value ? dlk_visible(value) : "(not recorded)");
}

static int run_lineage(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	const cJSON *prov, *ds, *data, *d, *parent;
	cJSON *out = NULL;
	int rc = 0;

	if (dlk_bundle_read(args->pos[0], &b, &err))
		return dlk_report(ctx, &err);
	prov = cJSON_GetObjectItemCaseSensitive(b.meta, "provenance");
	ds = cJSON_GetObjectItemCaseSensitive(prov, "dataset");
	data = cJSON_GetObjectItemCaseSensitive(prov, "data");
	parent = cJSON_GetObjectItemCaseSensitive(prov, "parent");
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		char *s;
		out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "bundle", args->pos[0]);
		cJSON_AddStringToObject(out, "weightsSha256", b.weights_sha256);
		cJSON_AddItemToObject(out, "provenance", cJSON_Duplicate(prov, 1));
		s = ctx->output == DLK_OUTPUT_JSON ? dlk_json_print(out) : yamljson_emit(out, &err);
		if (!s) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		fputs(s, stdout);
		if (ctx->output == DLK_OUTPUT_JSON)
			fputc('\n', stdout);
		free(s);
		goto out;
	}
	printf("bundle       %s (weights sha256:%.12s)\n", dlk_visible(args->pos[0]), dlk_visible(b.weights_sha256));
	if (ds) {
		const char *tag = jstr(ds, "tag"), *store = jstr(ds, "store");
		printf("dataset      %s%s%s%s\n", jstr(ds, "id") ? dlk_visible(jstr(ds, "id")) : "(no id)", tag ? " (" : "",
		       tag ? dlk_visible(tag) : "", tag ? ")" : "");
		if (store)
			printf("  store      %s\n", dlk_visible(store));
	}
	cJSON_ArrayForEach(d, data)
	{
		const char *url = jstr(d, "url"), *sha = jstr(d, "sha256"), *split = jstr(d, "split");
		printf("  %-10s %s sha256:%.12s\n", split ? dlk_visible(split) : "data", url ? dlk_visible(url) : "?",
		       sha ? dlk_visible(sha) : "?");
	}
	{
		const char *spec = jstr(prov, "spec_sha256"), *commit = jstr(prov, "git_commit");
		const cJSON *dirty = cJSON_GetObjectItemCaseSensitive(prov, "git_dirty");
		char buf[128];
		snprintf(buf, sizeof(buf), "sha256:%s", spec ? spec : "");
		line("project", spec ? buf : NULL);
		if (commit) {
			snprintf(buf, sizeof(buf), "%s%s", commit, cJSON_IsTrue(dirty) ? " (with uncommitted changes)" : "");
			line("git commit", buf);
		} else {
			line("git commit", NULL);
		}
		line("image", jstr(prov, "image"));
		line("dlk", jstr(prov, "dlk_version"));
		line("run", jstr(prov, "run_id"));
		if (jstr(prov, "started_at") || jstr(prov, "finished_at")) {
			snprintf(buf, sizeof(buf), "%s to %s", jstr(prov, "started_at") ? jstr(prov, "started_at") : "?",
			         jstr(prov, "finished_at") ? jstr(prov, "finished_at") : "?");
			line("trained", buf);
		}
		if (parent) {
			const char *ppath = jstr(parent, "bundle"), *psha = jstr(parent, "weights_sha256");
			snprintf(buf, sizeof(buf), "%s%s%.12s%s", ppath ? ppath : "", psha ? " (weights sha256:" : "",
			         psha ? psha : "", psha ? ")" : "");
			line("fine-tuned", buf);
		}
	}
out:
	cJSON_Delete(out);
	dlk_bundle_release(&b);
	return rc;
}

const struct dlk_command_def dlk_cmd_lineage = {
	.usage = "BUNDLE",
	.description = "Print what made the model in BUNDLE, from its provenance: the dataset (its id, the tag it\n"
	               "was resolved from and the store) and each data file's digest, the project file's digest,\n"
	               "the git commit (and whether the tree had changes), the image, dlk's version, the run, and\n"
	               "the bundle it was fine-tuned from, when there is one. The bundle is verified first.",
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_lineage,
	.examples = "  $ dlk lineage fashion.dlk\n"
	            "  $ dlk lineage fashion.dlk -o json\n",
};
