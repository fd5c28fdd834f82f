/*
 * kiln export PATH / kiln import PATH: entries moved between caches (a login
 * node's to compute nodes', say). PATH is a directory in the upstream tier's
 * layout, or a tar archive of one (.tar, .tar.gz, .tgz), made and unpacked
 * with tar(1) in a private temporary directory. The daemon does the work:
 * it writes the entries, or takes those that fit this node after checking
 * them as it checks upstream entries.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

static bool is_archive(const char *path)
{
	size_t n = strlen(path);
	return (n > 4 && strcmp(path + n - 4, ".tar") == 0) ||
	       (n > 7 && strcmp(path + n - 7, ".tar.gz") == 0) ||
	       (n > 4 && strcmp(path + n - 4, ".tgz") == 0);
}

/* An archive or compression suffix kiln does not write or read (.zip,
 * .tar.xz, ...), which would otherwise name a directory: NULL or it. */
static const char *foreign_archive(const char *path)
{
	static const char *const sfx[] = { ".zip", ".7z", ".rar", ".tar.bz2", ".tbz2", ".tbz",
					   ".tar.xz", ".txz", ".tar.zst", ".tzst", ".tar.lz4",
					   ".tar.lz", ".tar.Z", ".gz", ".bz2", ".xz", ".zst",
					   ".lz4", ".cpio", ".jar", NULL };
	size_t n = strlen(path);
	for (size_t i = 0; sfx[i] != NULL; i++) {
		size_t m = strlen(sfx[i]);
		if (n > m && strcmp(path + n - m, sfx[i]) == 0)
			return sfx[i];
	}
	return NULL;
}

