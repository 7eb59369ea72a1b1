#pragma once
// Fused kernels of head_rows_product (head_rows.h) for rows read in place on the AVX-512 path:
// Q4_K / Q5_K / Q6_K with K a multiple of 256, Q8_0 with K a multiple of 32 (the kernels step one
// block at a time, so whole blocks suffice). A row's blocks are decoded into registers (exactly
// cpu::dequant_row's / ref::dequant_row's bits: each decoder's rounding is exact or one fmsub
// where the reference rounds once) and go straight into the fmas, with f32 activations; no row
// buffer. V2-Lite's kv_b (H = 16, K = 512, 128 rows per product) spent ~9 % of decode in
// dequant_row's buffer round trip. supported() says which; the others take the buffered path.
//
// Rows form, per output: acc (16 lanes) = 0; acc = fma(W[o][16g..], x[16g..], acc) for g ascending;
// y[o] = hsum(acc) (one fixed tree). rows_one decodes in registers (decode, one activation row);
// rows_buf runs the same sequence on dequantized rows (prefill: 4 x 4 tiles), so prefill equals
// decode bit for bit.
// Columns form: y[k] = 0, then fma(x[o], W[o][k], y[k]) for o ascending: exactly head_rows.cpp's
// buffered sequence (and the scalar path's), so columns_one matches every path bit for bit.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/isa.h"

namespace moe::cpu::head_fused {

bool supported(DType type, int64_t K, kernels::Isa isa);

// Rows at row0 + o * row_bytes, o < n_rows, K elements each.
void rows_one(DType type, const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t K, const float* x, float* y);
// buf [n_rows, K] (cpu::dequant_row's values); x_t at x + t * ldx, y_t at y + t * ldy, t < m.
void rows_buf(const float* buf, int64_t n_rows, int64_t K, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t m);
// y[0, K) = sum over the n_rows rows of x[o] * W[o] (y is overwritten).
void columns_one(DType type, const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t K, const float* x, float* y);

}  // namespace moe::cpu::head_fused
