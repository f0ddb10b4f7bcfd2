/* dlk export: a model bundle in another format (ONNX), for runtimes other than `dlk serve`:
 * ONNX Runtime, Triton's onnxruntime backend, a phone. The library (lib/export/onnx.c) builds
 * the model; this file completes the options, writes the file and says what it wrote. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/export/onnx.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/jsonprint.h"
#include "lib/util/utf8.h"

#include <stdio.h>
#include <stdlib.h>

static const char *onnx_path;
static int input_form;
/* indexed by enum dlk_input_form (lib/serve/tensor.h), whose names they are */
static const char *const input_forms[] = { "raw", "preprocessed", NULL };

static int run_export(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_buf out = DLK_BUF_INIT;
	int rc = 0;

	if (!onnx_path) {
		dlk_errf(&err, DLK_EXIT_USAGE, "export: say which format to write");
		dlk_err_hint(&err, "dlk export %s --onnx MODEL.onnx", dlk_visible(args->pos[0]));
		return dlk_report(ctx, &err);
	}
	if (dlk_bundle_read(args->pos[0], &b, &err) || dlk_onnx_export(&b, (enum dlk_input_form)input_form, &out, &err) ||
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
		cJSON_AddNumberToObject(o, "opset", DLK_ONNX_OPSET);
		cJSON_AddNumberToObject(o, "irVersion", DLK_ONNX_IR_VERSION);
		cJSON_AddStringToObject(o, "inputForm", dlk_input_form_name((enum dlk_input_form)input_form));
		cJSON_AddStringToObject(o, "weightsSha256", b.weights_sha256);
		s = dlk_json_print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
	} else {
		printf("wrote %s: ONNX opset %d, %zu bytes, input 'input' (%s", dlk_visible(onnx_path), DLK_ONNX_OPSET,
		       out.len, input_form == DLK_INPUT_RAW ? "raw values, scaled in the graph" : "preprocessed");
		if (input_form == DLK_INPUT_RAW || b.has_scaling)
			printf(": (v * %.9g - %.9g) / %.9g", (double)b.scale, (double)b.mean, (double)b.std);
		printf("), outputs 'probabilities' and 'logits'\n");
	}
out:
	dlk_buf_release(&out);
	dlk_bundle_release(&b);
	return rc;
}

static const struct dlk_option export_options[] = {
	OPT_STRING(0, "onnx", &onnx_path, "FILE", NULL, "write the model as ONNX (opset 13) to FILE",
	           .complete = COMPLETE_FILE),
	OPT_ENUM(0, "input-form", &input_form, "FORM", input_forms, DLK_INPUT_RAW,
	         "what the graph's input is: raw values as training read them (the graph scales them) or "
	         "preprocessed (already scaled)"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_export = {
	.usage = "BUNDLE --onnx FILE",
	.description = "Write the model of BUNDLE in a format other runtimes load. --onnx writes an ONNX model\n"
	               "(IR version 7, opset 13) with the input 'input' and the outputs 'probabilities' and\n"
	               "'logits' that `dlk serve` has; by default the graph takes the raw values training read\n"
	               "(pixels 0..255) and scales them as training did, so it answers what `dlk serve`\n"
	               "answers. The weights keep their PyTorch names; the model's metadata records dlk's\n"
	               "version, the bundle's weights digest, the input contract and the class names. The\n"
	               "bundle is verified first.",
	.options = export_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_export,
	.examples = "  $ dlk export fashion.dlk --onnx fashion.onnx\n"
	            "  $ dlk export fashion.dlk --onnx fashion-pre.onnx --input-form preprocessed\n",
};
