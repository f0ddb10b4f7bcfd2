/* A bundle's run document, for the training commands until it moves to lib/report (dlk report
 * finds its runs itself; a job's published run is lib/jobs/jobrun.h). */
#ifndef DLK_COMMANDS_REPORT_SOURCE_H
#define DLK_COMMANDS_REPORT_SOURCE_H

#include <cJSON.h>

#include "commands/ctx.h"

cJSON *dlk_report_from_bundle(const char *path, struct dlk_err *err);

#endif
