/* What every libcurl user in dlk shares: the one-time global set-up and the User-Agent. */
#ifndef DLK_UTIL_CURL_H
#define DLK_UTIL_CURL_H

#ifndef DLK_VERSION
#define DLK_VERSION "dev"
#endif
#define DLK_USER_AGENT "dlk/" DLK_VERSION

/* curl_global_init(), exactly once per process, whichever thread calls first. Call it before
 * the first curl_easy_init(). */
void dlk_curl_global_init(void);

#endif
