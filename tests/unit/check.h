/* A minimal TAP-producing unit-test harness: every CHECK prints one "ok N - ..." or
 * "not ok N - ..." line, which tests/run counts. No test state is hidden: a test
 * binary's exit status is 1 when any check failed. */
#ifndef DLK_TESTS_CHECK_H
#define DLK_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_n, check_failed;

#define CHECK_MSG(cond, ...)                                                         \
	do {                                                                         \
		int ok_ = !!(cond);                                                  \
		check_n++;                                                           \
		if (!ok_)                                                            \
			check_failed++;                                              \
		printf("%s %d - ", ok_ ? "ok" : "not ok", check_n);                  \
		printf(__VA_ARGS__);                                                 \
		printf("\n");                                                        \
		if (!ok_)                                                            \
			printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
		fflush(stdout);                                                      \
	} while (0)

#define CHECK(cond) CHECK_MSG(cond, "%s", #cond)

#define CHECK_STR(a, b)                                                               \
	do {                                                                          \
		const char *a_ = (a), *b_ = (b);                                      \
		int eq_ = a_ && b_ && !strcmp(a_, b_);                                \
		CHECK_MSG(eq_, "%s == \"%s\"", #a, b_ ? b_ : "(null)");               \
		if (!eq_)                                                             \
			printf("#   got \"%s\"\n", a_ ? a_ : "(null)");                  \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                                   \
	do {                                                                          \
		const char *h_ = (hay), *n_ = (needle);                               \
		int in_ = h_ && n_ && strstr(h_, n_);                                 \
		CHECK_MSG(in_, "%s contains \"%s\"", #hay, n_);                       \
		if (!in_)                                                             \
			printf("#   got \"%s\"\n", h_ ? h_ : "(null)");                  \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                         \
	do {                                                                          \
		double a_ = (a), b_ = (b), t_ = (tol);                                \
		int ok2_ = fabs(a_ - b_) <= t_ * (1.0 + fabs(b_));                    \
		CHECK_MSG(ok2_, "%s ~= %s (%g vs %g)", #a, #b, a_, b_);               \
	} while (0)

/* A component the test needs is missing. `.ci/deps test` (which `make test` runs first) installs
 * it, so this is an install failure, never a skip (as test_missing in tests/lib.sh). */
#define CHECK_MISSING(what) CHECK_MSG(0, "%s is missing (run .ci/deps test, which installs it)", what)

#define CHECK_DONE() (printf("1..%d\n", check_n), check_failed ? 1 : 0)

#endif
