/* dlk: the program. Everything else is in the command table (commands/commands.h). */
#include <signal.h>

#include "commands/commands.h"

int main(int argc, char **argv)
{
	/* libcurl runs with CURLOPT_NOSIGNAL (threads), so a closed peer must not kill us with
	 * SIGPIPE: writes fail with EPIPE instead, which every caller handles */
	signal(SIGPIPE, SIG_IGN);
	return dlk_main(argc, argv);
}
