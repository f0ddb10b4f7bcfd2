/* Finding the run a report is about: a bundle, a JSON file holding a run document, or a job in
 * the cluster (its dlk.dev/metrics annotation: lib/jobs/jobrun.h). */
#ifndef DLK_COMMANDS_REPORT_SOURCE_H
#define DLK_COMMANDS_REPORT_SOURCE_H

#include <cJSON.h>

#include "commands/ctx.h"

/* The run document of arg: the file of that name when one exists (a bundle, or JSON: a run
 * document, a report document, a model.json), else the job of that name in the namespace. A
 * new tree the caller owns, or NULL with err. */
cJSON *dlk_report_source(const struct dlk_ctx *ctx, const char *arg, struct dlk_err *err);
cJSON *dlk_report_from_bundle(const char *path, struct dlk_err *err);

#endif
