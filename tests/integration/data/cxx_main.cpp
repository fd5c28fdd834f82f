// Test data for the kiln CLI tests: C++ in two translation units.
#include <numeric>
#include <vector>

int kiln_helper_scale();

extern "C" int kiln_test_value(void)
{
	std::vector<int> v(10);
	std::iota(v.begin(), v.end(), 1);
	return std::accumulate(v.begin(), v.end(), 0) * kiln_helper_scale();
}
