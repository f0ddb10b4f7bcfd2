/* dlk: the program. Everything else is in the command table (commands/commands.h). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands/commands.h"
#include "lib/nn/backend.h"

/* 1 when this process is the dynamic loader run as a program (ld-linux-x86-64.so.2 [--library-path
 * DIR] dlk ..., as the GPU kit starts dlk): /proc/self/exe is then the loader, and running it
 * again with our argv would load "the program" named by our first argument. */
static int started_by_loader(void)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld.so", 5);
}

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
	if (core && !started_by_loader() && !setenv("OPENBLAS_CORETYPE", core, 1))
		execv("/proc/self/exe", argv);
	return dlk_main(argc, argv);
}
