#pragma once
// Fast causal GQA attention over a Q8_0 KV cache (layout: kernels/ref/kv_q8.h); cpu::attention
// (attention.h) hands Q8_0 caches here. Same two paths and per-row operation order as the f32 /
// f16 kernels of attention.cpp, with each 16-element K / V load dequantized in registers (int8 ->
// f32 times the block's fp16 scale, exact), so on the AVX-512 path a Q8_0 cache gives the same bits
// as an f32 cache holding its dequantized values, prefill and decode give the same bits for a token,
// and results do not depend on the thread count (tested).
#include "kernels/cpu/attention.h"

namespace moe::cpu {

void attention_q8(const AttentionSpec& spec, const AttentionArgs& args, ThreadPool* pool, kernels::Isa isa);

}  // namespace moe::cpu
