#include "lib/util/curl.h"

#include <curl/curl.h>
#include <pthread.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* curl_global_init is not thread-safe before libcurl 7.84: pthread_once makes the first caller
 * do it, whichever thread gets there first. */
void dlk_curl_global_init(void)
{
	pthread_once(&curl_once, curl_init);
}
