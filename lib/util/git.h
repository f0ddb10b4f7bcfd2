/* The git commit a project's files are at, for provenance. */
#ifndef DLK_UTIL_GIT_H
#define DLK_UTIL_GIT_H

/* The commit checked out in the git work tree that holds dir (40 or 64 hex digits into commit)
 * and whether tracked files differ from it (*dirty). Runs `git` (no shell); returns 0, or -1
 * when dir is in no work tree, git is not installed or it fails: there is then no commit to
 * record, which is not an error of the caller's. */
int dlk_git_head(const char *dir, char commit[65], int *dirty);

#endif
