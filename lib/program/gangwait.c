/* Waiting for the gang's names (gangwait.h). The resolver is asked again each round instead of
 * once with a long timeout: a negative answer (NXDOMAIN before the Service has the pod's
 * endpoint) comes back at once and is not an answer for later, so only retrying sees the name
 * appear. */
#include "lib/program/gangwait.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "lib/util/clock.h"
#include "lib/util/utf8.h"

static int resolves(const char *name, int *gai)
{
	struct addrinfo hints, *res = NULL;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	*gai = getaddrinfo(name, NULL, &hints, &res);
	if (res)
		freeaddrinfo(res);
	return *gai == 0;
}

static void pause_ms(long long ms, const volatile sig_atomic_t *stop)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && !(stop && *stop))
		;
}

int dlk_gang_wait_names(const char *const *names, int n, long long timeout_ms, struct dlk_err *err)
{
	return dlk_gang_wait_names_until(names, n, timeout_ms, NULL, err);
}

int dlk_gang_wait_names_until(const char *const *names, int n, long long timeout_ms, const volatile sig_atomic_t *stop,
                              struct dlk_err *err)
{
	long long start = dlk_now_ms(), deadline = start + (timeout_ms > 0 ? timeout_ms : 0), pause = 100;
	char *done;
	int left = n, gai = 0, last_gai = EAI_NONAME, rc = 0;

	if (n <= 0)
		return 0;
	done = calloc((size_t)n, 1);
	if (!done)
		return dlk_errf(err, DLK_EXIT_FAIL, "out of memory");
	for (;;) {
		for (int i = 0; i < n; i++)
			if (!done[i] && names[i]) {
				if (resolves(names[i], &gai)) {
					done[i] = 1;
					left--;
				} else {
					last_gai = gai;
				}
			}
		if (!left)
			goto out;
		if (stop && *stop) {
			rc = dlk_errf(err, DLK_EXIT_RESTARTABLE, "stopped by signal %d while waiting for %d of %d peer names",
			              (int)*stop, left, n);
			goto out;
		}
		long long now = dlk_now_ms();
		if (now >= deadline)
			break;
		pause_ms(pause < deadline - now ? pause : deadline - now, stop);
		if (pause < 2000)
			pause *= 2;
	}
	{
		char list[1024];
		size_t len = 0;

		list[0] = '\0';
		for (int i = 0; i < n && len < sizeof(list); i++) {
			if (done[i])
				continue;
			int w = snprintf(list + len, sizeof(list) - len, "%srank %d '%s'", len ? ", " : "", i,
			                 names[i] ? dlk_visible(names[i]) : "(no name)");
			if (w < 0)
				break;
			len += (size_t)w;
		}
		if (len >= sizeof(list))
			memcpy(list + sizeof(list) - 4, "...", 4);
		rc = dlk_errf(err, DLK_EXIT_RESTARTABLE, "%d of %d peer names never resolved in %.1fs: %s (last error: %s)",
		              left, n, (double)(dlk_now_ms() - start) / 1000.0, list, gai_strerror(last_gai));
		dlk_err_hint(err, "the gang's headless Service publishes the pods' names (publishNotReadyAddresses); "
		                  "check that it exists and that every worker's pod was created");
	}
out:
	free(done);
	return rc;
}
