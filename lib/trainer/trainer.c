/* The trainer's notes and the places its outputs go. */
#include "lib/trainer/trainer.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* In a pod the project file is a read-only ConfigMap volume: what is written on the checkpoint
 * volume outlives the pod, so a restarted worker resumes from it. */
char *dlk_trainer_output_dir(const struct dlk_project *spec, const char *spec_file, int in_pod)
{
	if (!in_pod)
		return dlk_dir_of(spec_file);
	if ((spec->storage.claim || spec->storage.size) && spec->storage.mount)
		return xstrdup(spec->storage.mount);
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
