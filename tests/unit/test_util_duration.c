/* Durations: the one format of every time dlk shows (dlk_duration_span) and the parser of those
 * typed on a command line. */
#include "lib/util/duration.h"
#include "tests/unit/check.h"

#include <math.h>

static void span(double s, const char *want)
{
	char out[32];

	dlk_duration_span(s, out, sizeof(out));
	CHECK_STR(out, want);
}

int main(void)
{
	/* a run of seconds keeps its tenths; a minute and more whole units, never "60.0s" */
	span(0, "0.0s");
	span(3.54, "3.5s");
	span(37.1, "37.1s");
	span(59.94, "59.9s");
	span(59.96, "1m00s");
	span(65.4, "1m05s");
	span(3599.4, "59m59s");
	span(3599.6, "1h00m");
	span(7380, "2h03m");
	span(100 * 3600.0, "100h00m");
	/* what no duration is */
	span(-1, "-");
	span(NAN, "-");
	span(INFINITY, "-");
	{
		char tiny[4];
		dlk_duration_span(7380, tiny, sizeof(tiny));
		CHECK_STR(tiny, "2h0");
	}
	CHECK(dlk_duration_parse("1h30m") == 5400);
	CHECK(dlk_duration_parse("2d") == 2 * 86400);
	CHECK(dlk_duration_parse("1x") < 0);
	return CHECK_DONE();
}
