/*
 * crc32c.c - CRC32C (Castagnoli, reflected polynomial 0x82F63B78) as used by
 * record batch v2.  The SSE4.2 crc32 instruction is used when the CPU has it
 * (checked once); otherwise slicing-by-8 tables.
 */
#include "st_base.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t len) {
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
              crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
              crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t crc, const uint8_t *p,
                                                             size_t len) {
    uint64_t c = crc;
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t st_crc32c(uint32_t crc, const void *data, size_t len) {
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
#if defined(__x86_64__)
    if (crc_hw) return ~crc_hw_run(crc, data, len);
#endif
    return ~crc_sw(crc, data, len);
}

int st_crc32c_hw(void) {
    pthread_once(&crc_once, crc_init);
    return crc_hw;
}
