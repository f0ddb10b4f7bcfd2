#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/util/jsonprint.h"
#include "lib/nn/device.h"
#include "lib/nn/gpu.h"

#include <archive.h>
#include <cJSON.h>
#include <cblas.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <string.h>
#include <yaml.h>

/* The CUDA backend as this machine sees it: whether it can be used and, when not, why (the
 * backend library missing or unloadable, no driver, an old driver, no device, an old GPU). */
struct cuda_view {
	int loaded;                  /* libdlk-cuda.so loaded: probe is filled */
	struct dlk_device_probe p;
	struct dlk_err err;          /* !loaded: why */
	char line[DLK_ERR_MSG_MAX + 64]; /* the one-line verdict */
};

static void cuda_view(struct cuda_view *v)
{
	memset(v, 0, sizeof(*v));
	v->loaded = dlk_backend_cuda_probe(NULL, &v->p, &v->err) == 0;
	if (!v->loaded)
		snprintf(v->line, sizeof(v->line), "not usable: %s", v->err.msg);
	else if (!v->p.usable)
		snprintf(v->line, sizeof(v->line), "not usable: %s", v->p.why);
	else
		snprintf(v->line, sizeof(v->line), "usable: %d device%s, %s", v->p.devices, v->p.devices == 1 ? "" : "s",
		         v->p.device0);
}

static void version_of(char *out, size_t len, int v)
{
	if (v > 0)
		snprintf(out, len, "%d.%d", v / 1000, v % 1000 / 10);
	else
		snprintf(out, len, "none");
}

static int run_version(struct dlk_ctx *ctx, struct dlk_args *args)
{
	char blas[256], drv[16], rt[16];
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	struct cuda_view cu;
	enum dlk_device_kind want;
	struct dlk_err derr = DLK_ERR_INIT;

	(void)args;
	snprintf(blas, sizeof(blas), "%s (%s)", openblas_get_config(), openblas_get_corename());
	cuda_view(&cu);
	version_of(drv, sizeof(drv), cu.p.driver);
	version_of(rt, sizeof(rt), cu.p.runtime);
	if (dlk_device_wanted(DLK_DEVICE_AUTO, &want, &derr))
		dlk_warn(ctx, "%s", derr.msg);

	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *o = cJSON_CreateObject(), *libs = cJSON_CreateObject(), *c = cJSON_CreateObject();
		int usable = cu.loaded && cu.p.usable;
		cJSON_AddStringToObject(o, "version", DLK_VERSION);
		cJSON_AddStringToObject(o, "cpuBackend", blas);
		cJSON_AddBoolToObject(o, "cudaAvailable", usable);
		cJSON_AddStringToObject(o, "cuda", cu.line);
		cJSON_AddBoolToObject(c, "usable", usable);
		if (!usable)
			cJSON_AddStringToObject(c, "why", cu.loaded ? cu.p.why : cu.err.msg);
		cJSON_AddBoolToObject(c, "backendLoaded", cu.loaded);
		if (cu.loaded) {
			cJSON_AddStringToObject(c, "library", cu.p.path);
			cJSON_AddNumberToObject(c, "devices", cu.p.devices);
			if (cu.p.device0[0])
				cJSON_AddStringToObject(c, "device0", cu.p.device0);
			cJSON_AddStringToObject(c, "driverCuda", drv);
			cJSON_AddStringToObject(c, "builtWithCuda", rt);
			cJSON_AddStringToObject(c, "architectures", cu.p.archs);
			cJSON_AddStringToObject(c, "cublas", cu.p.blas);
			cJSON_AddStringToObject(c, "nccl", cu.p.comm);
		}
		cJSON_AddItemToObject(o, "cudaBackend", c);
		cJSON_AddStringToObject(libs, "libyaml", yaml_get_version_string());
		cJSON_AddStringToObject(libs, "libcurl", cv->version);
		cJSON_AddStringToObject(libs, "cjson", cJSON_Version());
		cJSON_AddStringToObject(libs, "libarchive", archive_version_string());
		cJSON_AddStringToObject(libs, "libmicrohttpd", MHD_get_version());
		cJSON_AddStringToObject(libs, "openssl", OpenSSL_version(OPENSSL_VERSION));
		cJSON_AddItemToObject(o, "libraries", libs);
		char *s = dlk_json_print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
		return 0;
	}
	printf("dlk %s\n", DLK_VERSION);
	printf("cpu:       usable: %s\n", blas);
	printf("cuda:      %s\n", cu.line);
	if (cu.loaded) {
		printf("           %s: CUDA %s for %s, %s; %s%s\n", cu.p.path, rt, cu.p.archs, cu.p.blas,
		       cu.p.driver ? "the driver supports CUDA " : "no NVIDIA driver", cu.p.driver ? drv : "");
		printf("nccl:      %s\n", cu.p.comm);
	}
	printf("libyaml:   %s\n", yaml_get_version_string());
	printf("libcurl:   %s (%s)\n", cv->version, cv->ssl_version ? cv->ssl_version : "no TLS");
	printf("cjson:     %s\n", cJSON_Version());
	printf("archive:   %s\n", archive_version_string());
	printf("httpd:     libmicrohttpd %s\n", MHD_get_version());
	printf("crypto:    %s\n", OpenSSL_version(OPENSSL_VERSION));
	return 0;
}

const struct dlk_command_def dlk_cmd_version = {
	.usage = "",
	.description = "Print dlk's version, which compute backends it can use on this machine and the\n"
	               "versions of the libraries it runs on. The CUDA backend (libdlk-cuda.so, loaded\n"
	               "only where a GPU and its libraries are present) is either usable, with its\n"
	               "devices, or not, with exactly why: not built, a CUDA library missing, no NVIDIA\n"
	               "driver, a driver too old for it, no device visible, or a GPU older than its\n"
	               "code. NCCL's line says whether multi-GPU training can use it. With -o json, the\n"
	               "same as an object.",
	.min_pos = 0,
	.max_pos = 0,
	.run = run_version,
	.examples = "  $ dlk version -o json\n",
};
