/* Outside bytes that must not hurt: text shown on a terminal with its control characters, bidi
 * overrides and bad UTF-8 made visible; cuts at a character's end; files that are FIFOs, devices
 * or directories refused at once (an alarm turns a hang into a failure); a request framed two
 * ways refused by the metrics endpoint. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tmpdir.h"
#include "lib/serve/metricsd.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/utf8.h"

static void hung(int sig)
{
	(void)sig;
	static const char msg[] = "not ok - a read of a FIFO hung (alarm)\n";
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

static const char *vis(const char *s, size_t len, int keep)
{
	static struct dlk_buf b = DLK_BUF_INIT;
	dlk_buf_reset(&b);
	dlk_buf_add_visible(&b, s, len, keep);
	return b.data;
}

static void test_visible(void)
{
	CHECK_STR(vis("plain text, é and 漢字", strlen("plain text, é and 漢字"), 0), "plain text, é and 漢字");
	CHECK_STR(vis("\033]0;pwned\007\033[2J", 14, 0), "\\e]0;pwned\\x07\\e[2J");
	CHECK_STR(vis("a\rb\tc\nd\x7f", 8, 0), "a\\rb\\tc\\nd\\x7f");
	CHECK_STR(vis("a\rb\tc\nd", 7, 1), "a\\rb\tc\nd");
	/* C1 CSI as UTF-8, a right-to-left override, a line separator, a stray byte, a cut sequence */
	CHECK_STR(vis("\xc2\x9b" "1m", 4, 0), "\\u009b1m");
	CHECK_STR(vis("x\xe2\x80\xaey", 5, 0), "x\\u202ey");
	CHECK_STR(vis("\xe2\x80\xa8", 3, 0), "\\u2028");
	CHECK_STR(vis("a\xffz", 3, 0), "a\\xffz");
	CHECK_STR(vis("\xe6\xbc", 2, 0), "\\xe6\\xbc");
	CHECK_STR(vis("a\0b", 3, 0), "a\\x00b");
	CHECK_STR(dlk_visible("id\033[31m"), "id\\e[31m");
	CHECK_STR(dlk_visible(NULL), "");
	/* the ring keeps eight results alive at once */
	const char *first = dlk_visible("one");
	for (int i = 0; i < 7; i++)
		dlk_visible("other");
	CHECK_STR(first, "one");
}

static void test_cut(void)
{
	const char *s = "ab\xc3\xa9\xe6\xbc\xa2"; /* a b é 漢 */
	CHECK(dlk_utf8_cut(s, strlen(s), 3) == 2);
	CHECK(dlk_utf8_cut(s, strlen(s), 4) == 4);
	CHECK(dlk_utf8_cut(s, strlen(s), 6) == 4);
	CHECK(dlk_utf8_cut(s, strlen(s), 7) == 7);
	CHECK(dlk_utf8_cut(s, strlen(s), 100) == 7);
	CHECK(dlk_utf8_cut("\xff\xfe", 2, 1) == 1);
	/* a fixed buffer's cut inside a character is dropped, nothing else */
	char a[] = "ab\xc3", b[] = "a\xe6\xbc", c[] = "a\xc3\xa9", d[] = "x\xff", e[] = "\xe6\xbc\xa2";
	dlk_utf8_drop_cut(a);
	dlk_utf8_drop_cut(b);
	dlk_utf8_drop_cut(c);
	dlk_utf8_drop_cut(d);
	dlk_utf8_drop_cut(e);
	CHECK_STR(a, "ab");
	CHECK_STR(b, "a");
	CHECK_STR(c, "a\xc3\xa9");
	CHECK_STR(d, "x\xff");
	CHECK_STR(e, "\xe6\xbc\xa2");
}

static void test_regular(const char *dir)
{
	char *fifo = xasprintf("%s/fifo", dir), *file = xasprintf("%s/file", dir), msg[256];
	struct dlk_buf b = DLK_BUF_INIT;
	FILE *f;
	int fd;

	CHECK(mkfifo(fifo, 0600) == 0);
	f = fopen(file, "w");
	fputs("hello", f);
	fclose(f);
	signal(SIGALRM, hung);
	alarm(20);
	fd = dlk_open_regular_msg(fifo, msg, sizeof(msg));
	CHECK(fd < 0 && errno == EINVAL);
	CHECK_CONTAINS(msg, "is a FIFO, not a regular file");
	CHECK(dlk_buf_read_file(&b, fifo, 0, msg, sizeof(msg)) < 0);
	CHECK_CONTAINS(msg, "/fifo' is a FIFO, not a regular file");
	CHECK(dlk_open_regular_msg(dir, msg, sizeof(msg)) < 0);
	CHECK_CONTAINS(msg, "is a directory, not a regular file");
	CHECK(dlk_open_regular_msg("/dev/zero", msg, sizeof(msg)) < 0);
	CHECK_CONTAINS(msg, "'/dev/zero' is a character device, not a regular file");
	CHECK(dlk_fopen_regular(fifo, msg, sizeof(msg)) == NULL);
	alarm(0);
	CHECK(dlk_open_regular_msg("/nonexistent/x", msg, sizeof(msg)) < 0 && errno == ENOENT);
	CHECK_CONTAINS(msg, "cannot open '/nonexistent/x'");
	CHECK(dlk_buf_read_file(&b, file, 0, msg, sizeof(msg)) == 0);
	CHECK_STR(b.data, "hello");
	/* the descriptor blocks again: a reader of a regular file never sees EAGAIN */
	fd = dlk_open_regular_msg(file, msg, sizeof(msg));
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	dlk_buf_release(&b);
	free(fifo);
	free(file);
}

static void no_metrics(void *ctx, struct dlk_buf *out)
{
	(void)ctx;
	dlk_buf_adds(out, "up 1\n");
}

/* The status line of the answer to one raw request, and whether the connection closed after */
static void raw(int port, const char *req, char *status, size_t len, int *closed)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { 10, 0 };
	char buf[4096];
	size_t got = 0;
	ssize_t n;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	status[0] = '\0';
	*closed = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) || write(s, req, strlen(req)) < 0) {
		close(s);
		return;
	}
	while (got + 1 < sizeof(buf) && (n = read(s, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	*closed = n == 0;
	buf[got] = '\0';
	snprintf(status, len, "%.*s", (int)strcspn(buf, "\r\n"), buf);
	close(s);
}

static void test_metricsd_framing(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_metricsd *d = dlk_metricsd_start("127.0.0.1", 0, no_metrics, NULL, &err);
	char st[256];
	int closed;

	CHECK_MSG(d != NULL, "the metrics endpoint starts: %s", err.msg);
	if (!d)
		return;
	raw(dlk_metricsd_port(d), "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n", st,
	    sizeof(st), &closed);
	CHECK_STR(st, "HTTP/1.1 400 Bad Request");
	CHECK_MSG(closed, "the connection of a request with two lengths is closed");
	raw(dlk_metricsd_port(d), "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
	    st, sizeof(st), &closed);
	CHECK_STR(st, "HTTP/1.1 400 Bad Request");
	raw(dlk_metricsd_port(d), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", st, sizeof(st), &closed);
	CHECK_STR(st, "HTTP/1.1 200 OK");
	dlk_metricsd_stop(d);
}

int main(void)
{
	char *dir = test_tmpdir("hostile");

	test_visible();
	test_cut();
	if (dir) {
		test_regular(dir);
		test_tmpdir_remove(dir);
	}
	CHECK(dir != NULL);
	test_metricsd_framing();
	return check_failed ? 1 : 0;
}
