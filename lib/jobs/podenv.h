/* The environment of a dlk worker: the variables the Job template sets (or Kubernetes sets in
 * every pod) and the worker reads, named here once. templates/_jobspec.yaml writes the same
 * names; the template test (tests/unit/test_render_train.c) checks that every rendered Job sets
 * each of DLK_POD_ENV_FROM_TEMPLATE. `dlk train --local --workers N` gives its worker processes
 * the same variables the Job gives its pods. */
#ifndef DLK_JOBS_PODENV_H
#define DLK_JOBS_PODENV_H

/* Set by the Job template. */
#define DLK_ENV_RANK "RANK"               /* this worker's rank: its pod's completion index */
#define DLK_ENV_WORLD_SIZE "WORLD_SIZE"   /* how many workers the job has */
#define DLK_ENV_MASTER_ADDR "MASTER_ADDR" /* where rank 0 listens: JOB-0.SERVICE */
#define DLK_ENV_MASTER_PORT "MASTER_PORT" /* and on which port (resources.master_port) */
#define DLK_ENV_JOB_NAME "DLK_JOB_NAME"   /* the Job the worker publishes its progress on */
#define DLK_ENV_RUN_ID "DLK_RUN_ID"       /* the Job's uid: a restarted gang never meets a worker of another run */
#define DLK_ENV_NAMESPACE "DLK_NAMESPACE" /* the pod's namespace (downward API) */
#define DLK_ENV_POD_NAME "POD_NAME"       /* the pod's name, for the user's tools (dlk does not read it) */
#define DLK_ENV_TRIGGER "DLK_TRIGGER"     /* what started the run: schedule (a CronJob's), else manual */
#define DLK_ENV_NETRC "NETRC"             /* with data.netrc_secret: the mounted netrc file the fetcher reads */
/* With data.dataset: the node cache the template mounts, and its bound in bytes. */
#define DLK_ENV_DATA_CACHE "DLK_DATA_CACHE"
#define DLK_ENV_DATA_CACHE_MAX_BYTES "DLK_DATA_CACHE_MAX_BYTES"
/* With a checkpoint volume: the folder of it where the worker archives its log
 * (lib/jobs/logarchive.h). */
#define DLK_ENV_LOG_ARCHIVE "DLK_LOG_ARCHIVE"
/* Where the worker writes why it failed: the container's terminationMessagePath. */
#define DLK_ENV_TERMINATION_LOG "DLK_TERMINATION_LOG"
/* The project's git commit the submitter saw, and "true" when its work tree had changes. */
#define DLK_ENV_GIT_COMMIT "DLK_GIT_COMMIT"
#define DLK_ENV_GIT_DIRTY "DLK_GIT_DIRTY"
/* What every rendered Job sets (NETRC only with data.netrc_secret, DLK_GIT_* only when the
 * project is in git), as an initializer. */
#define DLK_POD_ENV_FROM_TEMPLATE                                                                          \
	{ DLK_ENV_RANK, DLK_ENV_WORLD_SIZE, DLK_ENV_MASTER_ADDR, DLK_ENV_MASTER_PORT, DLK_ENV_JOB_NAME,     \
	  DLK_ENV_RUN_ID, DLK_ENV_NAMESPACE, DLK_ENV_POD_NAME, DLK_ENV_TERMINATION_LOG, DLK_ENV_LOG_FORMAT, NULL }

/* Set by Kubernetes. */
#define DLK_ENV_COMPLETION_INDEX "JOB_COMPLETION_INDEX" /* an Indexed Job's index (must agree with RANK) */
#define DLK_ENV_SERVICE_HOST "KUBERNETES_SERVICE_HOST"  /* set in every pod: the worker is in a cluster */

/* Set by the gang of worker processes of `dlk train --local --workers N`, and of a pod with
 * several GPUs (a rank per GPU). */
#define DLK_ENV_LOCAL_RANK "LOCAL_RANK"             /* the worker's index among the pod's processes: its GPU */
#define DLK_ENV_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE" /* how many worker processes the pod (or the machine) runs */
#define DLK_ENV_DEVICE "DLK_DEVICE"                 /* cpu | cuda | auto: overrides the backend's choice */
#define DLK_ENV_GENERATION "DLK_GENERATION" /* how often the gang was restarted: the rendezvous round */
#define DLK_ENV_LISTEN_FD "DLK_LISTEN_FD"   /* rank 0: the socket the parent opened for the rendezvous */
#define DLK_ENV_THREADS "DLK_THREADS"       /* compute threads, unless training.threads says */
#define DLK_ENV_LOG_FORMAT "DLK_LOG_FORMAT"     /* text | json: --log-format when not given (logging.format in a pod) */
#define DLK_ENV_METRICS_PORT "DLK_METRICS_PORT" /* the gang's metrics port: a worker serves on it + LOCAL_RANK (0: none) */

/* What a user (or a test) may set for a worker. */
#define DLK_ENV_RENDEZVOUS_TIMEOUT "DLK_RENDEZVOUS_TIMEOUT" /* seconds to wait for every rank (300) */
#define DLK_ENV_STALL_TIMEOUT "DLK_STALL_TIMEOUT"           /* seconds a collective may stall (300) */
#define DLK_ENV_COMM "DLK_COMM"                             /* gradients over NCCL when it can (auto), or tcp */
#define DLK_ENV_TERM_GRACE "DLK_TERM_GRACE"                 /* seconds after SIGTERM for the last checkpoint (20) */
#define DLK_ENV_RESIZE_POLL "DLK_RESIZE_POLL"               /* seconds between rank 0's reads of the Job's size (10) */
#define DLK_ENV_SERVICEACCOUNT_DIR "DLK_SERVICEACCOUNT_DIR" /* the service account's files, when not at the standard mount */
#define DLK_ENV_IMAGE "DLK_IMAGE"                           /* the image, recorded in the bundle's provenance */
#define DLK_ENV_CODE_SHA256 "DLK_CODE_SHA256"               /* a program's shipped code: its digest, for the run's record */
#define DLK_ENV_RUN_SWEEP "DLK_RUN_SWEEP"                   /* a sweep's trial: its run.sweep (JSON), lib/sweep */
#define DLK_ENV_PVC_ROOT "DLK_PVC_ROOT"                     /* where a pvc:// store's claim is mounted (/mnt/pvc) */
#define DLK_ENV_TEST_CHECKPOINT_DELAY_MS "DLK_TEST_CHECKPOINT_DELAY_MS" /* tests: slow every checkpoint write */
#define DLK_ENV_TEST_CHECKPOINT_SPACE "DLK_TEST_CHECKPOINT_SPACE" /* tests: bytes a checkpoint may write before ENOSPC */
#define DLK_ENV_TEST_MEMORY "DLK_TEST_MEMORY"             /* tests: the bytes of memory data.images.decode: auto weighs */
#define DLK_ENV_TEST_BF16_EMULATE "DLK_TEST_BF16_EMULATE" /* tests: 1 emulates bf16 products where the CPU has AVX512_BF16 */

#endif
