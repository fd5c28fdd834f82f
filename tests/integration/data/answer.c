/* Test data for the kiln CLI tests, built with -DKILN_ANSWER=42. */
int kiln_test_value(void)
{
	return KILN_ANSWER;
}
