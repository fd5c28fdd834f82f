// Test data for the kiln CLI tests: the second C++ translation unit.
int kiln_helper_scale()
{
	return 2;
}
