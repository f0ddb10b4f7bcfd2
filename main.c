/* dlk: dispatch. The command table lives in commands/commands.h. */
#include "commands/commands.h"

int main(int argc, char **argv)
{
	return dlk_main(argc, argv);
}
