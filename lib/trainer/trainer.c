/* The trainer's notes and the places its outputs go. */
#include "lib/trainer/trainer.h"
#include "lib/runs/runs.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void vnote(const struct dlk_trainer_sink *sink, enum dlk_trainer_level level, const char *fmt, va_list ap)
{
	char msg[2048];

	if (!sink || !sink->note)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	sink->note(sink->ud, level, msg);
}

void dlk_trainer_note(const struct dlk_trainer_sink *sink, enum dlk_trainer_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(sink, level, fmt, ap);
	va_end(ap);
}

void dlk_trainer_info(const struct dlk_trainer_sink *sink, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(sink, DLK_TRAINER_INFO, fmt, ap);
	va_end(ap);
}

void dlk_trainer_warn(const struct dlk_trainer_sink *sink, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(sink, DLK_TRAINER_WARN, fmt, ap);
	va_end(ap);
}

const char *dlk_trainer_resume_hint(const struct dlk_trainer_opts *o)
{
	if (o->in_pod)
		return NULL;
	/* --fresh given again would abandon the checkpoint it promises to resume from */
	if (o->fresh)
		return "run the same command without --fresh to resume from it";
	return "run the same command again to resume from it";
}

char *dlk_trainer_bundle_path(const char *bundle, const struct dlk_project *spec, const char *spec_file, int in_pod)
{
	char *dir, *path;

	if (bundle)
		return xstrdup(bundle);
	dir = dlk_trainer_output_dir(spec, spec_file, in_pod);
	/* a bare NAME.dlk when the folder is this one: the name the user gave, as given */
	path = !strcmp(dir, ".") ? xasprintf("%s.dlk", spec->name) : xasprintf("%s/%s.dlk", dir, spec->name);
	free(dir);
	return path;
}

char *dlk_trainer_run_bundle_path(const struct dlk_project *spec, const char *spec_file, int in_pod, const char *run_id)
{
	char *dir, *path;

	if (in_pod || !run_id || !*run_id)
		return NULL;
	dir = dlk_runs_local_dir(spec_file, spec->name);
	path = xasprintf("%s/%s.dlk", dir, run_id);
	free(dir);
	return path;
}

/* A copy where no hard link can be made (another file system): to tmp, synced. */
static int copy_file(const char *from, const char *tmp, struct dlk_err *err)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
	ssize_t n;

	if (in < 0)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", from, strerror(errno));
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(out, buf, (size_t)n) != n) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot copy '%s' to '%s': %s", from, tmp, strerror(errno));
			goto out;
		}
	}
	if (fsync(out)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (out >= 0)
		close(out);
	close(in);
	if (rc)
		unlink(tmp);
	return rc;
}

int dlk_trainer_publish_bundle(const char *run_bundle, const char *path, struct dlk_err *err)
{
	char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	int rc = -1;

	unlink(tmp);
	/* a link costs nothing and is the same bytes; the rename replaces NAME.dlk in one step, so a
	 * server reading it sees the old bundle or the new one, never a half */
	if (link(run_bundle, tmp) && copy_file(run_bundle, tmp, err))
		goto out;
	if (rename(tmp, path)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot replace '%s': %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	return rc;
}

/* In a pod the project file is a read-only ConfigMap volume: what is written on the checkpoint
 * volume outlives the pod, so a restarted worker resumes from it. */
char *dlk_trainer_output_dir(const struct dlk_project *spec, const char *spec_file, int in_pod)
{
	if (!in_pod)
		return dlk_dir_of(spec_file);
	if ((spec->storage.claim || spec->storage.size) && spec->storage.mount)
		return xstrdup(spec->storage.mount);
	/* program.code is mounted read-only at the working directory: the pod's own /tmp then
	   (lost with the pod, as storage: none is anyway) */
	if (spec->program.present && spec->program.code && !spec->program.workdir)
		return xstrdup("/tmp");
	return xstrdup(".");
}

char *dlk_trainer_ckpt_base(const struct dlk_project *spec, const char *spec_file, int in_pod)
{
	const char *d = spec->training.checkpoint_dir;
	char *out_dir, *base;

	if (!d)
		return NULL;
	out_dir = dlk_trainer_output_dir(spec, spec_file, in_pod);
	base = d[0] == '/' || !strcmp(out_dir, ".") ? xstrdup(d) : xasprintf("%s/%s", out_dir, d);
	free(out_dir);
	return base;
}
