#pragma once
// Scalar fp64 reference of the whole MoE block (routing + experts + shared + combine): the oracle
// of the op tests. Written separately from the fast path on purpose: plain loops, doubles, its
// own selection (repeated argmax), no kernels, no threads, no approximations.
#include <cstdint>
#include <vector>

#include "moe/moe_spec.h"

namespace moe {

struct RefOutput {
    std::vector<double> y;        // [T, D]
    std::vector<int> ids;         // [T, k] in descending selection score
    std::vector<double> weights;  // [T, k]
    // [T] smallest relative gap at a decision boundary of the expert *set* (k-th vs next
    // selection score, topk_group-th vs next group score); inf when there is none. f32 routing may
    // legitimately pick a different set when this is below ~1e-5 (see the op tests).
    std::vector<double> margin;
};

RefOutput moe_reference(const MoeSpec& spec, const MoeWeights& w, const float* x, int64_t T);

}  // namespace moe
