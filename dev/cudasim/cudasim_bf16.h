/*
 * dev/cudasim/cudasim_bf16.h — the host types and conversions of cuda_bf16.h, for the simulator.
 *
 * __nv_bfloat16 is the upper 16 bits of an IEEE fp32 value. float -> bf16 rounds to nearest, ties to
 * even, and turns every NaN into the canonical NaN 0x7FFF, as cuda_bf16.h does (host path and
 * cvt.rn.bf16.f32). Arithmetic (__hadd, operator+, ...) computes in fp32 and rounds once to bf16;
 * sm_90's native bf16 add/mul round the exact result once, so the two can differ in the last bit when
 * the fp32 intermediate was itself rounded (a double rounding; rare, documented, never in conversions).
 * Included by cudasim.h; not meant to be included on its own.
 */
#ifndef CUDASIM_BF16_H
#define CUDASIM_BF16_H

#include <stdint.h>
#include <string.h>

typedef struct { unsigned short x; } __nv_bfloat16_raw;
typedef struct { unsigned short x, y; } __nv_bfloat162_raw;

/* bit-level helpers: fp32 <-> bits */
static inline uint32_t cudasim_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float cudasim_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* float -> bf16 bits, round to nearest even; NaN -> 0x7FFF */
static inline unsigned short cudasim_f32_to_bf16_bits(float f) {
    uint32_t u = cudasim_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)((u + rounding_bias) >> 16);
}

struct alignas(2) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default; /* trivial, so `__shared__ __nv_bfloat16 s[N]` needs no initialisation */
    __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(cudasim_f32_to_bf16_bits(f)) {}
    __nv_bfloat16(double d) : __x(cudasim_f32_to_bf16_bits((float)d)) {}
    __nv_bfloat16(int i) : __x(cudasim_f32_to_bf16_bits((float)i)) {}
    operator float() const { return cudasim_bits_f32((uint32_t)__x << 16); }
    operator __nv_bfloat16_raw() const { __nv_bfloat16_raw r; r.x = __x; return r; }
};

struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
    __nv_bfloat162(const __nv_bfloat162_raw& r) { x.__x = r.x; y.__x = r.y; }
};

static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.__x = u; return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __ushort_as_bfloat16(cudasim_f32_to_bf16_bits(f)); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
/* round toward zero: truncate the low 16 bits (NaN stays canonical) */
static inline __nv_bfloat16 __float2bfloat16_rz(float f) {
    uint32_t u = cudasim_f32_bits(f);
    return __ushort_as_bfloat16((u & 0x7fffffffu) > 0x7f800000u ? 0x7fff : (unsigned short)(u >> 16));
}
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b)); }
static inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __floats2bfloat162_rn(a, a); }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
static inline float __low2float(__nv_bfloat162 v) { return (float)v.x; }
static inline float __high2float(__nv_bfloat162 v) { return (float)v.y; }

/* scalar arithmetic: fp32 op, one rounding to bf16 */
static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a + (float)b); }
static inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a - (float)b); }
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a * (float)b); }
static inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a / (float)b); }
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __float2bfloat16((float)((double)(float)a * (double)(float)b + (double)(float)c));
}
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __ushort_as_bfloat16(a.__x ^ 0x8000u); }
static inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __ushort_as_bfloat16(a.__x & 0x7fffu); }
static inline bool __hisnan(__nv_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
/* max/min: if one input is NaN the other is returned; both NaN gives canonical NaN (CUDA semantics) */
static inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
    if (__hisnan(a)) return __hisnan(b) ? __ushort_as_bfloat16(0x7fff) : b;
    if (__hisnan(b)) return a;
    return (float)a >= (float)b ? a : b;
}
static inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
    if (__hisnan(a)) return __hisnan(b) ? __ushort_as_bfloat16(0x7fff) : b;
    if (__hisnan(b)) return a;
    return (float)a <= (float)b ? a : b;
}
static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}

/* operators: the scalar ones go through float (implicit conversion), as in cuda_bf16.hpp's host path */
static inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }
static inline __nv_bfloat16 operator-(__nv_bfloat16 a) { return __hneg(a); }
static inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hadd(a, b); }
static inline __nv_bfloat16& operator-=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hsub(a, b); }
static inline __nv_bfloat16& operator*=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hmul(a, b); }
static inline __nv_bfloat16& operator/=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hdiv(a, b); }
static inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a == (float)b; }
static inline bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a != (float)b; }
static inline bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b; }
static inline bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a <= (float)b; }
static inline bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a > (float)b; }
static inline bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a >= (float)b; }
static inline __nv_bfloat162 operator+(__nv_bfloat162 a, __nv_bfloat162 b) { return __hadd2(a, b); }
static inline __nv_bfloat162 operator-(__nv_bfloat162 a, __nv_bfloat162 b) { return __hsub2(a, b); }
static inline __nv_bfloat162 operator*(__nv_bfloat162 a, __nv_bfloat162 b) { return __hmul2(a, b); }
static inline __nv_bfloat162& operator+=(__nv_bfloat162& a, __nv_bfloat162 b) { return a = __hadd2(a, b); }
static inline __nv_bfloat162& operator*=(__nv_bfloat162& a, __nv_bfloat162 b) { return a = __hmul2(a, b); }

#endif /* CUDASIM_BF16_H */
