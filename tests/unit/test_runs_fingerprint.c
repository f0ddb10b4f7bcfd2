/* The data fingerprints of a run record: of all its data, and of one split, which is every
 * source of it (an images file and its labels file alike), never just the last one seen. */
#include "lib/runs/runs.h"
#include "tests/unit/check.h"

static cJSON *record(const char *const rows[][3], int n)
{
	cJSON *rec = cJSON_CreateObject(), *run = cJSON_AddObjectToObject(rec, "run");
	cJSON *data = cJSON_AddArrayToObject(run, "data");

	cJSON_AddStringToObject(rec, "format", "dlk-run");
	for (int i = 0; i < n; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "split", rows[i][0]);
		cJSON_AddStringToObject(d, "url", rows[i][1]);
		cJSON_AddStringToObject(d, "sha256", rows[i][2]);
		cJSON_AddItemToArray(data, d);
	}
	return rec;
}

#define A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

int main(void)
{
	static const char *const both[][3] = { { "train", "img.idx", A }, { "train", "lbl.idx", B }, { "test", "t.csv", C } };
	static const char *const other_labels[][3] = { { "train", "img.idx", A }, { "train", "lbl.idx", C }, { "test", "t.csv", C } };
	static const char *const swapped[][3] = { { "test", "t.csv", C }, { "train", "lbl.idx", B }, { "train", "img.idx", A } };
	cJSON *r1 = record(both, 3), *r2 = record(other_labels, 3), *r3 = record(swapped, 3), *none = record(both, 0);
	char f1[65], f2[65], f3[65], t1[65], t2[65], all[65];
	int n = -1;

	dlk_run_split_fingerprint(r1, "train", f1, &n);
	CHECK_MSG(n == 2, "the train split has both files (%d)", n);
	CHECK_MSG(strlen(f1) == 64 && strcmp(f1, A) && strcmp(f1, B), "its fingerprint is of both, not one file's");
	dlk_run_split_fingerprint(r2, "train", f2, NULL);
	CHECK_MSG(strcmp(f1, f2), "another labels file is other train data");
	dlk_run_split_fingerprint(r3, "train", f3, NULL);
	CHECK_STR(f3, f1);
	dlk_run_split_fingerprint(r1, "test", t1, &n);
	dlk_run_split_fingerprint(r2, "test", t2, NULL);
	CHECK_MSG(n == 1 && !strcmp(t1, t2), "the test split is the same in both");
	dlk_run_data_fingerprint(r1, all);
	CHECK_MSG(strcmp(all, f1) && strcmp(all, t1), "the whole data's fingerprint is neither split's");
	dlk_run_split_fingerprint(none, "train", f1, &n);
	CHECK_MSG(n == 0 && f1[0] == '\0', "no data: no fingerprint");
	dlk_run_split_fingerprint(r1, "validation", f1, &n);
	CHECK_MSG(n == 0 && f1[0] == '\0', "a split the record does not name: none");
	cJSON_Delete(r1);
	cJSON_Delete(r2);
	cJSON_Delete(r3);
	cJSON_Delete(none);
	return CHECK_DONE();
}
