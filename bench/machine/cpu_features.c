#include "machine/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* AMX by CPUID leaf 7 (EDX bit 24 AMX-TILE, bit 22 AMX-BF16), usable only
 * where the OS saves the tile state (XCR0 bits 17 and 18, read with
 * XGETBV, which CPUID leaf 1's OSXSAVE bit allows): GCC 12 knows
 * "amx-tile" for __builtin_cpu_supports, clang 14 does not. */
static void read_amx(bool *tile, bool *bf16) {
    unsigned a, b, c, d;
    *tile = *bf16 = false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17) || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    *tile = d & (1u << 24);
    *bf16 = d & (1u << 22);
}
#endif

bench_cpu_features bench_cpu_features_read(void) {
    bench_cpu_features f = {0};
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.sse3 = __builtin_cpu_supports("sse3");
    f.ssse3 = __builtin_cpu_supports("ssse3");
    f.sse4_2 = __builtin_cpu_supports("sse4.2");
    f.avx = __builtin_cpu_supports("avx");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512cd = __builtin_cpu_supports("avx512cd");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
    read_amx(&f.amx_tile, &f.amx_bf16);
#endif
    return f;
}

const char *bench_cpu_features_level(const bench_cpu_features *f) {
    bool avx512 = f->avx512f && f->avx512dq && f->avx512cd && f->avx512bw && f->avx512vl;
    if (avx512 && f->avx512_bf16 && f->amx_tile && f->amx_bf16) return "AMX";
    if (avx512 && f->avx512_bf16) return "AVX512-BF16";
    if (avx512) return "AVX-512";
    if (f->avx2 && f->fma) return "AVX2";
    if (f->avx) return "AVX";
    if (f->sse4_2) return "SSE4.2";
    if (f->ssse3) return "SSSE3";
    if (f->sse3) return "SSE3";
    return "baseline";
}
