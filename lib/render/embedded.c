#include "lib/render/embedded.h"

#include <string.h>

const struct dlk_embedded *dlk_embedded_find(const struct dlk_embedded *table, const char *name)
{
	for (; table && table->name; table++)
		if (!strcmp(table->name, name))
			return table;
	return NULL;
}
