/* Test data for the kiln CLI tests: a build that fails. */
int kiln_test_value(void)
{
	return kiln_no_such_name;
}
