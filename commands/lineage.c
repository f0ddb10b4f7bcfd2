/* dlk lineage: what made a model, from its bundle's provenance: the dataset (id, the tag it was
 * resolved from, the store) or the data files, the project file's digest, the git commit, the
 * image, dlk's version, the run, and the bundle it was fine-tuned from when there is one. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/project/project.h"
#include "lib/store/dataset.h"
#include "lib/store/graph.h"
#include "lib/store/provenance.h"
#include "lib/train/bundle.h"
#include "lib/util/mem.h"
#include "lib/util/jsonprint.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static const char *lineage_from;

/* A dataset's lineage: its provenance.json, then that of the dataset it was made from, while
 * the store has one (a chain of at most 16 datasets). */
static int dataset_lineage(struct dlk_ctx *ctx, const char *ref)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	cJSON *chain = cJSON_CreateArray();
	char id[65];
	int rc = 0;

	if (dlk_data_maybe_project(ctx, lineage_from, &spec, &err) || dlk_data_store_open(ctx, lineage_from, spec, &ds, &err) ||
	    dlk_dataset_resolve(ds.store, ref, 1, id, &err))
		goto fail;
	for (int depth = 0; depth < 16; depth++) {
		struct dlk_manifest m = DLK_MANIFEST_INIT;
		cJSON *prov = NULL, *step = cJSON_CreateObject();
		const cJSON *in;
		const char *next;
		char buf[72];

		snprintf(buf, sizeof(buf), "sha256:%s", id);
		cJSON_AddStringToObject(step, "id", buf);
		cJSON_AddItemToArray(chain, step);
		if (dlk_dataset_manifest(ds.store, id, &m, &err) || dlk_dataset_provenance(ds.store, &m, &prov, &err)) {
			dlk_manifest_release(&m);
			goto fail;
		}
		dlk_manifest_release(&m);
		if (!prov)
			break; /* pushed from files: the raw data */
		cJSON_AddItemToObject(step, "provenance", prov);
		{
			/* the model a prediction set names: the dataset of the store that holds its bundle
			   (a pipeline's train stage output), with what made it */
			const cJSON *sha = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prov, "model"),
			                                                   "bundle_sha256");
			const char *hex = cJSON_IsString(sha) ? sha->valuestring : "";
			char mid[65];
			if (!strncmp(hex, "sha256:", 7))
				hex += 7;
			if (strlen(hex) == 64) {
				int found = dlk_dataset_holding(ds.store, hex, mid, &err);
				if (found < 0)
					goto fail;
				if (found) {
					struct dlk_manifest mm = DLK_MANIFEST_INIT;
					cJSON *mprov = NULL, *md = cJSON_AddObjectToObject(step, "model_dataset");
					snprintf(buf, sizeof(buf), "sha256:%s", mid);
					cJSON_AddStringToObject(md, "id", buf);
					if (dlk_dataset_manifest(ds.store, mid, &mm, &err) ||
					    dlk_dataset_provenance(ds.store, &mm, &mprov, &err)) {
						dlk_manifest_release(&mm);
						goto fail;
					}
					dlk_manifest_release(&mm);
					if (mprov)
						cJSON_AddItemToObject(md, "provenance", mprov);
				}
			}
		}
		in = cJSON_GetObjectItemCaseSensitive(prov, "input");
		next = jstr(in, "id");
		if (!next || strncmp(next, "sha256:", 7) || strlen(next) != 71 || dlk_dataset_resolve(ds.store, next, 0, id, &err)) {
			dlk_err_clear(&err);
			break; /* the input is not in this store */
		}
	}
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *out = cJSON_CreateObject();
		char *s;
		cJSON_AddStringToObject(out, "store", dlk_store_url(ds.store));
		cJSON_AddItemToObject(out, "datasets", chain);
		chain = NULL;
		s = dlk_doc_text(out, ctx->output == DLK_OUTPUT_JSON, &err);
		cJSON_Delete(out);
		if (!s)
			goto fail;
		fputs(s, stdout);
		free(s);
		goto out;
	}
	{
		const cJSON *step;
		int i = 0;
		cJSON_ArrayForEach(step, chain)
		{
			const cJSON *prov = cJSON_GetObjectItemCaseSensitive(step, "provenance");
			const cJSON *in = cJSON_GetObjectItemCaseSensitive(prov, "input");
			const cJSON *mo = cJSON_GetObjectItemCaseSensitive(prov, "model");
			const char *kind = jstr(prov, "kind");

			printf("%sdataset      %s%s\n", i++ ? "\n" : "", dlk_visible(jstr(step, "id")),
			       prov ? "" : " (pushed from files)");
			if (!prov)
				continue;
			if (kind && !strncmp(kind, "pipeline-", 9)) {
				/* a pipeline stage's output (lib/pipeline): which pipeline, stage, key and run */
				const cJSON *pl = cJSON_GetObjectItemCaseSensitive(prov, "pipeline");
				char buf[400];
				snprintf(buf, sizeof(buf), "dlk pipeline %s, stage %s", jstr(pl, "name") ? jstr(pl, "name") : "?",
				         jstr(pl, "stage") ? jstr(pl, "stage") : "?");
				line("made by", buf);
				line("key", jstr(pl, "key"));
				line("run", jstr(pl, "run_id"));
			} else {
				line("made by", kind && !strcmp(kind, "predictions") ? "dlk predict" : kind);
			}
			if (in) {
				const char *tag = jstr(in, "tag");
				char buf[400];
				snprintf(buf, sizeof(buf), "%s%s%s%s", jstr(in, "id") ? jstr(in, "id") : "?", tag ? " (" : "",
				         tag ? tag : "", tag ? ")" : "");
				line("input", buf);
			}
			if (mo) {
				const char *name = jstr(mo, "name"), *sha = jstr(mo, "bundle_sha256");
				char buf[400];
				snprintf(buf, sizeof(buf), "%s%s%s", name ? name : "", name ? " " : "", sha ? sha : "?");
				line("model", buf);
				line("weights", jstr(mo, "weights_sha256"));
				line("run", jstr(mo, "run_id"));
			}
			if (cJSON_GetObjectItemCaseSensitive(step, "model_dataset")) {
				const cJSON *md = cJSON_GetObjectItemCaseSensitive(step, "model_dataset");
				const cJSON *mp = cJSON_GetObjectItemCaseSensitive(md, "provenance");
				const cJSON *pl = cJSON_GetObjectItemCaseSensitive(mp, "pipeline");
				char made[400], buf[700];
				snprintf(buf, sizeof(buf), "%s, made by %s%s%s", jstr(md, "id") ? jstr(md, "id") : "?",
				         dlk_provenance_made_by(mp, made, sizeof(made)), jstr(pl, "run_id") ? ", run " : "",
				         jstr(pl, "run_id") ? jstr(pl, "run_id") : "");
				line("model data", buf);
			}
		}
	}
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	cJSON_Delete(chain);
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

