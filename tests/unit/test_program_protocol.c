/* lib/program/protocol.c: the progress lines a program writes, the ordinary lines it is not
 * confused by, and hostile lines refused with why. */
#include "tests/unit/check.h"
#include "lib/program/protocol.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

static struct program_report r = PROGRAM_REPORT_INIT;
static char why[256];

static int parse(const char *line)
{
	why[0] = 0;
	return program_protocol_parse(line, strlen(line), &r, why, sizeof(why));
}

static void test_lines(void)
{
	CHECK(parse("DLK-PROGRESS {\"step\": 120, \"epoch\": 1, \"epochs\": 3, \"loss\": 0.41, \"samples_per_s\": 2210, "
	            "\"lr\": 0.001, \"future_field\": {\"x\": [1]}}") == 1);
	CHECK(r.event == PROGRAM_EV_STEP && r.step == 120 && r.steps == -1 && r.epoch == 1 && r.epochs == 3);
	CHECK(r.has_loss && r.loss == 0.41 && r.samples_per_s == 2210 && r.lr == 0.001);
	CHECK(r.n_metrics == 0 && r.n_classes == 0 && r.model == NULL);

	CHECK(parse("DLK-PROGRESS {\"event\": \"epoch\", \"epoch\": 2, \"metrics\": {\"accuracy\": 0.86, \"val/loss\": 0.5}, "
	            "\"confusion\": [[50, 2], [3, 45]]}\r") == 1);
	CHECK(r.event == PROGRAM_EV_EPOCH && !r.has_loss && r.step == -1 && r.samples_per_s == -1);
	CHECK(r.n_metrics == 2 && program_report_metric(&r, "accuracy") && *program_report_metric(&r, "accuracy") == 0.86);
	CHECK(program_report_metric(&r, "val/loss") && !program_report_metric(&r, "recall"));
	CHECK(r.n_classes == 2 && r.confusion[1] == 2 && r.confusion[2] == 3 && r.confusion[3] == 45);

	CHECK(parse("DLK-PROGRESS {\"event\": \"done\", \"model\": \"/out/model.pt\"}") == 1);
	CHECK(r.event == PROGRAM_EV_DONE);
	CHECK_STR(r.model, "/out/model.pt");
	/* an empty object is a valid (if silent) report */
	CHECK(parse("DLK-PROGRESS {}") == 1 && r.model == NULL);
}

static void test_not_protocol(void)
{
	CHECK(parse("") == 0);
	CHECK(parse("Epoch 1 loss 0.4") == 0);
	CHECK(parse(" DLK-PROGRESS {}") == 0);       /* the prefix starts the line */
	CHECK(parse("DLK-PROGRESS{}") == 0);         /* the prefix ends with its space */
	CHECK(parse("dlk-progress {}") == 0);
}

