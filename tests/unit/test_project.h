/* Helpers shared by the spec tests: load text, return the error or the dump. */
#ifndef DLK_TESTS_TEST_PROJECT_H
#define DLK_TESTS_TEST_PROJECT_H

#include "lib/project/project.h"
#include "lib/util/err.h"

#include <stdlib.h>
#include <string.h>

static struct dlk_err spec_test_err;

/* Loads yaml (named "dlk.yaml") with sets; returns the spec, or NULL with spec_test_err set. */
static inline struct dlk_project *load_sets(const char *yaml, const char *const *sets, size_t n)
{
	memset(&spec_test_err, 0, sizeof(spec_test_err));
	return project_load_mem(yaml, strlen(yaml), "dlk.yaml", sets, n, &spec_test_err);
}

static inline struct dlk_project *load(const char *yaml)
{
	return load_sets(yaml, NULL, 0);
}

/* The error message of loading yaml, "" when it loaded (the spec is freed). */
static inline const char *load_msg_sets(const char *yaml, const char *const *sets, size_t n)
{
	struct dlk_project *s = load_sets(yaml, sets, n);
	if (s) {
		project_free(s);
		return "";
	}
	return spec_test_err.msg;
}

static inline const char *load_msg(const char *yaml)
{
	return load_msg_sets(yaml, NULL, 0);
}

/* A valid minimal project, to which tests append or override. */
#define MINIMAL                                                               \
	"name: demo\n"                                                        \
	"data:\n"                                                             \
	"  train:\n"                                                          \
	"    images: /d/train-images.gz\n"                                    \
	"    labels: /d/train-labels.gz\n"                                    \
	"model:\n"                                                            \
	"  input: [784]\n"                                                    \
	"  layers:\n"                                                         \
	"    - dense: {units: 10}\n"

#endif
