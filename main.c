/* dlk: the program. Everything else is in the command table (commands/commands.h). */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "commands/commands.h"
#include "lib/nn/backend.h"

int main(int argc, char **argv)
{
	/* libcurl runs with CURLOPT_NOSIGNAL (threads), so a closed peer must not kill us with
	 * SIGPIPE: writes fail with EPIPE instead, which every caller handles */
	signal(SIGPIPE, SIG_IGN);
	/* OpenBLAS chose its kernels before main() from a CPU table older than this CPU: run again
	 * with the right ones (see dlk_cpu_blas_coretype). The variable is inherited, so this
	 * happens once (and never when the user set it); if exec fails, dlk carries on, correct but
	 * slower, and `dlk serve` says so. */
	const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : dlk_cpu_blas_coretype();
	if (core && !setenv("OPENBLAS_CORETYPE", core, 1))
		execv("/proc/self/exe", argv);
	return dlk_main(argc, argv);
}
