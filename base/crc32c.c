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

/*
 * The crc32 instruction has a latency of three cycles and a throughput of
 * one, so the hardware path runs three streams at once and joins them.
 * Joining needs the CRC "shifted" over the bytes of the streams after it:
 * a linear map over GF(2), built once as tables for two block sizes.
 */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_long[4][256], crc_short[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(mat, mat[n]);
}

/* The operator that runs a CRC register over len zero bytes (len a power
 * of two). */
static void zeros_op(uint32_t *even, size_t len) {
    uint32_t odd[32], row = 1;
    odd[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    for (;;) {
        gf2_square(even, odd); /* eight, then doubling */
        len >>= 1;
        if (!len) return;
        gf2_square(odd, even);
        len >>= 1;
        if (!len) break;
    }
    memcpy(even, odd, sizeof odd);
}

static void zeros_table(uint32_t table[4][256], size_t len) {
    uint32_t op[32];
    zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++) {
        table[0][n] = gf2_times(op, n);
        table[1][n] = gf2_times(op, n << 8);
        table[2][n] = gf2_times(op, n << 16);
        table[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
           table[3][crc >> 24];
}

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
    zeros_table(crc_long, CRC_LONG);
    zeros_table(crc_short, CRC_SHORT);
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
__attribute__((target("sse4.2"))) static uint64_t crc_hw_blocks(uint64_t c0, const uint8_t **pp,
                                                                size_t *lenp, size_t block,
                                                                uint32_t table[4][256]) {
    const uint8_t *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + block;
        do {
            uint64_t w0, w1, w2;
            memcpy(&w0, p, 8);
            memcpy(&w1, p + block, 8);
            memcpy(&w2, p + 2 * block, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            p += 8;
        } while (p < end);
        c0 = crc_shift(table, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = crc_shift(table, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * block;
        len -= 3 * block;
    }
    *pp = p;
    *lenp = len;
    return c0;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t crc, const uint8_t *p,
                                                             size_t len) {
    uint64_t c = crc;
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    c = crc_hw_blocks(c, &p, &len, CRC_LONG, crc_long);
    c = crc_hw_blocks(c, &p, &len, CRC_SHORT, crc_short);
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
