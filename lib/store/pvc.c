/* pvc:// stores: written in a following change. */
#include "lib/store/store.h"

struct dlk_store *dlk_store_open_pvc(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err)
{
	(void)opts;
	dlk_errf(err, DLK_EXIT_CONFIG, "'%s': pvc:// stores are not supported yet", url);
	return NULL;
}
