#include "machine/cpu_features.h"

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
    f.amx_tile = __builtin_cpu_supports("amx-tile");
    f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
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
