/* libFuzzer target: the XML an S3-compatible server answers with (lib/store/s3xml.c): errors,
 * object listings, multipart uploads, parts, completions. Corpus: tests/fuzz/s3xml/. */
#include "lib/store/s3xml.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct dlk_err err = DLK_ERR_INIT;
	struct s3_error e;
	struct s3_listing l = S3_LISTING_INIT;
	struct s3_parts p = S3_PARTS_INIT;
	char *id = NULL;

	s3xml_error(body, size, &e);
	s3xml_list_objects(body, size, &l, &err);
	s3_listing_release(&l);
	s3xml_upload_id(body, size, &id, &err);
	free(id);
	id = NULL;
	s3xml_find_upload(body, size, "p/sha256/ab", &id, &err);
	free(id);
	s3xml_list_parts(body, size, &p, &err);
	s3_parts_release(&p);
	s3xml_complete_ok(body, size, &err);
	return 0;
}
