/*
 * What every Check unit suite ends with: run the suite (forked, as Check
 * does by default), print its results, exit 0 only when every test passed.
 */
#ifndef KILN_TESTS_UNIT_H
#define KILN_TESTS_UNIT_H

#include <check.h>
#include <stdlib.h>

static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
