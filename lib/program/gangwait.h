/* Waiting for the gang's names before the program starts. On Kubernetes a pod of an Indexed Job
 * starts before the headless Service publishes its peers' names, and a program's rendezvous that
 * looks rank 0 up too early fails for good (PyTorch issues 73682 and 80772, TorchX issue 541):
 * the worker resolves every peer's name first, retrying, and says which never resolved. */
#ifndef DLK_PROGRAM_GANGWAIT_H
#define DLK_PROGRAM_GANGWAIT_H

#include "lib/util/err.h"

#include <signal.h>

/* How long a worker waits for its peers' names before it gives up: as long as a gang waits for
 * its last pod to be scheduled and started is more than a name takes to appear. */
#define DLK_GANG_WAIT_MS (300 * 1000LL)

/* Resolves each of the n names (getaddrinfo, any address family) until every one has resolved
 * once or timeout_ms has passed, retrying the unresolved ones with a growing pause (100 ms up to
 * 2 s, never past the deadline). 0 when all resolved; -1 with err (code DLK_EXIT_RESTARTABLE: a
 * restarted gang may find them) naming, in one line, how many never resolved and which (rank and
 * name, control characters made visible) and the last resolver error. n == 0 is 0 at once. */
int dlk_gang_wait_names(const char *const *names, int n, long long timeout_ms, struct dlk_err *err);
/* The same, given up as soon as *stop is non-zero (a signal handler's flag: the pod is being
 * stopped): -1 with err (DLK_EXIT_RESTARTABLE) saying so. */
int dlk_gang_wait_names_until(const char *const *names, int n, long long timeout_ms, const volatile sig_atomic_t *stop,
                              struct dlk_err *err);

#endif
