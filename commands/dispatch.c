#include <stdio.h>
#include "commands/commands.h"
int dlk_main(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "usage: dlk <command>\n");
	return 2;
}