static void test_hostile(void)
{
	struct {
		const char *line, *why;
	} bad[] = {
		{ "DLK-PROGRESS ", "expected one JSON object after the prefix" },
		{ "DLK-PROGRESS [1]", "expected one JSON object after the prefix" },
		{ "DLK-PROGRESS {\"loss\": 1} trailing", "expected one JSON object after the prefix" },
		{ "DLK-PROGRESS {\"loss\": NaN}", "expected one JSON object after the prefix" },
		{ "DLK-PROGRESS {\"loss\": \"0.4\"}", "loss: expected a finite number from -1e+300 to 1e+300" },
		{ "DLK-PROGRESS {\"loss\": 1e999}", "loss: expected a finite number from -1e+300 to 1e+300" },
		{ "DLK-PROGRESS {\"step\": -1}", "step: expected a whole number from 0 to 9.0072e+15" },
		{ "DLK-PROGRESS {\"step\": 1.5}", "step: expected a whole number from 0 to 9.0072e+15" },
		{ "DLK-PROGRESS {\"epochs\": 0}", "epochs: expected a whole number from 1 to 1e+09" },
		{ "DLK-PROGRESS {\"epoch\": 4, \"epochs\": 3}", "epoch 4 is past epochs 3" },
		{ "DLK-PROGRESS {\"samples_per_s\": -3}", "samples_per_s: expected a finite number from 0 to 1e+300" },
		{ "DLK-PROGRESS {\"event\": \"begin\"}", "event: expected \"step\", \"epoch\" or \"done\"" },
		{ "DLK-PROGRESS {\"metrics\": [1]}", "metrics: expected an object of names to numbers" },
		{ "DLK-PROGRESS {\"metrics\": {\"acc\": \"high\"}}", "metrics.acc: expected a finite number" },
		{ "DLK-PROGRESS {\"metrics\": {\"a\": 1, \"a\": 2}}", "metrics.a: given twice" },
		{ "DLK-PROGRESS {\"metrics\": {\"a b\": 1}}",
		  "metrics: a name is empty, longer than 64 or holds a character other than letters, digits, '_', '.', '-', '/'" },
		{ "DLK-PROGRESS {\"metrics\": {\"\\u001b[31m\": 1}}",
		  "metrics: a name is empty, longer than 64 or holds a character other than letters, digits, '_', '.', '-', '/'" },
		{ "DLK-PROGRESS {\"confusion\": [[1, 2], [3]]}", "confusion[1]: expected 2 counts (the matrix is square)" },
		{ "DLK-PROGRESS {\"confusion\": [[1, -2], [3, 4]]}", "confusion[0][1]: expected a count (a whole number >= 0)" },
		{ "DLK-PROGRESS {\"confusion\": []}", "confusion: expected a square list of lists of counts, 1 to 256 classes" },
		{ "DLK-PROGRESS {\"model\": \"a\\nb\"}", "model: expected the path of the model file (one line, at most 4096 bytes)" },
		{ "DLK-PROGRESS {\"model\": 7}", "model: expected the path of the model file (one line, at most 4096 bytes)" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i].line);
		CHECK_MSG(rc == -1 && !strcmp(why, bad[i].why), "refused: %s", bad[i].line);
		if (rc != -1 || strcmp(why, bad[i].why))
			printf("#   rc %d, why \"%s\"\n", rc, why);
		CHECK(r.model == NULL && r.confusion == NULL && r.n_metrics == 0);
	}
	/* a NUL inside, a line past the bound, too many metrics or classes, deep nesting */
	const char nul[] = "DLK-PROGRESS {\"loss\": 1\0}";
	CHECK(program_protocol_parse(nul, sizeof(nul) - 1, &r, why, sizeof(why)) == -1);
	CHECK_STR(why, "the line holds a NUL byte");
	size_t big = PROGRAM_PROTOCOL_MAX_LINE + 1;
	char *line = xcalloc(big + 1, 1);
	memcpy(line, "DLK-PROGRESS {\"model\": \"", 25);
	memset(line + 25, 'a', big - 27);
	memcpy(line + big - 2, "\"}", 2);
	CHECK(program_protocol_parse(line, big, &r, why, sizeof(why)) == -1);
	CHECK_STR(why, "the line is 65537 bytes, more than the limit of 65536");
	struct dlk_buf_like { char *p; size_t n; } m = { line, 0 };
	m.n = (size_t)sprintf(m.p, "DLK-PROGRESS {\"metrics\": {");
	for (int i = 0; i <= PROGRAM_PROTOCOL_MAX_METRICS; i++)
		m.n += (size_t)sprintf(m.p + m.n, "%s\"m%d\": %d", i ? ", " : "", i, i);
	m.n += (size_t)sprintf(m.p + m.n, "}}");
	CHECK(parse(line) == -1);
	CHECK_STR(why, "metrics: more than 64");
	m.n = (size_t)sprintf(m.p, "DLK-PROGRESS {\"confusion\": [");
	for (int i = 0; i <= PROGRAM_PROTOCOL_MAX_CLASSES; i++)
		m.n += (size_t)sprintf(m.p + m.n, "%s[0]", i ? "," : "");
	m.n += (size_t)sprintf(m.p + m.n, "]}");
	CHECK(parse(line) == -1);
	CHECK_STR(why, "confusion: expected a square list of lists of counts, 1 to 256 classes");
	m.n = (size_t)sprintf(m.p, "DLK-PROGRESS ");
	/* nesting as deep as the line allows */
	for (int i = 0; i < PROGRAM_PROTOCOL_MAX_LINE - 16; i++)
		m.p[m.n++] = '[';
	m.p[m.n] = 0;
	CHECK(parse(line) == -1);
	free(line);
	program_report_release(&r);
}

int main(void)
{
	test_lines();
	test_not_protocol();
	test_hostile();
	return CHECK_DONE();
}
