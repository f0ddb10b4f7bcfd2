#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/nn/gpu.h"
#include "lib/util/mem.h"

static void *try_open(const char *file, char *why, size_t len)
{
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, len, "%s", e ? e : "cannot load");
	}
	return h;
}

const struct dlk_backend *dlk_backend_cuda(const char *path, struct dlk_err *err)
{
	char why[512] = "", tried[PATH_MAX + 64] = "";
	void *h = NULL;
	const char *env = getenv("DLK_CUDA_LIB");

	if (path && *path) {
		snprintf(tried, sizeof(tried), "%s", path);
		h = try_open(path, why, sizeof(why));
	} else if (env && *env) {
		snprintf(tried, sizeof(tried), "%s", env);
		h = try_open(env, why, sizeof(why));
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = 0;
			char *dir = dirname(exe);
			const char *rel[] = { "../lib/dlk/" DLK_CUDA_LIB_NAME, "build/" DLK_CUDA_LIB_NAME, DLK_CUDA_LIB_NAME };
			for (size_t i = 0; !h && i < sizeof(rel) / sizeof(rel[0]); i++) {
				char *cand = xasprintf("%s/%s", dir, rel[i]);
				if (access(cand, F_OK) == 0) {
					snprintf(tried, sizeof(tried), "%s", cand);
					h = try_open(cand, why, sizeof(why));
				}
				free(cand);
			}
		}
		if (!h && !tried[0]) {
			snprintf(tried, sizeof(tried), "%s", DLK_CUDA_LIB_NAME);
			h = try_open(DLK_CUDA_LIB_NAME, why, sizeof(why));
		}
	}
	if (!h) {
		dlk_errf(err, DLK_EXIT_CONFIG, "cannot load the CUDA backend '%s': %s", tried, why);
		dlk_err_hint(err, "build it with 'make gpu' (needs nvcc), set DLK_CUDA_LIB, or train on the CPU");
		return NULL;
	}
	dlk_backend_entry_fn entry;
	*(void **)&entry = dlsym(h, DLK_BACKEND_ENTRY);
	if (!entry) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' has no symbol '%s': not a dlk CUDA backend", tried, DLK_BACKEND_ENTRY);
		dlclose(h);
		return NULL;
	}
	char msg[256] = "";
	const struct dlk_backend *be = entry(msg, sizeof(msg));
	if (!be) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the CUDA backend '%s' cannot start: %s", tried, msg[0] ? msg : "unknown error");
		return NULL; /* stays loaded: the CUDA runtime does not like being unloaded */
	}
	if (be->abi != DLK_BACKEND_ABI) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the CUDA backend '%s' was built for backend ABI %d, this dlk has %d", tried,
		         be->abi, DLK_BACKEND_ABI);
		dlk_err_hint(err, "rebuild it with 'make gpu' from the same sources as dlk");
		return NULL;
	}
	return be;
}
