/* Rendering a project into Kubernetes objects.
 *
 * The templates (the .yaml files of templates/ in the source tree, embedded into the binary as
 * dlk_builtin_templates) are the only place where an object's shape is written. A project may
 * override any of them file by file with a directory of the same names (`./templates/`, or
 * `--templates DIR`; `dlk init --templates` writes the built-ins out as a starting point).
 * Templates whose name starts with '_' are partials, used by others with {{> _name.yaml}}.
 *
 * render_train() renders, parses (lib/util/yamljson) and returns the objects a training run
 * sends, in dependency order: ConfigMap (and, with program.code, the code's ConfigMap),
 * ServiceAccount, Role, RoleBinding, PersistentVolumeClaim (when the spec asks dlk to create
 * one), Service, then Job, or CronJob
 * when the spec has a schedule. The same cJSON objects are printed by --dry-run and submitted. */
#ifndef DLK_RENDER_RENDER_H
#define DLK_RENDER_RENDER_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/project/project.h"
#include "lib/util/err.h"

#define RENDER_MAX_OUTPUT (4u << 20)     /* bytes one template may render to */
#define RENDER_MAX_SPEC_YAML (512u << 10) /* the spec text must fit a ConfigMap (1 MiB) easily */
#define RENDER_TERMINATION_GRACE_S 60    /* time a worker gets after SIGTERM for a last checkpoint */
#define RENDER_DATA_CACHE_MOUNT "/var/cache/dlk" /* where a worker's node cache is mounted */
/* program.code ships as one immutable ConfigMap: the API server takes at most 1 MiB for the
 * whole object, so the files (binary ones base64-encoded) may take this much of it */
#define RENDER_MAX_CODE_BYTES (768u << 10)
#define RENDER_CODE_MOUNT "/workspace" /* program.code without program.workdir: mounted (and run) here */

struct render_opts {
	const char *namespace_;     /* NULL: spec->namespace_, then "default" */
	const char *templates_dir;  /* override directory; NULL: the built-ins only */
	int templates_dir_optional; /* 1: a templates_dir that does not exist is not an error */
	const char *git_commit;     /* the project's git commit the submitter saw, NULL: none */
	int git_dirty;              /* its work tree had changes */
	const char *project_dir;    /* the directory of dlk.yaml, where program.code is; NULL: "." */
};
#define RENDER_OPTS_INIT { NULL, NULL, 0, NULL, 0, NULL }

/* A set of parsed templates: the built-ins, overridden by a directory's files. */
struct render_templates;

/* Loads the built-ins and, when dir is not NULL, the *.yaml files of dir over them. A file whose
 * name is not a built-in's is an error that lists the valid names; so is any template that does
 * not parse ("FILE:LINE: problem"). dir_optional: a missing dir is fine. Returns a new set
 * (render_templates_free) or NULL with err (code DLK_EXIT_CONFIG). */
struct render_templates *render_templates_load(const char *dir, int dir_optional, struct dlk_err *err);
void render_templates_free(struct render_templates *set);

/* Renders the named templates (in this order; NULL-terminated list) with ctx and parses what each
 * prints. Every name in every branch of a template must exist in ctx (mustache_check()), not only
 * the names of the branches this ctx takes. Every document must be a Kubernetes object (a mapping with apiVersion, kind and
 * metadata.name); empty documents (a template whose sections rendered nothing) are skipped.
 * Returns a new cJSON array of the objects (caller owns it) or NULL with err naming the template
 * and line; for YAML errors in the rendered text the message shows the rendered line. */
cJSON *render_objects(const struct render_templates *set, const char *const *names, const cJSON *ctx,
                      struct dlk_err *err);

/* The template context for a training run (documented key by key in render.c); spec_yaml is the
 * resolved spec text (project_dump_yaml()) that the ConfigMap carries. Returns a new cJSON object
 * (caller owns it) or NULL with err when the spec lacks something rendering needs. */
cJSON *render_context_train(const struct dlk_project *spec, const char *spec_yaml, const struct render_opts *opts,
                            struct dlk_err *err);

/* Everything above in one call: the objects of a training run, in dependency order, as a new
 * cJSON array (caller owns it), or NULL with err. */
