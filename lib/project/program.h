/* The user's own program as the workload: the `program:` section of dlk.yaml, and the server a
 * `serving.program:` section names instead of a dlk bundle.
 *
 *   program:
 *     framework: pytorch           # pytorch | jax | tensorflow | paddle | none
 *     image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime   # default: the project's image
 *     command: [torchrun, train.py] # a list, or one string split like a shell word list
 *     args: [--epochs, "3"]
 *     workdir: /workspace           # default: the code's directory, or the image's own
 *     env: {NCCL_DEBUG: INFO}
 *     code: ./src                   # a directory of the project shipped content-addressed;
 *                                   # absent: the code is baked into the image
 *     procs_per_worker: 1           # processes per pod (torchrun's --nproc-per-node); 0 = one per GPU
 *     port: 29500                   # the rendezvous port on rank 0
 *     exit_codes: {restart: [...], fail: [...]}   # how the program's exit codes map onto the
 *                                   # Job's podFailurePolicy (a default fits torchrun)
 *
 * When `program:` is present, `model:` and `training:` describe nothing the pods run (dlk's own
 * engine is not used); data, resources, storage, schedule, serving and logging apply as for a
 * dlk run. The parsing and validation live in lib/project/program.c; the environment each
 * framework expects in lib/program/. */
#ifndef DLK_PROJECT_PROGRAM_H
#define DLK_PROJECT_PROGRAM_H

enum dlk_framework {
	DLK_FW_NONE,        /* DLK_RANK, DLK_WORLD_SIZE, DLK_PEERS, ... only */
	DLK_FW_PYTORCH,     /* torchrun's variables, or torchrun's flags when the command is torchrun */
	DLK_FW_JAX,         /* jax.distributed.initialize's coordinator, process count and id */
	DLK_FW_TENSORFLOW,  /* TF_CONFIG for MultiWorkerMirroredStrategy */
	DLK_FW_PADDLE,      /* PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT, ... */
};

struct dlk_program_kv {
	char *key, *value;
};

struct dlk_program {
	int present;              /* the section was given */
	enum dlk_framework framework; /* default none */
	char *image;              /* NULL = the project's image */
	char **command;           /* argv, NULL-terminated, n_command entries; required */
	int n_command;
	char **args;              /* appended to command; n_args entries */
	int n_args;
	char *workdir;            /* NULL = the code's directory when code is set, else the image's */
	struct dlk_program_kv *env;
	int n_env;
	char *code;               /* project-relative directory shipped with the run; NULL = none */
	int procs_per_worker;     /* default 1; 0 = one per GPU (resources.gpus) */
	int port;                 /* rendezvous port, default 29500 */
	int *restart_codes;       /* exit codes that restart the gang (podFailurePolicy Ignore/Count) */
	int n_restart_codes;
	int *fail_codes;          /* exit codes that fail the job at once (FailJob) */
	int n_fail_codes;
	int line;                 /* where the section starts in the project file, 0 if unknown */
};

/* serving.program: the user's own inference server instead of a dlk bundle */
struct dlk_program_server {
	int present;
	char *image;              /* required */
	char **command;           /* NULL = the image's entrypoint */
	int n_command;
	struct dlk_program_kv *env;
	int n_env;
	int port;                 /* the port it listens on, default serving.port */
	char *ready_path;         /* readiness probe path, default "/" */
	char *live_path;          /* liveness probe path, default ready_path */
	char *metrics_path;       /* Prometheus metrics path, NULL = none */
	int line;
};

const char *dlk_framework_name(enum dlk_framework fw);
/* What a program's exit code means under its exit_codes (not dlk's own codes: a program's 3 is
 * not dlk's "config"): "fatal" for a code of exit_codes.fail (the Job fails at once),
 * "restartable" for any other non-zero code (the gang is restarted), NULL for 0. The class a
 * program's failure is published and recorded with. */
const char *dlk_program_exit_class(const struct dlk_program *p, int code);
/* -1 when the name is not a framework */
int dlk_framework_of(const char *name);

#endif
