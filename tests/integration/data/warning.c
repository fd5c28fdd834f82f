/* Test data for the kiln CLI tests: a build that succeeds with a warning. */
#warning "kiln-test-warning"

int kiln_test_value(void)
{
	return 7;
}
