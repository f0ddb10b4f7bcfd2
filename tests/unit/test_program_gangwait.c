/* Waiting for the gang's names (lib/program/gangwait.h): names that resolve pass at once; a name
 * that never resolves (the reserved .invalid domain, RFC 6761) fails after the short timeout
 * given, not before, naming its rank and only the names that never resolved, in one line with
 * control characters made visible; no names is nothing to wait for. */
#include "tests/unit/check.h"

#include "lib/program/gangwait.h"
#include "lib/util/clock.h"
#include "lib/util/err.h"

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *good[] = { "localhost", "127.0.0.1", "::1" };
	const char *mixed[] = { "localhost", "dlk-gangwait-test-0.invalid", "127.0.0.1", "bad\x1b[31m.invalid" };
	long long t0;
	int rc;

	CHECK_MSG(dlk_gang_wait_names(good, 3, 2000, &err) == 0, "names that resolve: %s", err.msg);
	CHECK(dlk_gang_wait_names(NULL, 0, 0, &err) == 0);

	t0 = dlk_now_ms();
	rc = dlk_gang_wait_names(mixed, 4, 600, &err);
	long long took = dlk_now_ms() - t0;
	CHECK(rc == -1);
	CHECK(err.code == DLK_EXIT_RESTARTABLE);
	CHECK_MSG(took >= 600, "it waited the whole timeout (%lld ms)", took);
	CHECK_CONTAINS(err.msg, "2 of 4 peer names never resolved in ");
	CHECK_CONTAINS(err.msg, "rank 1 'dlk-gangwait-test-0.invalid', rank 3 'bad\\e[31m.invalid'");
	CHECK(!strstr(err.msg, "localhost"));
	CHECK(!strstr(err.msg, "127.0.0.1"));
	CHECK(!strchr(err.msg, '\n') && !strchr(err.msg, '\x1b'));
	CHECK_CONTAINS(err.hint, "headless Service");

	/* a timeout of 0 still asks once */
	dlk_err_clear(&err);
	CHECK(dlk_gang_wait_names(good, 1, 0, &err) == 0);
	CHECK(dlk_gang_wait_names(mixed + 1, 1, 0, &err) == -1);
	CHECK_CONTAINS(err.msg, "1 of 1 peer names never resolved");

	/* a pod being stopped (its signal handler's flag) ends a long wait at once */
	{
		volatile sig_atomic_t stop = 15;
		long long t0 = dlk_now_ms();
		dlk_err_clear(&err);
		CHECK(dlk_gang_wait_names_until(mixed + 1, 1, 60000, &stop, &err) == -1);
		CHECK(err.code == DLK_EXIT_RESTARTABLE && dlk_now_ms() - t0 < 5000);
		CHECK_CONTAINS(err.msg, "stopped by signal 15 while waiting for 1 of 1 peer names");
		stop = 0;
		dlk_err_clear(&err);
		CHECK(dlk_gang_wait_names_until(good, 1, 1000, &stop, &err) == 0);
	}
	return CHECK_DONE();
}
