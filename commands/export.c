/* dlk export: a model bundle in another format (ONNX), for runtimes other than `dlk serve`:
 * ONNX Runtime, Triton's onnxruntime backend, a phone. The library (lib/export/onnx.c) builds
 * the model; this file completes the options, writes the file and says what it wrote. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/export/hf.h"
#include "lib/export/onnx.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *onnx_path;
static const char *hf_dir;
static int input_form;
static int external_data;
/* indexed by enum dlk_input_form (lib/serve/tensor.h), whose names they are */
static const char *const input_forms[] = { "raw", "preprocessed", NULL };

/* --hf DIR: the GPT-2 as a Hugging Face checkpoint; nothing is written when it is refused */
static int run_export_hf(struct dlk_ctx *ctx, const char *bundle)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_buf cfg = DLK_BUF_INIT, st = DLK_BUF_INIT;
	char *cfg_path = NULL, *st_path = NULL;
	int rc = 0, n_layer = 0;

	if (dlk_bundle_read(bundle, &b, &err) || dlk_hf_gpt2_export(&b, &cfg, &st, &n_layer, &err) ||
	    dlk_mkdir_p(hf_dir, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	cfg_path = xasprintf("%s/config.json", hf_dir);
	st_path = xasprintf("%s/model.safetensors", hf_dir);
	if (dlk_write_file_atomic(st_path, st.data, st.len, 0644, &err) ||
	    dlk_write_file_atomic(cfg_path, cfg.data, cfg.len, 0644, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (ctx->output == DLK_OUTPUT_JSON) {
		cJSON *o = cJSON_CreateObject();
		char *s;
		cJSON_AddStringToObject(o, "bundle", bundle);
		cJSON_AddStringToObject(o, "hf", hf_dir);
		cJSON_AddStringToObject(o, "architecture", "GPT2LMHeadModel");
		cJSON_AddNumberToObject(o, "layers", n_layer);
		cJSON_AddNumberToObject(o, "bytes", (double)st.len);
		cJSON_AddStringToObject(o, "weightsSha256", b.weights_sha256);
		s = dlk_json_print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
	} else {
		printf("wrote %s: GPT2LMHeadModel, %d layers (config.json, model.safetensors: %zu bytes)\n",
		       dlk_visible(hf_dir), n_layer, st.len);
	}
out:
	free(cfg_path);
	free(st_path);
	dlk_buf_release(&cfg);
	dlk_buf_release(&st);
	dlk_bundle_release(&b);
	return rc;
}

static int run_export(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_buf out = DLK_BUF_INIT, data = DLK_BUF_INIT;
	char *data_path = NULL;
	const char *slash;
	int rc = 0;

	if (!onnx_path == !hf_dir) {
		dlk_errf(&err, DLK_EXIT_USAGE, "export: say which one format to write: --onnx FILE or --hf DIR");
		dlk_err_hint(&err, "dlk export %s --onnx MODEL.onnx", dlk_visible(args->pos[0]));
		return dlk_report(ctx, &err);
	}
	if (hf_dir)
		return run_export_hf(ctx, args->pos[0]);
	if (external_data && !onnx_path) {
		dlk_errf(&err, DLK_EXIT_USAGE, "export: --external-data goes with --onnx");
		return dlk_report(ctx, &err);
	}
	/* ONNX's external data: FILE.data beside FILE, named in the model relative to its folder */
	data_path = xasprintf("%s.data", onnx_path);
	slash = strrchr(data_path, '/');
	struct dlk_onnx_external ext = { .location = slash ? slash + 1 : data_path, .data = &data, .always = external_data };
	/* the data first: a model never names a file that is not there */
	if (dlk_bundle_read(args->pos[0], &b, &err) ||
	    dlk_onnx_export(&b, (enum dlk_input_form)input_form, &ext, &out, &err) ||
	    (ext.used && dlk_write_file_atomic(data_path, data.data, data.len, 0644, &err)) ||
	    dlk_write_file_atomic(onnx_path, out.data, out.len, 0644, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (ctx->output == DLK_OUTPUT_JSON) {
		cJSON *o = cJSON_CreateObject();
		char *s;
		cJSON_AddStringToObject(o, "bundle", args->pos[0]);
		cJSON_AddStringToObject(o, "onnx", onnx_path);
		cJSON_AddNumberToObject(o, "bytes", (double)out.len);
		if (ext.used) {
			cJSON_AddStringToObject(o, "externalData", data_path);
			cJSON_AddNumberToObject(o, "externalDataBytes", (double)data.len);
		}
		cJSON_AddNumberToObject(o, "opset", DLK_ONNX_OPSET);
		cJSON_AddNumberToObject(o, "irVersion", DLK_ONNX_IR_VERSION);
		cJSON_AddStringToObject(o, "inputForm", dlk_input_form_name((enum dlk_input_form)input_form));
		{
			struct dlk_onnx_io io;
			cJSON *outs = cJSON_AddArrayToObject(o, "outputs");
			dlk_onnx_io_of(&b, &io);
			cJSON_AddStringToObject(o, "inputType", io.ids ? "int64" : "float");
			if (io.probabilities)
				cJSON_AddItemToArray(outs, cJSON_CreateString(io.probabilities));
			cJSON_AddItemToArray(outs, cJSON_CreateString(io.output));
		}
		cJSON_AddStringToObject(o, "weightsSha256", b.weights_sha256);
		s = dlk_json_print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
	} else {
		struct dlk_onnx_io io;
		dlk_onnx_io_of(&b, &io);
		printf("wrote %s: ONNX opset %d, %zu bytes", dlk_visible(onnx_path), DLK_ONNX_OPSET, out.len);
		if (ext.used)
			printf(" and its weights in %s (external data, %zu bytes)", dlk_visible(data_path), data.len);
		printf(", input 'input' (%s", io.ids ? "int64 token ids" : input_form == DLK_INPUT_RAW
		       ? "raw values, scaled in the graph" : "preprocessed");
		if (!io.ids && (input_form == DLK_INPUT_RAW || b.has_scaling))
			printf(": (v * %.9g - %.9g) / %.9g", (double)b.scale, (double)b.mean, (double)b.std);
		if (io.probabilities)
			printf("), outputs '%s' and '%s'\n", io.probabilities, io.output);
		else
			printf("), output '%s'\n", io.output);
	}
out:
	free(data_path);
	dlk_buf_release(&out);
	dlk_buf_release(&data);
	dlk_bundle_release(&b);
	return rc;
}

static const struct dlk_option export_options[] = {
	OPT_STRING(0, "onnx", &onnx_path, "FILE", NULL, "write the model as ONNX (opset 17) to FILE",
	           .complete = COMPLETE_FILE),
	OPT_STRING(0, "hf", &hf_dir, "DIR", NULL, "write a GPT-2 as a Hugging Face checkpoint (config.json, "
	           "model.safetensors) into DIR", .complete = COMPLETE_DIR),
	OPT_BOOL(0, "external-data", &external_data, "with --onnx: the weights in FILE.data beside FILE (ONNX's "
	         "external data), as a model past protobuf's 2 GiB always has them"),
	OPT_ENUM(0, "input-form", &input_form, "FORM", input_forms, DLK_INPUT_RAW,
	         "what the graph's input is: raw values as training read them (the graph scales them) or "
	         "preprocessed (already scaled)"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_export = {
	.usage = "BUNDLE --onnx FILE | --hf DIR",
	.description = "Write the model of BUNDLE in a format other runtimes load. --onnx writes an ONNX model\n"
	               "(IR version 8, opset 17) of every layer kind and of graph models, with the input 'input'\n"
	               "and the outputs 'probabilities' and 'logits' that `dlk serve` has (a regression or\n"
	               "image model: 'output'; a text model takes int64 token ids); by default the graph takes\n"
	               "the raw values training read (pixels 0..255) and scales them as training did, so it\n"
	               "answers what `dlk serve` answers. The weights keep their PyTorch names; the model's metadata records dlk's\n"
	               "version, the bundle's weights digest, the input contract and the class names. The\n"
	               "bundle is verified first. A model whose weights pass protobuf's 2 GiB keeps them in\n"
	               "FILE.data beside FILE (ONNX's external data; --external-data asks for it at any size).\n"
	               "--hf writes a GPT-2 (docs/gpt.md) as a Hugging Face checkpoint\n"
	               "that transformers' GPT2LMHeadModel.from_pretrained(DIR) loads; other models are refused.",
	.options = export_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_export,
	.examples = "  $ dlk export fashion.dlk --onnx fashion.onnx\n"
	            "  $ dlk export fashion.dlk --onnx fashion-pre.onnx --input-form preprocessed\n"
	            "  $ dlk export gpt.dlk --onnx gpt.onnx --external-data\n"
	            "  $ dlk export gpt.dlk --hf gpt-hf\n",
};