/* Runs tar with argv (NULL-terminated, argv[0] "tar"); 0 or -1 after saying why. */
static int run_tar(char *const *argv)
{
	pid_t pid = fork();
	int status;
	if (pid == 0) {
		execvp("tar", argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		cli_error("cannot run tar: %s", strerror(errno));
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		cli_error("tar %s failed (status %d)", argv[1], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return -1;
	}
	return 0;
}

static void remove_tree(const char *dir)
{
	char *argv[] = { (char *)"rm", (char *)"-rf", (char *)"--", (char *)dir, NULL };
	pid_t pid = fork();
	if (pid == 0) {
		execvp("rm", argv);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* The directory the daemon works in: a new temporary one for an archive
 * (tmp, filled by mkdtemp), else path itself (made for an export); malloc'd,
 * or NULL after saying why. */
static char *transfer_dir(const char *path, bool archive, enum msg_op op, char *tmp)
{
	char *dir;

	if (archive) {
		if (mkdtemp(tmp) == NULL) {
			cli_error("cannot make a temporary directory: %s", strerror(errno));
			return NULL;
		}
		if ((dir = strdup(tmp)) == NULL) {
			cli_error("out of memory");
			remove_tree(tmp);
		}
		return dir;
	}
	if (op == OP_EXPORT && mkdir(path, 0700) != 0 && errno != EEXIST) {
		cli_error("cannot create %s: %s", path, strerror(errno));
		return NULL;
	}
	dir = realpath(path, NULL);
	if (dir == NULL)
		cli_error("cannot use %s: %s", path, strerror(errno));
	return dir;
}

/* The daemon's reply as the user sees it (path: what they named). */
static void transfer_report(const struct cli *cli, cJSON *reply, enum msg_op op,
			    const char *path, bool archive)
{
	uint64_t n = 0, kept = 0, skipped = 0, damaged = 0, aliases = 0;

	cJSON_DeleteItemFromObjectCaseSensitive(reply, "id");
	cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
	if (archive)
		cJSON_ReplaceItemInObjectCaseSensitive(reply, "dir", cJSON_CreateString(path));
	if (cli->json) {
		cli_print_json(reply);
		return;
	}
	cli_json_u64(reply, op == OP_EXPORT ? "exported" : "imported", &n);
	cli_json_u64(reply, "kept", &kept);
	cli_json_u64(reply, "skipped", &skipped);
	cli_json_u64(reply, "damaged", &damaged);
	cli_json_u64(reply, "aliases", &aliases);
	if (op == OP_EXPORT)
		printf("exported %llu %s to %s (%llu already there, %llu not exportable)\n",
		       (unsigned long long)n, cli_entries_word(n), path, (unsigned long long)kept,
		       (unsigned long long)skipped);
	else
		printf("imported %llu %s from %s (%llu already present, %llu skipped: another "
		       "compiler, other headers or not trusted; %llu damaged)\n",
		       (unsigned long long)n, cli_entries_word(n), path, (unsigned long long)kept,
		       (unsigned long long)skipped, (unsigned long long)damaged);
	if (aliases > 0)
		printf("%s %llu %s\n", op == OP_EXPORT ? "with" : "set", (unsigned long long)aliases,
		       aliases == 1 ? "alias" : "aliases");
}

static int transfer(struct cli *cli, int argc, char **argv, enum msg_op op)
{
	const char *refs[2];
	char tmp[] = "/tmp/kiln-transfer-XXXXXX", *dir = NULL;
	struct cli_conn c = { .wc.fd = -1 };
	struct msg_request req;
	cJSON *reply = NULL;
	bool archive;
	int nrefs, status;

	status = cli_parse_refs(cli, argc, argv, refs, 1, &nrefs);
	if (status >= 0)
		return status;
	if (nrefs != 1)
		return cli_usage_error(cli, "%s needs a PATH (a directory, or a .tar/.tar.gz file)",
				       op == OP_EXPORT ? "export" : "import");
	const char *foreign = is_archive(refs[0]) ? NULL : foreign_archive(refs[0]);
	if (foreign != NULL)
		return cli_usage_error(cli, "%s: export and import take a directory or a .tar, "
				       ".tar.gz or .tgz archive, not %s", refs[0], foreign);
	status = CLI_EXIT_ERROR;
	archive = is_archive(refs[0]);
	dir = transfer_dir(refs[0], archive, op, tmp);
	if (dir == NULL)
		return status;
	if (archive && op == OP_IMPORT) {
		/* Never the archive's owners or modes: the daemon wants a private tree. */
		char *targv[] = { (char *)"tar", (char *)"-x", (char *)"--no-same-owner",
				  (char *)"--no-same-permissions", (char *)"-f", (char *)refs[0],
				  (char *)"-C", dir, NULL };
		if (run_tar(targv) != 0)
			goto out;
	}
	if (cli_conn_require(cli, &c) < 0)
		goto out;
	cli_request_init(&req, op);
	req.dir = dir;
	int rc = cli_call(cli, &c, &req, &reply);
	req.dir = NULL;
	if (rc < 0 || cli_reply_check(reply, NULL) != ERR_NONE)
		goto out;
	if (archive && op == OP_EXPORT) {
		bool gz = strcmp(refs[0] + strlen(refs[0]) - 4, ".tar") != 0;
		char *targv[] = { (char *)"tar", (char *)(gz ? "-cz" : "-c"), (char *)"-f",
				  (char *)refs[0], (char *)"-C", dir, (char *)".", NULL };
		if (run_tar(targv) != 0)
			goto out;
	}
	transfer_report(cli, reply, op, refs[0], archive);
	status = cli_finish_stdout(CLI_EXIT_OK);
out:
	if (archive)
		remove_tree(tmp);
	free(dir);
	cJSON_Delete(reply);
	cli_conn_close(&c);
	return status;
}

int cmd_export(struct cli *cli, int argc, char **argv)
{
	return transfer(cli, argc, argv, OP_EXPORT);
}

int cmd_import(struct cli *cli, int argc, char **argv)
{
	return transfer(cli, argc, argv, OP_IMPORT);
}
