/*
 * Job sizes from the batch system's environment (jobsize.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jobsize.h"

long jobsize_parse(const char *s)
{
	long v = 0;
	if (s == NULL || *s == '\0')
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (*s - '0');
		if (v > JOBSIZE_MAX)
			return 0;
	}
	return v;
}

/* Reads digits at *p into *v (at most 9 of them, so no overflow); false
 * when there are none. */
static bool digits(const char **p, long *v)
{
	const char *s = *p;
	long n = 0;
	int k = 0;
	while (*s >= '0' && *s <= '9' && k < 10) {
		n = n * 10 + (*s++ - '0');
		k++;
	}
	if (k == 0 || k == 10)
		return false;
	*p = s;
	*v = n;
	return true;
}

/* The count of one bracket's ranges ("0001-0128,0200"), *p just after '[';
 * leaves *p after ']'. 0 when malformed. */
static long bracket(const char **p)
{
	const char *s = *p;
	long count = 0;
	for (;;) {
		long a, b;
		if (!digits(&s, &a))
			return 0;
		b = a;
		if (*s == '-') {
			s++;
			if (!digits(&s, &b) || b < a)
				return 0;
		}
		count += b - a + 1;
		if (count > JOBSIZE_MAX)
			return 0;
		if (*s == ']')
			break;
		if (*s++ != ',')
			return 0;
	}
	*p = s + 1;
	return count;
}

long jobsize_hostlist_count(const char *list)
{
	const char *s = list;
	long total = 0;
	if (s == NULL || *s == '\0')
		return 0;
	for (;;) {
		/* One item: a name whose brackets multiply. */
		long hosts = 1;
		bool any = false;
		while (*s != '\0' && *s != ',') {
			if (*s == ']')
				return 0;
			if (*s == '[') {
				s++;
				long n = bracket(&s);
				if (n == 0 || hosts > JOBSIZE_MAX / n)
					return 0;
				hosts *= n;
			} else {
				s++;
			}
			any = true;
		}
		if (!any)
			return 0;
		total += hosts;
		if (total > JOBSIZE_MAX)
			return 0;
		if (*s == '\0')
			return total;
		s++;   /* ',' */
	}
}

long jobsize_from_env(const char *(*get)(const char *name))
{
	static const char *const counts[] = { "KILN_JOB_NODES", "SLURM_JOB_NUM_NODES",
					      "SLURM_NNODES" };
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		long n = jobsize_parse(get(counts[i]));
		if (n > 0)
			return n;
	}
	return jobsize_hostlist_count(get("SLURM_JOB_NODELIST"));
}

static const char *process_env(const char *name)
{
	return getenv(name);
}

long jobsize_here(void)
{
	return jobsize_from_env(process_env);
}

double jobsize_looks_per_s(long nodes, double job_looks)
{
	double r = job_looks / (double)(nodes > 0 ? nodes : 1);
	if (r < JOBSIZE_NODE_MIN_LOOKS_PER_S)
		return JOBSIZE_NODE_MIN_LOOKS_PER_S;
	return r < JOBSIZE_NODE_LOOKS_PER_S ? r : JOBSIZE_NODE_LOOKS_PER_S;
}
