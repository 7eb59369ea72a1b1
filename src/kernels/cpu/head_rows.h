#pragma once
// Per-head products whose weight rows are read in the file's type, a chunk of rows at a time
// dequantized into a buffer on the task's stack (cpu::dequant_row: ref::dequant_row's values), so
// the tensor needs no f32 copy. Written for MLA's absorbed k_b / v_b, which DeepSeek-V2 files keep
// inside attn_kv_b [r, H * (nope + v)]: V2-Lite Q4_K_M reads 1.1 MB of kv_b per layer and token
// instead of 8 MB of f32 copies (the decode is bandwidth-bound, so bytes are time).
//
// Head h's row o (o < rows) is at data + (h * head_rows + first + o) * row_bytes, K elements.
//   rows form:    y_h[t][o] = sum_k W_h[o][k] x_h[t][k]   (the f32 matmul kernel on the chunk)
//   columns form: y_h[t][k] = sum_o W_h[o][k] x_h[t][o]   (y = 0, then one fma per o, o ascending)
// Either way each output is one fixed operation sequence that depends on neither the batch size m
// nor the thread (the kernels' determinism contract), so prefill equals decode bit for bit.
// Q4_K / Q5_K / Q6_K with K % 256 == 0 and Q8_0 with K % 32 == 0 on AVX-512 (head_fused::supported;
// V2-Lite's kv_b in Q4_K_M, Q5_K_M and Q8_0 files) use head_rows_fused.h instead of the buffer at
// m = 1: the rows are decoded into registers (dequant_row's bits) and prefetched, one task per
// head; the columns form runs the same fmas as above, the rows form its own fixed sequence (one
// 16-lane chain per output, then a fixed tree), which m > 1 runs on the buffer.
// Activations stay f32 (the products are f32-exact up to the fma chains). Other types and ISAs:
// the buffered path.
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace moe::cpu {

struct HeadRows {
    const uint8_t* data = nullptr;
    DType type = DType::F32;
    size_t row_bytes = 0;  // bytes per row of K elements
    int64_t head_rows = 0, first = 0, rows = 0, K = 0, H = 0;
    bool columns = false;  // the columns form (W_h^T x_h) instead of the rows form (W_h x_h)
};

// Activations x_h[t] at x + t * ldx + h * xs; outputs y_h[t] at y + t * ldy + h * ys.
struct HeadIo {
    const float* x = nullptr;
    int64_t ldx = 0, xs = 0;
    float* y = nullptr;
    int64_t ldy = 0, ys = 0;
};

// Floats in one task's row buffer (32 KB): a chunk is kHeadRowsBuffer / K rows; K must not exceed it.
constexpr int64_t kHeadRowsBuffer = 8192;

// f32: the F32 matmul kernel (the rows form's dot products). m rows of activations.
void head_rows_product(ThreadPool& pool, const kernels::MatmulKernel& f32, const HeadRows& w, const HeadIo& io,
                       int64_t m, kernels::Isa isa);

// Decode (m = 1) of heads [h0, h1) on the calling thread, for a caller whose own pool wave does
// more per head (MLA decode: k_b, attention and v_b of a chunk of heads in one task). Only where
// head_rows_decode_supported; each head's outputs are head_rows_product's bits at m = 1.
bool head_rows_decode_supported(const HeadRows& w, kernels::Isa isa);
void head_rows_decode(const HeadRows& w, const HeadIo& io, int64_t h0, int64_t h1);

}  // namespace moe::cpu
