/*
 * Unit tests of a waiting kiln-exec's start (daemon/standby_msg.c): what is
 * packed comes back whole (an empty directory, no environment, long and
 * empty strings), and every malformed buffer is refused: each truncation,
 * a byte too many, a wrong magic or length, counts the buffer cannot hold,
 * no argument, a missing NUL.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "standby_msg.h"
#include "unit.h"

static void roundtrip(const char *cwd, char *const *argv, char *const *env)
{
	size_t len = 0;
	char *buf = standby_pack(cwd, argv, env, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(standby_length((const unsigned char *)buf), len);
	char *c, **a, **e;
	ck_assert_int_eq(standby_unpack(buf, len, &c, &a, &e), 0);
	ck_assert_str_eq(c, cwd != NULL ? cwd : "");
	size_t i = 0;
	for (; argv[i] != NULL; i++)
		ck_assert_str_eq(a[i], argv[i]);
	ck_assert_ptr_null(a[i]);
	for (i = 0; env != NULL && env[i] != NULL; i++)
		ck_assert_str_eq(e[i], env[i]);
	ck_assert_ptr_null(e[i]);
	free(a);
	free(e);
	free(buf);
}

START_TEST(packed_comes_back)
{
	char *argv[] = { "/usr/libexec/kiln-exec", "run", "123", "--", "/usr/bin/cc", "", "-O2", NULL };
	char *env[] = { "PATH=/usr/bin", "EMPTY=", "KILN_TRACE_TOKEN=abc", NULL };
	roundtrip("/tmp/b-1", argv, env);
	roundtrip("", argv, env);
	roundtrip(NULL, argv, (char *[]){ NULL });
	roundtrip("/", (char *[]){ "x", NULL }, NULL);
	char *big = malloc(200001);
	memset(big, 'a', 200000);
	big[200000] = '\0';
	roundtrip(big, (char *[]){ big, "y", NULL }, (char *[]){ big, NULL });
	free(big);
}
END_TEST

START_TEST(no_argument_or_too_big_is_not_packed)
{
	size_t len;
	ck_assert_ptr_null(standby_pack("/", (char *[]){ NULL }, NULL, &len));
	ck_assert_ptr_null(standby_pack("/", NULL, NULL, &len));
	char *big = malloc(STANDBY_MAX);
	memset(big, 'b', STANDBY_MAX - 1);
	big[STANDBY_MAX - 1] = '\0';
	ck_assert_ptr_null(standby_pack("/", (char *[]){ big, NULL }, NULL, &len));
	free(big);
}
END_TEST

static int unpack_copy(const char *buf, size_t len)
{
	char *copy = malloc(len + 1), *c, **a, **e;
	memcpy(copy, buf, len);
	int rc = standby_unpack(copy, len, &c, &a, &e);
	if (rc == 0) {
		free(a);
		free(e);
	} else {
		ck_assert_ptr_null(a);
		ck_assert_ptr_null(e);
	}
	free(copy);
	return rc;
}

/* The little-endian u32 at p set to v. */
static void set32(char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (char)(v >> (8 * i));
}

START_TEST(malformed_is_refused)
{
	size_t len;
	char *buf = standby_pack("/d", (char *[]){ "a", "bc", NULL }, (char *[]){ "X=1", NULL }, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(unpack_copy(buf, len), 0);
	/* Every truncation (the length field then disagrees), and one more byte. */
	for (size_t n = 0; n < len; n++)
		ck_assert_msg(unpack_copy(buf, n) == -EINVAL, "truncated to %zu of %zu", n, len);
	char *more = malloc(len + 1);
	memcpy(more, buf, len);
	more[len] = 'z';
	set32(more + 4, (uint32_t)len + 1);
	ck_assert_int_eq(unpack_copy(more, len + 1), -EINVAL);   /* bytes after the last string */
	free(more);
	char *bad = malloc(len);
	struct {
		size_t at;
		uint32_t v;
	} fields[] = {
		{ 8, 0 },            /* no argument */
		{ 8, 3 },            /* one argument more than there is */
		{ 12, 2 },           /* a variable more */
		{ 8, 1u << 30 },     /* counts no buffer of this size holds */
		{ 12, 0xffffffffu },
		{ 4, (uint32_t)len - 1 },
		{ 4, STANDBY_MAX + 1 },
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		memcpy(bad, buf, len);
		set32(bad + fields[i].at, fields[i].v);
		ck_assert_msg(unpack_copy(bad, len) == -EINVAL, "field at %zu = %u", fields[i].at,
			      fields[i].v);
	}
	memcpy(bad, buf, len);
	bad[0] = 'J';
	ck_assert_int_eq(unpack_copy(bad, len), -EINVAL);
	ck_assert_uint_eq(standby_length((const unsigned char *)bad), 0);
	memcpy(bad, buf, len);
	bad[len - 1] = 'x';   /* the last string without its NUL */
	ck_assert_int_eq(unpack_copy(bad, len), -EINVAL);
	free(bad);
	free(buf);
}
END_TEST

static Suite *standby_msg_suite(void)
{
	Suite *s = suite_create("standby_msg");
	TCase *t = tcase_create("standby_msg");
	tcase_add_test(t, packed_comes_back);
	tcase_add_test(t, no_argument_or_too_big_is_not_packed);
	tcase_add_test(t, malformed_is_refused);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return unit_run(standby_msg_suite());
}
