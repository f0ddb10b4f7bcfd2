#include "commands/commands.h"
#include "commands/ctx.h"
#include "lib/nn/gpu.h"

#include <archive.h>
#include <cJSON.h>
#include <cblas.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <string.h>
#include <yaml.h>

static int run_version(struct dlk_ctx *ctx, struct dlk_args *args)
{
	char blas[256];
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);

	struct dlk_err cerr = DLK_ERR_INIT;
	const struct dlk_backend *cuda = dlk_backend_cuda(NULL, &cerr);

	(void)args;
	snprintf(blas, sizeof(blas), "%s (%s)", openblas_get_config(), openblas_get_corename());

	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *o = cJSON_CreateObject(), *libs = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "version", DLK_VERSION);
		cJSON_AddStringToObject(o, "cpuBackend", blas);
		cJSON_AddBoolToObject(o, "cudaAvailable", cuda != NULL);
		cJSON_AddStringToObject(o, "cuda", cuda ? cuda->name : cerr.msg);
		cJSON_AddStringToObject(libs, "libyaml", yaml_get_version_string());
		cJSON_AddStringToObject(libs, "libcurl", cv->version);
		cJSON_AddStringToObject(libs, "cjson", cJSON_Version());
		cJSON_AddStringToObject(libs, "libarchive", archive_version_string());
		cJSON_AddStringToObject(libs, "libmicrohttpd", MHD_get_version());
		cJSON_AddStringToObject(libs, "openssl", OpenSSL_version(OPENSSL_VERSION));
		cJSON_AddItemToObject(o, "libraries", libs);
		char *s = cJSON_Print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
		return 0;
	}
	printf("dlk %s\n", DLK_VERSION);
	printf("cpu:       %s\n", blas);
	printf("cuda:      %s\n", cuda ? "available" : cerr.msg);
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
	.description = "Print dlk's version, which compute backends it can use on this machine (the\n"
	               "CUDA backend is loaded only where a GPU and its libraries are present) and the\n"
	               "versions of the libraries it runs on. With -o json, the same as an object.",
	.min_pos = 0,
	.max_pos = 0,
	.run = run_version,
	.examples = "  $ dlk version -o json\n",
};
