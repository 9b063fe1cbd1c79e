/*-------------------------------------------------------------------------
 *
 * cmp_hooks.c
 *	  strcmp, strncmp, memcmp and strstr that tell libFuzzer what was
 *	  compared, for the fuzz harness (see wf_fuzz.c).
 *
 * libFuzzer learns the strings a program compares its input with (a
 * field name, a step type, "end") from hooks that a sanitizer's
 * interceptors of these functions call.  The harness runs without a
 * sanitizer runtime, inside a server whose own code must keep using the C
 * library, so the library defines these four functions itself and is
 * linked with -Bsymbolic-functions: the calls made by the code compiled
 * into wfengine_fuzz.so bind to them, while the server and every other
 * library still find the C library's first.  Each compares like the C
 * function and reports to libFuzzer's __sanitizer_weak_hook_*, which does
 * nothing outside a fuzzing callback.
 *
 * This file is compiled without coverage instrumentation, so that the
 * comparison loops add no coverage features of their own.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  fuzz/cmp_hooks.c
 *
 *-------------------------------------------------------------------------
 */
#include <stddef.h>
#include <string.h>

/* defined by libFuzzer's runtime, which is linked into the same library */
extern void __sanitizer_weak_hook_strcmp(void *caller_pc, const char *s1,
										 const char *s2, int result);
extern void __sanitizer_weak_hook_strncmp(void *caller_pc, const char *s1,
										  const char *s2, size_t n, int result);
extern void __sanitizer_weak_hook_memcmp(void *caller_pc, const void *s1,
										 const void *s2, size_t n, int result);
extern void __sanitizer_weak_hook_strstr(void *caller_pc, const char *s1,
										 const char *s2, char *result);

/*
 * strcmp compares two strings and reports them to libFuzzer.
 */
int
strcmp(const char *s1, const char *s2)
{
	const unsigned char *a = (const unsigned char *) s1;
	const unsigned char *b = (const unsigned char *) s2;
	int			result;

	while (*a != '\0' && *a == *b)
		a++, b++;
	result = (int) *a - (int) *b;
	__sanitizer_weak_hook_strcmp(__builtin_return_address(0), s1, s2, result);
	return result;
}

/*
 * strncmp compares at most n bytes of two strings and reports them.
 */
int
strncmp(const char *s1, const char *s2, size_t n)
{
	const unsigned char *a = (const unsigned char *) s1;
	const unsigned char *b = (const unsigned char *) s2;
	size_t		i = 0;
	int			result = 0;

	while (i < n && a[i] != '\0' && a[i] == b[i])
		i++;
	if (i < n)
		result = (int) a[i] - (int) b[i];
	__sanitizer_weak_hook_strncmp(__builtin_return_address(0), s1, s2, n, result);
	return result;
}

/*
 * memcmp compares n bytes and reports them.
 */
int
memcmp(const void *s1, const void *s2, size_t n)
{
	const unsigned char *a = s1;
	const unsigned char *b = s2;
	size_t		i = 0;
	int			result = 0;

	while (i < n && a[i] == b[i])
		i++;
	if (i < n)
		result = (int) a[i] - (int) b[i];
	__sanitizer_weak_hook_memcmp(__builtin_return_address(0), s1, s2, n, result);
	return result;
}

/*
 * strstr finds needle in haystack and reports both.
 */
char *
strstr(const char *haystack, const char *needle)
{
	size_t		len = strlen(needle);
	const char *p;
	char	   *result = NULL;

	for (p = haystack;; p++)
	{
		size_t		i = 0;

		while (i < len && p[i] == needle[i])
			i++;
		if (i == len)
		{
			result = (char *) p;
			break;
		}
		if (*p == '\0')
			break;
	}
	__sanitizer_weak_hook_strstr(__builtin_return_address(0), haystack, needle, result);
	return result;
}
