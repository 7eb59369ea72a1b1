#pragma once
// Shared helpers of the MoE op tests: tiny random models in GGUF layout, presets of every router
// variant, and the comparison against the fp64 reference.
#include <cstdint>
#include <string>
#include <vector>

#include "moe/moe_block.h"
#include "moe/reference.h"

namespace moe::test {

// Owns the weight memory of one layer; views() gives the MoeWeights (GGUF shapes).
struct TestModel {
    MoeSpec spec;
    std::vector<float> router, router_bias, sel_bias, gate, up, down, gate_sh, up_sh, down_sh, gate_inp_sh;
    std::vector<float> gate_b, up_b, down_b;  // expert biases (has_expert_bias)
    MoeWeights views(int layer = 0);
};

// Router variants named as in the op-test case names.
enum class Variant { SoftmaxNorm, SoftmaxNoNorm, Qwen2Shared, GptOss, Granite, DeepSeekV3, DeepSeekV2 };
const char* variant_name(Variant v);
std::vector<Variant> all_variants();
// Spec of the variant at the given shape (groups chosen to divide E where possible).
MoeSpec make_spec(Variant v, int E, int k, int64_t D, int64_t F);
// Random weights: router rows ~ N(0, router_scale^2 / D) so logits ~ N(0, router_scale^2) for
// x ~ N(0, 1); expert matrices ~ N(0, 1/K). hot >= 0 makes every token choose expert `hot`.
TestModel make_model(const MoeSpec& spec, uint64_t seed, float router_scale = 2.0f, int hot = -1);
std::vector<float> random_x(int64_t T, int64_t D, uint64_t seed, bool positive = false);

// Normalised mean squared error sum (a - ref)^2 / sum ref^2 over rows with use[t].
double nmse(const float* a, const double* ref, int64_t T, int64_t D, const std::vector<char>& use);

// NMSE threshold for the block: f32 dot products of length D (router, gate, up) and F (down)
// against an fp64 reference. A sequential f32 sum of n terms of random sign has a relative error
// of about u * sqrt(n) (u = 2^-24, rounding errors add as a random walk), so the squared relative
// error is about u^2 * n per dot product; the errors of the gate/up (n = D), down (n = F) and
// routing-weight (n = D through the router) stages add, and the activation and the k-term combine
// amplify them by a small constant. Threshold = 64 * u^2 * (2D + F + k + 32): a broken kernel
// (a skipped tail, a wrong row) gives NMSE >= 1e-4, many orders above this (~1e-10).
double nmse_threshold(int64_t D, int64_t F, int k);

}  // namespace moe::test
