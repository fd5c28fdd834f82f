/* A client built against an installed kiln (pkg-config kiln): checks that
 * the header and the library say one version, gets a program through kilnd,
 * calls it, and prints its result. */
#include <stdio.h>
#include <string.h>

#include <kiln/kiln.h>

int main(int argc, char **argv)
{
	static const char text[] = "int answer(void) { return 42; }\n";
	struct kiln_source src = { .name = "answer.c", .text = text };
	struct kiln_request req = { .sources = &src, .nsources = 1, .alias = "install:answer" };
	struct kiln_program *p;
	struct kiln *k;
	int (*fn)(void);

	/* The header and the library say the same version. */
	if (strcmp(kiln_version(), KILN_VERSION) != 0) {
		fprintf(stderr, "libkiln %s, kiln.h %s\n", kiln_version(), KILN_VERSION);
		return 1;
	}
	if (argc != 2 || kiln_open(argv[1], &k) != KILN_OK)
		return 2;
	if (kiln_get(k, &req, &p) != KILN_OK) {
		fprintf(stderr, "kiln_get: %s\n", kiln_errmsg(k));
		return 1;
	}
	*(void **)&fn = kiln_sym(p, "answer");
	printf("answer %d\n", fn != NULL ? fn() : -1);
	kiln_close(k);
	return fn != NULL && fn() == 42 ? 0 : 1;
}
