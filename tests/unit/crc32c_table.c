/*
 * crc32c_table.c - base/crc32c.c compiled a second time, under other names
 * and without its x86-64 branch, so test_base can run the portable
 * slicing-by-8 path side by side with whichever path the library picked
 * (the SSE4.2 instruction on most machines).
 *
 * System headers come first: they must see the real target macros.  Only
 * then is __x86_64__ hidden from crc32c.c.
 */
#define st_crc32c st_crc32c_table
#define st_crc32c_hw st_crc32c_table_hw
#include "st_base.h"

#include <pthread.h>
#include <string.h>

#undef __x86_64__
#include "crc32c.c"
