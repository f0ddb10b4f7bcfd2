/* The self-contained supervisor (lib/program/place.h). */
#include "lib/program/place.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* copies src to dst (made anew, mode) */
static int copy_file(const char *src, const char *dst, mode_t mode, struct dlk_err *err)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	char buf[1 << 16];
	ssize_t k;

	if (in < 0)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", dlk_visible(src), strerror(errno));
	unlink(dst);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0) {
		close(in);
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", dlk_visible(dst), strerror(errno));
	}
	while ((k = read(in, buf, sizeof(buf))) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 || write(out, buf, (size_t)k) != k) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot copy '%s' to '%s': %s", dlk_visible(src), dlk_visible(dst),
			         strerror(errno));
			close(in);
			close(out);
			return -1;
		}
	}
	close(in);
	if (fchmod(out, mode) || close(out))
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", dlk_visible(dst), strerror(errno));
	return 0;
}

struct walk {
	const char *libdir;
	char interp[4096];
	int n;
	struct dlk_err *err;
};

static int on_object(struct dl_phdr_info *info, size_t size, void *ud)
{
	struct walk *w = ud;
	const char *name = info->dlpi_name, *base;
	char *dst;
	int rc;

	(void)size;
	if (!name || !name[0]) {
		/* the program itself: its interpreter (the dynamic loader) is named in PT_INTERP */
		for (int i = 0; i < info->dlpi_phnum; i++)
			if (info->dlpi_phdr[i].p_type == PT_INTERP)
				snprintf(w->interp, sizeof(w->interp), "%s",
				         (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
		return 0;
	}
	if (name[0] != '/')
		return 0; /* the vDSO: the kernel's, in every process */
	base = strrchr(name, '/') + 1;
	dst = xasprintf("%s/%s", w->libdir, base);
	rc = copy_file(name, dst, 0755, w->err);
	free(dst);
	if (rc)
		return 1;
	w->n++;
	return 0;
}

int dlk_program_place(const char *dir, int *n_libs, struct dlk_err *err)
{
	struct walk w = { 0 };
	char *bin = xasprintf("%s/bin", dir), *lib = xasprintf("%s/lib", dir), *p = NULL, *script = NULL;
	const char *loader;
	int rc = -1;

	w.libdir = lib;
	w.err = err;
	{
		/* dlk started through a loader (a placed one, the GPU kit's): /proc/self/exe is the loader */
		char exe[4096];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		const char *base;
		exe[n > 0 ? n : 0] = '\0';
		base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
		if (!strncmp(base, "ld-linux", 8) || !strncmp(base, "ld.so", 5)) {
			dlk_errf(err, DLK_EXIT_USAGE, "this dlk was started through its loader '%s': run the dlk program itself",
			         dlk_visible(exe));
			goto out;
		}
	}
	if (dlk_mkdir_p(bin, err) || dlk_mkdir_p(lib, err))
		goto out;
	p = xasprintf("%s/dlk", bin);
	if (copy_file("/proc/self/exe", p, 0755, err))
		goto out;
	if (dl_iterate_phdr(on_object, &w))
		goto out;
	if (!w.interp[0]) {
		dlk_errf(err, DLK_EXIT_FAIL, "this dlk names no dynamic loader (a static build needs none: run DIR/bin/dlk)");
		goto out;
	}
	loader = strrchr(w.interp, '/') ? strrchr(w.interp, '/') + 1 : w.interp;
	free(p);
	p = xasprintf("%s/%s", lib, loader);
	/* the loader is among the loaded objects under its own name; copied again in case not */
	if (access(p, X_OK) && copy_file(w.interp, p, 0755, err))
		goto out;
	/* the starter: ${0%/...} is its directory, in any POSIX sh, without dirname */
	script = xasprintf("#!/bin/sh\n"
	                   "# dlk with its own libraries and loader (placed by 'dlk train --worker --place-supervisor')\n"
	                   "d=${0%%/*}\n"
	                   "exec \"$d/lib/%s\" --library-path \"$d/lib\" \"$d/bin/dlk\" \"$@\"\n",
	                   loader);
	free(p);
	p = xasprintf("%s/dlk", dir);
	if (dlk_write_file_atomic(p, script, strlen(script), 0755, err))
		goto out;
	if (n_libs)
		*n_libs = w.n;
	rc = 0;
out:
	free(script);
	free(p);
	free(bin);
	free(lib);
	return rc;
}
