/* The store pod's protocol as each side reads the other (lib/store/wire.c): sizes that are whole
 * byte counts, listings that never hand out a path, and the one Range form the pod serves. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/store/wire.h"

struct names {
	char got[256];
	int n, stop_after;
};

static int collect(void *ctx, const char *name, unsigned long long size)
{
	struct names *c = ctx;
	size_t l = strlen(c->got);

	snprintf(c->got + l, sizeof(c->got) - l, "%s%s=%llu", l ? " " : "", name, size);
	return ++c->n == c->stop_after;
}

static void test_size(void)
{
	unsigned long long n = 7;

	CHECK(!dlk_store_wire_size("{\"size\": 0}", 11, &n) && n == 0);
	CHECK(!dlk_store_wire_size("{\"size\":123456789012}", 21, &n) && n == 123456789012ull);
	n = 7;
	CHECK(dlk_store_wire_size("{\"size\": -1}", 12, &n) && n == 7);
	CHECK(dlk_store_wire_size("{\"size\": 1.5}", 13, &n));
	CHECK(dlk_store_wire_size("{\"size\": 1e300}", 15, &n));
	CHECK(dlk_store_wire_size("{\"size\": \"12\"}", 14, &n));
	CHECK(dlk_store_wire_size("{\"size\": 12", 11, &n));
	CHECK(dlk_store_wire_size("", 0, &n) && n == 7);
	/* the length is what counts, not a NUL */
	CHECK(!dlk_store_wire_size("{\"size\": 5}garbage", 11, &n) && n == 5);
}

static void test_list(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct names c = {0};
	const char *ok = "{\"names\": [{\"name\": \"a\", \"size\": 3}, {\"name\": \"../x\", \"size\": 1},"
	                 " {\"name\": \"..\"}, {\"name\": \"\"}, {\"name\": 5}, {\"name\": \"b/c\"},"
	                 " {\"name\": \"d\", \"size\": -4}, {\"name\": \"e\"}]}";

	CHECK(!dlk_store_wire_list(ok, strlen(ok), "pvc://c/p", collect, &c, &err));
	CHECK_STR(c.got, "a=3 d=0 e=0");
	memset(&c, 0, sizeof(c));
	c.stop_after = 1;
	CHECK(!dlk_store_wire_list(ok, strlen(ok), "pvc://c/p", collect, &c, &err) && c.n == 1);
	CHECK(!dlk_store_wire_list("{\"names\": []}", 13, "pvc://c/p", collect, &c, &err));
	CHECK(dlk_store_wire_list("{\"names\": {}}", 13, "pvc://c/p", collect, &c, &err) == -1);
	CHECK_CONTAINS(err.msg, "pvc://c/p: the store's pod answered something that is not a list");
	dlk_err_clear(&err);
	CHECK(dlk_store_wire_list("<html>", 6, "pvc://c/p", collect, &c, &err) == -1 && err.code == DLK_EXIT_CONNECT);
	dlk_err_clear(&err);
}

static void test_range(void)
{
	unsigned long long from = 9;

	CHECK(!dlk_store_wire_range("bytes=0-", 10, &from) && from == 0);
	CHECK(!dlk_store_wire_range("bytes=10-", 10, &from) && from == 10);
	from = 9;
	CHECK(dlk_store_wire_range("bytes=11-", 10, &from) && from == 9);
	CHECK(dlk_store_wire_range("bytes=1-5", 10, &from));
	CHECK(dlk_store_wire_range("bytes=-5", 10, &from));
	CHECK(dlk_store_wire_range("bytes= 1-", 10, &from));
	CHECK(dlk_store_wire_range("items=1-", 10, &from));
	CHECK(dlk_store_wire_range("bytes=99999999999999999999999-", ~0ull, &from));
	CHECK(dlk_store_wire_range(NULL, 10, &from) && from == 9);
}

int main(void)
{
	test_size();
	test_list();
	test_range();
	return CHECK_DONE();
}