static int run_lineage(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	const cJSON *prov, *ds, *data, *d, *parent;
	cJSON *out = NULL;
	int rc = 0;
	struct stat sb;

	if (stat(args->pos[0], &sb) && (lineage_from || !strncmp(args->pos[0], "sha256:", 7) || strchr(args->pos[0], '@')))
		return dataset_lineage(ctx, args->pos[0]);
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
		s = dlk_doc_text(out, ctx->output == DLK_OUTPUT_JSON, &err);
		if (!s) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		fputs(s, stdout);
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

static const struct dlk_option lineage_options[] = {
	OPT_STRING(0, "from", &lineage_from, "STORE", NULL, "the store of a DATASET",
	           .def_doc = "data.store of the project file", .complete = COMPLETE_DIR),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_lineage = {
	.usage = "BUNDLE | DATASET",
	.description = "Print what made the model in BUNDLE, from its provenance: the dataset (its id, the tag it\n"
	               "was resolved from and the store) and each data file's digest, the project file's digest,\n"
	               "the git commit (and whether the tree had changes), the image, dlk's version, the run, and\n"
	               "the bundle it was fine-tuned from, when there is one. The bundle is verified first.\n"
	               "For a DATASET (sha256:ID or NAME@TAG in the store) made by dlk (dlk predict, a pipeline's\n"
	               "stage), print what it was made from (the input dataset; the model, and the dataset of the\n"
	               "store holding it with the stage that trained it), then the same for that input, back to\n"
	               "the dataset pushed from files.",
	.options = lineage_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_lineage,
	.examples = "  $ dlk lineage fashion.dlk\n"
	            "  $ dlk lineage fashion.dlk -o json\n"
	            "  $ dlk lineage fashion-preds@v1 --from ./store\n",
};
