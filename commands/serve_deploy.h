/* dlk serve NAME: deploy a trained model to the cluster, behind its promotion gate; a canary
 * beside the served model, promoted or rolled back; waiting for the rollout. */
#ifndef DLK_COMMANDS_SERVE_DEPLOY_H
#define DLK_COMMANDS_SERVE_DEPLOY_H

#include "commands/ctx.h"

enum serve_mode { SERVE_DEPLOY, SERVE_DRY_RUN, SERVE_PROMOTE, SERVE_ROLLBACK, SERVE_LOCAL, SERVE_WORKER };

struct dlk_serve_cli {
	int mode;                /* an enum serve_mode */
	/* --local, --worker */
	const char *host;
	int port;                /* -1: serving.port */
	const char *access_log;
	const char *sha256;      /* the pin of a model given as a URL (--model, or NAME=URL) */
	/* the stream; NULL, -1 or 0: what serving.stream says */
	const char *stream, *to, *dead_letter, *group, *instance;
	int at_least_once;
	int format, datatype;    /* indexes in serve.c's format_names, datatype_names; -1: not given */
	int max_records, commit_ms;
	struct dlk_strlist kafka_set;
	int log_format;          /* --log-format: an enum dlk_log_format, -1: not given */
	const char *chat_template; /* --chat-template FILE: for language models without one */
	/* deploying */
	const char *model;       /* an http(s) URL of a bundle, instead of the training job's */
	const char *min_accuracy;/* overrides serving.min_accuracy; a number in [0, 1] */
	int force;               /* deploy what the gate refuses */
	int canary;              /* percent of the traffic for the new model, 0: none */
	int wait;
	double timeout_s;
	const char *templates;
	const char *report;      /* the gate's decision drawn on the model's report page, here */
};

int dlk_serve_deploy(struct dlk_ctx *ctx, const struct dlk_serve_cli *cli, struct dlk_args *args);

#endif
