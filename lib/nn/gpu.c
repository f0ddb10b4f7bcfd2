#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/nn/gpu.h"
#include "lib/util/mem.h"

/* The library's DLK_BACKEND_ABI, checked before anything else of it is called: 0 when it
 * matches, else -1 with err. */
/* A symbol every CUDA backend of this dlk has; NULL with err when the library lacks it. */
static void *backend_sym(void *h, const char *name, const char *tried, struct dlk_err *err)
{
	void *sym = dlsym(h, name);

	if (!sym) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' has no symbol '%s': not a CUDA backend of this dlk", tried, name);
		dlk_err_hint(err, "rebuild it with 'make' from the same sources as dlk");
	}
	return sym;
}

static int check_abi(void *h, const char *tried, struct dlk_err *err)
{
	const int *abi = dlsym(h, DLK_BACKEND_ABI_SYM);
	if (!abi) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' has no symbol '%s': not a CUDA backend of this dlk", tried,
		         DLK_BACKEND_ABI_SYM);
		return dlk_err_hint(err, "rebuild it with 'make' from the same sources as dlk");
	}
	if (*abi != DLK_BACKEND_ABI) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the CUDA backend '%s' was built for backend ABI %d, this dlk has %d", tried,
		         *abi, DLK_BACKEND_ABI);
		return dlk_err_hint(err, "rebuild it with 'make' from the same sources as dlk");
	}
	return 0;
}

/* Opens the backend library where dlk_backend_cuda() promises to look; on failure fills err
 * (the file tried and the dynamic linker's reason). *tried receives the file (caller frees). */
static void *open_lib(const char *path, char **tried, struct dlk_err *err)
{
	const char *env = getenv("DLK_CUDA_LIB");
	void *h = NULL;
	char *cand = NULL;

	if (path && *path) {
		cand = xstrdup(path);
	} else if (env && *env) {
		cand = xstrdup(env);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = 0;
			const char *dir = dirname(exe);
			const char *rel[] = { "../lib/dlk/" DLK_CUDA_LIB_NAME, "build/" DLK_CUDA_LIB_NAME, DLK_CUDA_LIB_NAME };
			for (size_t i = 0; !cand && i < sizeof(rel) / sizeof(rel[0]); i++) {
				char *c = xasprintf("%s/%s", dir, rel[i]), real[PATH_MAX];
				if (access(c, F_OK) == 0)
					cand = xstrdup(realpath(c, real) ? real : c);
				free(c);
			}
		}
		if (!cand)
			cand = xstrdup(DLK_CUDA_LIB_NAME); /* the dynamic linker's search path */
	}
	h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		size_t cl = strlen(cand);
		/* a path that is not there, or a bare name the linker found nowhere (its message starts
		 * with the name; a missing dependency's names the dependency) */
		int missing = strchr(cand, '/') ? access(cand, F_OK) != 0 : e && !strncmp(e, cand, cl) && e[cl] == ':';
		if (missing) {
			if (strchr(cand, '/'))
				dlk_errf(err, DLK_EXIT_CONFIG, "no CUDA backend: '%s' does not exist", cand);
			else
				dlk_errf(err, DLK_EXIT_CONFIG, "no CUDA backend: '%s' is neither beside dlk nor on the library path",
				         cand);
			dlk_err_hint(err, "build it with 'make' where the CUDA toolchain is ('.ci/deps build' installs it), "
			                  "or set DLK_CUDA_LIB to its path");
		} else {
			dlk_errf(err, DLK_EXIT_CONFIG, "cannot load the CUDA backend '%s': %s", cand, e ? e : "unknown error");
			if (e && strstr(e, "libcublas"))
				dlk_err_hint(err, "it needs cuBLAS from CUDA 13 (libcublas.so.13, libcublasLt.so.13) beside it "
				                  "or on the library path");
			else
				dlk_err_hint(err, "rebuild it with 'make', or set DLK_CUDA_LIB to a working one");
		}
		free(cand);
		return NULL;
	}
	*tried = cand;
	return h;
}

int dlk_backend_cuda_probe(const char *path, struct dlk_device_probe *p, struct dlk_err *err)
{
	char *tried = NULL;
	void *h = open_lib(path, &tried, err);
	dlk_backend_probe_fn probe;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (!h)
		return -1;
	if (check_abi(h, tried, err))
		goto out;
	*(void **)&probe = backend_sym(h, DLK_BACKEND_PROBE, tried, err);
	if (!probe)
		goto out;
	probe(p);
	snprintf(p->path, sizeof(p->path), "%s", tried);
	rc = 0;
out:
	free(tried); /* the library stays loaded: the CUDA runtime does not like being unloaded */
	return rc;
}

const struct dlk_backend *dlk_backend_cuda(const char *path, int device, struct dlk_err *err)
{
	char *tried = NULL;
	void *h = open_lib(path, &tried, err);
	dlk_backend_entry_fn entry;
	const struct dlk_backend *be = NULL;
	char msg[512] = "";

	if (!h)
		return NULL;
	if (check_abi(h, tried, err))
		goto out;
	*(void **)&entry = backend_sym(h, DLK_BACKEND_ENTRY, tried, err);
	if (!entry)
		goto out;
	be = entry(device, msg, sizeof(msg));
	if (!be)
		dlk_errf(err, DLK_EXIT_CONFIG, "the CUDA backend cannot run here: %s", msg[0] ? msg : "unknown error");
out:
	free(tried);
	return be;
}
