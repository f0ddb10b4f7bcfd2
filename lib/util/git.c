#include "lib/util/git.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* runs git -C dir ARGS..., its stdout (at most n - 1 bytes, NUL-terminated) in out */
static int git(const char *dir, const char *const args[], char *out, size_t n)
{
	const char *argv[8] = { "git", "-C", dir };
	posix_spawn_file_actions_t fa;
	int fd[2], status, rc;
	size_t got = 0, i;
	pid_t pid;

	for (i = 0; args[i] && i < 4; i++)
		argv[3 + i] = args[i];
	argv[3 + i] = NULL;
	if (pipe2(fd, O_CLOEXEC))
		return -1;
	/* posix_spawn, not fork: the caller may have threads (a BLAS pool) */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, "git", &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	close(fd[1]);
	for (;;) {
		/* what does not fit is read and dropped, so that git can finish */
		char sink[512];
		char *dst = got + 1 < n ? out + got : sink;
		ssize_t r = read(fd[0], dst, dst == sink ? sizeof(sink) : n - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (dst != sink)
			got += (size_t)r;
	}
	out[got] = '\0';
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int dlk_git_head(const char *dir, char commit[65], int *dirty)
{
	static const char *const head[] = { "rev-parse", "--verify", "HEAD", NULL };
	static const char *const status[] = { "status", "--porcelain", "--untracked-files=no", NULL };
	char out[4096];
	size_t n;

	commit[0] = '\0';
	*dirty = 0;
	if (git(dir, head, out, sizeof(out)))
		return -1;
	n = strspn(out, "0123456789abcdef");
	if ((n != 40 && n != 64) || (out[n] && !isspace((unsigned char)out[n])))
		return -1;
	memcpy(commit, out, n);
	commit[n] = '\0';
	if (git(dir, status, out, sizeof(out)) == 0)
		*dirty = out[0] != '\0';
	return 0;
}
