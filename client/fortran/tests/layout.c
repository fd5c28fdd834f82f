/*
 * The sizes, field offsets and status codes of kiln.h as the C compiler sees
 * them, for test_kiln.f90 to compare with the bind(C) types and parameters of
 * module kiln: a kiln.h change that the module misses fails the test.
 */
#include <stddef.h>
#include <string.h>

#include <kiln/kiln.h>

/* The value named name ("kiln_request", "kiln_request%alias", "KILN_EIO"),
 * or -1000 for an unknown name. Called from Fortran. */
long kiln_f90_c_layout(const char *name);

#define SIZE(s) { #s, (long)sizeof(struct s) }
#define OFFSET(s, m) { #s "%" #m, (long)offsetof(struct s, m) }
#define CODE(c) { #c, (long)(c) }

static const struct {
	const char *name;
	long value;
} layout[] = {
	SIZE(kiln_source),
	OFFSET(kiln_source, name),
	OFFSET(kiln_source, text),
	OFFSET(kiln_source, len),
	OFFSET(kiln_source, path),
	SIZE(kiln_request),
	OFFSET(kiln_request, toolchain),
	OFFSET(kiln_request, output),
	OFFSET(kiln_request, args),
	OFFSET(kiln_request, nargs),
	OFFSET(kiln_request, sources),
	OFFSET(kiln_request, nsources),
	OFFSET(kiln_request, alias),
	OFFSET(kiln_request, label),
	OFFSET(kiln_request, pch),
	OFFSET(kiln_request, npch),
	OFFSET(kiln_request, host_compiler),
	SIZE(kiln_options),
	OFFSET(kiln_options, socket_path),
	OFFSET(kiln_options, autospawn),
	OFFSET(kiln_options, kilnd_path),
	OFFSET(kiln_options, cache_dir),
	SIZE(kiln_stats),
	OFFSET(kiln_stats, requests),
	OFFSET(kiln_stats, local_hits),
	OFFSET(kiln_stats, loads),
	CODE(KILN_OK),
	CODE(KILN_EINVAL),
	CODE(KILN_ENOMEM),
	CODE(KILN_ECONNECT),
	CODE(KILN_EPROTO),
	CODE(KILN_EIO),
	CODE(KILN_ENOTFOUND),
	CODE(KILN_EBUILD),
	CODE(KILN_ETIMEDOUT),
	CODE(KILN_ELOAD),
	CODE(KILN_EREFUSED),
	CODE(KILN_EDENIED),
	CODE(KILN_EBUSY),
	CODE(KILN_EDAEMON),
	CODE(KILN_ECUDA),
	CODE(KILN_ECLAIMED),
	CODE(KILN_EHELD),
};

long kiln_f90_c_layout(const char *name)
{
	for (size_t i = 0; i < sizeof(layout) / sizeof(layout[0]); i++) {
		if (strcmp(layout[i].name, name) == 0)
			return layout[i].value;
	}
	return -1000;
}
