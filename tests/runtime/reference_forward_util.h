#pragma once
// Independent fp64 reference forward pass for the supported MoE architectures, in plain loops.
// Shares nothing with the engine's forward path except the GGUF reader and ModelConfig: the
// architecture's rules (RoPE convention, q/k norm, renormalisation, shared expert) are derived
// here from the architecture name and the tensors present, not from src/model/arch_spec.h.
#include <cstdint>
#include <string>
#include <vector>

namespace moe::gguf {
class File;
}

namespace moe::testref {

// Logits [n_tokens][n_vocab] of tokens 0..n-1 of one sequence starting at position 0
// (row i = logits after tokens 0..i), every operation in double.
std::vector<double> reference_forward(const gguf::File& file, const std::vector<int32_t>& tokens);

// sum (got - ref)^2 / sum ref^2 over n values.
double nmse(const float* got, const double* ref, size_t n);
double nmse(const float* got, const float* ref, size_t n);

}  // namespace moe::testref
