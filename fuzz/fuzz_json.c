/*
 * libFuzzer harness for the strict JSON reader (proto/json_read.c), which
 * reads every reply a libkiln process gets. Differential, against cJSON's
 * parser: whatever the reader accepts, cJSON accepts and prints alike
 * (same members in the same order, the same numbers and strings); the
 * reader never reads past the bytes it was given (the input is copied to
 * an allocation of exactly its size, so ASan sees any overread).
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, data, size);
	cJSON *mine = json_read(copy, size);
	if (mine != NULL) {
		/* cJSON wants a terminated string to compare against. */
		char *text = malloc(size + 1);
		FUZZ_CHECK(text != NULL);
		memcpy(text, data, size);
		text[size] = '\0';
		cJSON *theirs = cJSON_ParseWithLength(text, size);
		FUZZ_CHECK(theirs != NULL);
		char *pm = cJSON_PrintUnformatted(mine), *pt = cJSON_PrintUnformatted(theirs);
		FUZZ_CHECK(pm != NULL && pt != NULL && strcmp(pm, pt) == 0);
		free(pm);
		free(pt);
		cJSON_Delete(theirs);
		free(text);
		cJSON_Delete(mine);
	}
	free(copy);
	return 0;
}
