/*
 * kiln-observe.so's hooks on the programs a toolchain starts (the exec
 * family and posix_spawn), apart from its hooks on files (observe.c):
 * before each exec, the program about to run with its identity (X) and the
 * `#!` interpreters the kernel will start instead (I, observe_image.c);
 * after a failed one, F; after a spawn, the child's pid and program (P).
 * trace.c matches each to the start record of the image that runs
 * (observe.c's H), so an image that never says hello is seen as
 * unobserved. A name without '/' is looked up along PATH here too, so that
 * every directory looked in is a record.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "observe_image.h"
#include "observe_int.h"
#include "observe_path.h"
#include "trace_rec.h"

extern char **environ;

REAL(stat); REAL(execve); REAL(execv); REAL(execvp); REAL(execvpe);
REAL(posix_spawn); REAL(posix_spawnp);

/* An X record was written for the exec in progress: its failure must be
 * recorded (F), and only then (trace.c counts X against H and F). */
static bool exec_noted;

/*
 * After the X or P record of an exec in pid: the `#!` interpreters the
 * kernel will start for it, one I record per level, each with its
 * identity (it answers the exec with its own start record, and is an
 * input like the script). shell: execvp's rule, under which a file that
 * is neither a script nor a binary the kernel knows runs under /bin/sh.
 */
static void note_interpreters(long pid, const char *abs, bool shell)
{
	char cur[PATH_MAX + 8], interp[PATH_MAX], head[256];
	struct stat st;
	snprintf(cur, sizeof(cur), "%s", abs);
	RESOLVE(stat);
	for (int depth = 0; depth < IMAGE_MAX_DEPTH; depth++) {
		if (!image_interpreter(cur, shell, interp, sizeof(interp)))
			return;
		if (!observe_absolute(AT_FDCWD, interp, cur, sizeof(cur), NULL) || real_stat(cur, &st) != 0)
			return; /* the exec fails: its F record follows */
		image_ident_head(head, sizeof(head), REC_INTERP, pid, "", &st);
		observe_emit(head, cur);
		shell = false;
	}
}

/* Before an exec: the program about to run, with its identity. */
static void note_exec(const char *path, bool shell)
{
	exec_noted = false;
	char abs[PATH_MAX + 8];
	struct stat st;
	if (!observe_tracing() || !observe_absolute(AT_FDCWD, path, abs, sizeof(abs), NULL))
		return;
	RESOLVE(stat);
	if (real_stat(path, &st) != 0) {
		observe_note_probe(AT_FDCWD, path, -1, errno, 0);
		return;
	}
	observe_emit_ident(REC_EXEC, abs, &st);
	note_interpreters((long)getpid(), abs, shell);
	exec_noted = true;
}

static void note_exec_failed(int err)
{
	char head[64];
	if (!exec_noted || !observe_tracing())
		return;
	exec_noted = false;
	snprintf(head, sizeof(head), "%c %d %d", REC_EXEC_FAILED, (int)getpid(), err);
	observe_emit(head, "");
}

/*
 * The search execvp and posix_spawnp make for a name without '/', done
 * here too so that every directory looked in is recorded (glibc's own
 * attempts do not pass through the hooks). Fills found with the first
 * regular executable file, or leaves it empty.
 */
static void observe_search_path(const char *name, char *found, size_t cap)
{
	found[0] = '\0';
	if (name == NULL || strchr(name, '/') != NULL || name[0] == '\0')
		return;
	const char *p = observe_env_get(environ, "PATH");
	if (p == NULL)
		p = "/bin:/usr/bin";
	while (*p != '\0') {
		size_t n = strcspn(p, ":");
		char cand[PATH_MAX + 8];
		struct stat st;
		if (n == 0)
			snprintf(cand, sizeof(cand), "%s", name);
		else
			snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, p, name);
		RESOLVE(stat);
		int rc = real_stat(cand, &st);
		bool ok = rc == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0;
		if (rc != 0)
			observe_note_probe(AT_FDCWD, cand, -1, errno, 0);
		if (ok) {
			snprintf(found, cap, "%s", cand);
			return;
		}
		p += n;
		if (*p == ':')
			p++;
	}
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	RESOLVE(execve);
	note_exec(path, false);
	int rc = real_execve(path, argv, envp);
	note_exec_failed(errno);
	return rc;
}

int execv(const char *path, char *const argv[])
{
	RESOLVE(execv);
	note_exec(path, false);
	int rc = real_execv(path, argv);
	note_exec_failed(errno);
	return rc;
}

int execvp(const char *file, char *const argv[])
{
	char found[PATH_MAX + 8];
	RESOLVE(execvp);
	observe_search_path(file, found, sizeof(found));
	note_exec(found[0] != '\0' ? found : file, true);
	int rc = real_execvp(file, argv);
	note_exec_failed(errno);
	return rc;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	char found[PATH_MAX + 8];
	RESOLVE(execvpe);
	observe_search_path(file, found, sizeof(found));
	note_exec(found[0] != '\0' ? found : file, true);
	int rc = real_execvpe(file, argv, envp);
	note_exec_failed(errno);
	return rc;
}

static void note_spawned(pid_t child, const char *path)
{
	char head[256], abs[PATH_MAX + 8], pre[24];
	struct stat st;
	if (!observe_tracing() || !observe_absolute(AT_FDCWD, path, abs, sizeof(abs), NULL))
		return;
	RESOLVE(stat);
	if (real_stat(path, &st) != 0)
		memset(&st, 0, sizeof(st));
	snprintf(pre, sizeof(pre), " %d", (int)child);
	image_ident_head(head, sizeof(head), REC_SPAWN, (long)getpid(), pre, &st);
	observe_emit(head, abs);
	note_interpreters((long)child, abs, false);
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	pid_t child = 0;
	RESOLVE(posix_spawn);
	int rc = real_posix_spawn(&child, path, fa, attr, argv, envp);
	if (rc == 0)
		note_spawned(child, path);
	if (pid != NULL)
		*pid = child;
	return rc;
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	char found[PATH_MAX + 8];
	pid_t child = 0;
	RESOLVE(posix_spawnp);
	observe_search_path(file, found, sizeof(found));
	int rc = real_posix_spawnp(&child, file, fa, attr, argv, envp);
	if (rc == 0)
		note_spawned(child, found[0] != '\0' ? found : file);
	if (pid != NULL)
		*pid = child;
	return rc;
}

