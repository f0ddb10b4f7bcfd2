/* The cluster as the commands reach it: clients made from the global options (--kubeconfig,
 * --context, -n; -vv logs each request on stderr; Ctrl-C stops requests once
 * dlk_interrupt_catch() ran), the API server's warnings said on stderr, and the -n a hint must
 * name. The work itself is the library's: lib/kube (the API), lib/jobs (dlk's jobs on it). */
#ifndef DLK_COMMANDS_CLUSTER_H
#define DLK_COMMANDS_CLUSTER_H

#include <cJSON.h>

#include "commands/ctx.h"
#include "lib/jobs/jobwatch.h"
#include "lib/kube/client.h"

/* What every client of this command is made from: the global options' kubeconfig, context and
 * namespace, -vv request lines on stderr, Ctrl-C as the cancel hook. For lib/jobs, whose threads
 * make clients of their own. */
void dlk_kube_open_opts(const struct dlk_ctx *ctx, struct kube_open_opts *o);
/* The one client setup of a command that needs a cluster: a client made from dlk_kube_open_opts.
 * Says the kubeconfig's own warning once. The caller frees it with kube_client_free; NULL with
 * err (DLK_EXIT_CONFIG, DLK_EXIT_AUTH...) on failure. */
struct kube_client *dlk_kube_client(const struct dlk_ctx *ctx, struct dlk_err *err);
/* Prints the API server's Warning headers collected so far as "warning: ..." lines. */
void dlk_kube_warnings(const struct dlk_ctx *ctx, struct kube_client *c);
/* The end of a client from dlk_kube_client: its last warnings, then kube_client_free (NULL is fine). */
void dlk_kube_close(const struct dlk_ctx *ctx, struct kube_client *c);
/* Installs a SIGINT handler that only sets a flag (the first Ctrl-C stops waiting; a second
 * one kills the process the default way). */
void dlk_interrupt_catch(void);
int dlk_interrupted(void);

/* Starts watching the jobs of ns (every dlk job, or the one named) with this command's clients,
 * Ctrl-C caught: the first one ends the waits. -1 with err when the watch cannot start. */
int dlk_watch_jobs(const struct dlk_ctx *ctx, struct dlk_jobwatch *w, const char *ns, const char *name,
                   struct dlk_err *err);
/* Reads the Job name of ns (a new object in *job, the caller's). A missing Job is "job 'NAME'
 * not found in namespace 'NS'" with a hint to list the jobs. */
int dlk_read_job(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, cJSON **job,
                 struct dlk_err *err);
/* Reads the CronJob name of ns (a scheduled training) into *cronjob, the dlk Jobs labelled as
 * its into *jobs (a JobList) and its runs among them into *runs (newest first, borrowed from
 * *jobs; lib/jobs/cronjob.h); all the caller's. -1 with err (DLK_EXIT_NOTFOUND: no such CronJob). */
int dlk_read_cronjob(struct kube_client *c, const char *ns, const char *name, cJSON **cronjob, cJSON **jobs,
                     cJSON **runs, struct dlk_err *err);
/* Starts watching run, a Job that CronJob project started (dlk_jobwatch_start_run), as
 * dlk_watch_jobs does a Job. */
int dlk_watch_run(const struct dlk_ctx *ctx, struct dlk_jobwatch *w, const char *ns, const char *run,
                  const char *project, struct dlk_err *err);
/* err says: job 'NAME' is not in namespace ns, and how to list the jobs; returns -1. */
int dlk_job_not_found(const struct dlk_ctx *ctx, const struct kube_client *c, const char *ns, const char *name,
                      struct dlk_err *err);

/* Shell completion of job names: prints the names of the dlk Jobs (and CronJobs) that start with cur, one a
 * line, from the cluster that --kubeconfig/--context/-n on the completion line (argv) name.
 * Quick (1 s to connect, 2 s in all, no retries) and silent: nothing at all on any failure. */
void dlk_complete_job_names(int argc, char **argv, const char *cur);
/* Shell completion of run ids: prints the ids of the runs recorded here (the local run history
 * of the project file that -f on the completion line names, else dlk.yaml) that start with cur,
 * newest first. Silent: nothing at all when there is no project or no history. */
void dlk_complete_run_ids(int argc, char **argv, const char *cur);

/* " -n NS" for the commands a hint suggests, when the namespace had to be named (-n was given,
 * or ns is not the client's default namespace), else "". Thread-local storage. */
const char *dlk_ns_flag(const struct dlk_ctx *ctx, const struct kube_client *c, const char *ns);

/* The lib/jobs callbacks that print: a log line tagged "[rank N] " on stdout (coloured when
 * ctx->color_out; ud is the ctx), and a note as a warning on stderr. */
void dlk_print_log_line(void *ctx, int rank, const char *line, size_t len);
void dlk_print_note(void *ctx, const char *msg);
/* A deleted object, said at -v (ud is the ctx). */
void dlk_print_deleted(void *ctx, const char *kind, const char *name);

/* The stores as the commands reach them: through the project file or --to/--from, a pvc:// one
 * with a client made from the global options. */
struct dlk_project;
struct dlk_store;
struct kube_client;

struct dlk_data_store {
	struct dlk_store *store;
	struct kube_client *kube;      /* for pvc://; NULL otherwise */
	char *base_dir;
};

/* Opens url, or the project's data.store when url is NULL (spec may be NULL: then url must be
 * given). pvc:// gets a client from the global options. -vv logs each store request. */
int dlk_data_store_open(const struct dlk_ctx *ctx, const char *url, const struct dlk_project *spec,
                        struct dlk_data_store *ds, struct dlk_err *err);
void dlk_data_store_release(struct dlk_data_store *ds);
/* The project file when there is one (*spec, NULL when -f names no file, or when url is given
 * and is not pvc://): its data.store is the default store. A missing file is no error (the store
 * may be given); a broken one is, since its store would be a guess. */
int dlk_data_maybe_project(const struct dlk_ctx *ctx, const char *url, struct dlk_project **spec,
                           struct dlk_err *err);

#endif
