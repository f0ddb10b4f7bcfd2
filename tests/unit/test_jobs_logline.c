/* A --log-format json line read back as text (lib/jobs/logline.c), as `dlk logs` shows it. */
#include "tests/unit/check.h"

#include "lib/jobs/logline.h"

static int text(const char *line, char *out, size_t n)
{
	return dlk_logline_text(line, strlen(line), out, n);
}

int main(void)
{
	char out[256], tiny[8];

	CHECK(text("{\"time\":\"2026-01-02T03:04:05.678Z\",\"level\":\"info\",\"rank\":0,\"msg\":\"epoch 1/2\",\"loss\":0.5}", out,
	           sizeof(out)));
	CHECK_STR(out, "epoch 1/2");
	CHECK(text("{\"time\":\"t\",\"level\":\"warning\",\"msg\":\"slow\"}", out, sizeof(out)));
	CHECK_STR(out, "warning: slow");
	CHECK(text("{\"time\":\"t\",\"level\":\"error\",\"msg\":\"a\\nb\",\"hint\":\"fix it\"}", out, sizeof(out)));
	CHECK_STR(out, "error: a b (hint: fix it)");
	/* not ours: shown as they are */
	CHECK(!text("plain text", out, sizeof(out)));
	CHECK(!text("{\"level\":\"info\",\"msg\":\"no time\"}", out, sizeof(out)));
	CHECK(!text("{\"time\":\"t\",\"level\":1,\"msg\":\"x\"}", out, sizeof(out)));
	CHECK(!text("{\"time\":\"t\",\"level\":\"info\",\"msg\":", out, sizeof(out)));
	/* a small buffer is cut, never overrun */
	CHECK(text("{\"time\":\"t\",\"level\":\"info\",\"msg\":\"0123456789\"}", tiny, sizeof(tiny)));
	CHECK_STR(tiny, "0123456");
	return CHECK_DONE();
}
