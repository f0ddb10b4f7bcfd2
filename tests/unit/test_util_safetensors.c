/* The safetensors reader (lib/util/safetensors.h): a header that names a tensor twice is refused,
 * whether the JSON repeats the key or a name is cut short by a \u0000 escape (each would leave a
 * tensor that no lookup by name reaches); distinct names read as written. */
#include "tests/unit/check.h"

#include <stdint.h>
#include <stdlib.h>

#include "lib/util/safetensors.h"

/* parses a file of HEADER (padded to 8 bytes) and 24 data bytes; 0 when it parses */
static int parse(const char *header, struct dlk_err *err)
{
	size_t hl = (strlen(header) + 7) / 8 * 8, len = 8 + hl + 24;
	unsigned char *buf = calloc(1, len);
	struct dlk_st_file f;
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memset(buf + 8, ' ', hl);
	memcpy(buf + 8, header, strlen(header));
	int rc = dlk_st_parse(buf, len, "w.safetensors", &f, err);
	if (!rc) {
		CHECK_MSG(f.n == 2 && dlk_st_find(&f, "a") && dlk_st_find(&f, "b"), "both tensors are found by name");
		dlk_st_release(&f);
	}
	free(buf);
	return rc;
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;

	CHECK_MSG(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
	                "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]}}",
	                &err) == 0,
	          "two tensors of distinct names parse: %s", err.msg);

	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
	            "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]}}",
	            &err) != 0);
	CHECK_CONTAINS(err.msg, "w.safetensors: tensor name 'a' appears twice in the header");

	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
	            "\"a\\u0000x\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[12,24]}}",
	            &err) != 0);
	CHECK_CONTAINS(err.msg, "tensor name 'a' appears twice");
	return CHECK_DONE();
}