cJSON *render_train(const struct dlk_project *spec, const char *spec_yaml, const struct render_opts *opts,
                    struct dlk_err *err);

/* render_train() for the project read from project_file, with its resolved spec text: the
 * templates are templates_dir's when not NULL, else those of the templates/ directory next to
 * project_file when there is one, over the built-ins. namespace_ as in struct render_opts. */
cJSON *render_train_project(const struct dlk_project *spec, const char *project_file, const char *templates_dir,
                            const char *namespace_, struct dlk_err *err);
/* The same, telling the workers the project's git commit (NULL: none) and whether its tree was
 * dirty, so that a cluster run's record names the code that made it. */
cJSON *render_train_project_git(const struct dlk_project *spec, const char *project_file, const char *templates_dir,
                                const char *namespace_, const char *git_commit, int git_dirty, struct dlk_err *err);

/* ---- serving: `dlk serve NAME` ---- */

/* The objects of a served model are named after it: "<name>-serving" (the Service, and the
 * stable track's ConfigMap, Deployment, HorizontalPodAutoscaler and PodDisruptionBudget), and
 * "<name>-serving-canary" for the canary track's. */
#define RENDER_SERVING_SUFFIX "-serving"
#define RENDER_CANARY_SUFFIX "-serving-canary"
#define RENDER_SERVING_DRAIN_MARGIN_S 5 /* grace beyond the preStop sleep and the drain timeout */

/* Where a served model's bundle comes from, and what dlk knows about it. */
struct render_serving_model {
	const char *claim;      /* the training job's claim holding the bundle, or NULL ... */
	const char *path;       /* ... and the bundle's path on it (relative) */
	const char *url;        /* else an https URL the pod fetches ... */
	const char *pin;        /* ... and the sha256 of its bytes, which the pod verifies */
	const char *source;     /* what status shows: "job NAME" or the URL */
	const char *sha256;     /* the weights' digest (model.json's), "" when unknown */
	const char *revision;   /* what changes with the bundle (the training Job's uid, the URL's pin):
	                           on the pod template, so a new bundle at the same path rolls the pods */
	double accuracy;        /* recorded test accuracy, < 0 when unknown */
};

struct render_serving {
	const char *name;       /* the served model's name (in URLs and object names) */
	int canary;             /* 1: the canary track, beside the stable one */
	int replicas;           /* this track's replicas (with an autoscaler: what the Deployment has now,
	                           when it exists, so that applying does not fight the autoscaler) */
	int canary_percent;     /* the split this deployment is part of (0: none) */
	int route;              /* the cluster serves HTTPRoutes: with serving.gateway, a Service per track
	                           and an HTTPRoute that weighs them */
	struct render_serving_model model;
};

/* Whether the track gets a HorizontalPodAutoscaler: the stable one, with serving.max_replicas
 * above serving.replicas (the autoscaler's minimum). */
int render_serving_hpa(const struct dlk_project *spec, const struct render_serving *sv);

/* The template context of one serving track (documented key by key in render.c). */
cJSON *render_context_serving(const struct dlk_project *spec, const char *spec_yaml, const struct render_serving *sv,
                              const struct render_opts *opts, struct dlk_err *err);

/* The objects of one serving track in dependency order: ConfigMap, Service, the track's own
 * Service (with a route), Deployment, then HorizontalPodAutoscaler (serving.max_replicas above
 * replicas) and PodDisruptionBudget (more than one replica), those two for the stable track
 * only, and the HTTPRoute (with a route). Templates as for
 * render_train_project(). A new cJSON array (caller owns it), or NULL with err. */
cJSON *render_serving_project(const struct dlk_project *spec, const char *project_file, const char *templates_dir,
                              const char *namespace_, const struct render_serving *sv, struct dlk_err *err);

/* The names of the built-in templates, NULL-terminated (static storage). */
const char *const *render_builtin_names(void);

/* Writes every built-in template into dir (created if missing, one level). Without force, fails
 * before writing anything when one of the files already exists. Returns the number of files
 * written, or -1 with err. */
int render_templates_copy(const char *dir, int force, struct dlk_err *err);

#endif
