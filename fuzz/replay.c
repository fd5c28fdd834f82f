/*
 * Runs a fuzz harness's LLVMFuzzerTestOneInput over files and directories of
 * inputs, without libFuzzer: `meson test` replays the seed corpus (and every
 * crasher ever found) this way with the project's compiler, as built and
 * under ASan/UBSan. Exit status 0 when every input ran; a failed assertion
 * or a sanitizer report aborts with the input's name on stderr.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	fprintf(stderr, "replay: %s (%ld bytes)\n", path, len);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0, bad = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s does not exist\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]) != 0;
			n++;
			continue;
		}
		d = opendir(argv[i]);
		while (d && (e = readdir(d)) != NULL) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			bad |= run_file(path) != 0;
			n++;
		}
		if (d)
			closedir(d);
	}
	printf("replayed %d inputs\n", n);
	return bad || n == 0 ? 1 : 0;
}
