#pragma once
// Helpers shared by the fp64 reference forward files (reference_forward_util.cpp, reference_mla_util.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace moe::gguf {
class File;
}

namespace moe::testref {

std::vector<double> reference_forward_deepseek2(const gguf::File& f, const std::vector<int32_t>& tokens);
std::vector<double> reference_forward_gpt_oss(const gguf::File& f, const std::vector<int32_t>& tokens);

namespace detail {
using Vec = std::vector<double>;

struct Tensor {
    Vec data;
    int64_t ne[4] = {1, 1, 1, 1};
    bool present = false;
};

// Every element in double (f32/f16/bf16 as stored; quantized through the reference dequantizer).
Tensor load(const gguf::File& f, const std::string& name, bool required = true);
// y[n] = sum_i W[off + n*K + i] x[i], n < N.
Vec matvec(const Tensor& W, const Vec& x, int64_t K, int64_t N, size_t off = 0);
// RMSNorm of x[off .. off+len) with weight w.
void rmsnorm_chunk(Vec& x, size_t off, int64_t len, const Tensor& w, double eps);
double silu(double v);
}  // namespace detail

}  // namespace moe::testref
