#pragma once
// Helpers shared by the fp64 reference forward files (reference_forward_util.cpp, reference_mla_util.cpp).
#include <algorithm>
#include <cmath>
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

// One query head's causal attention over positions 0..n_pos-1: out[0..dv) += softmax_j(scale *
// q . key(j)) * value(j), where key(j) -> const double* [dk] and value(j) -> const double* [dv] are
// that head's K and V rows at position j (the callers differ only in where those rows live).
template <typename KeyRow, typename ValueRow>
void attend_causal(const double* q, int64_t dk, int64_t dv, int64_t n_pos, double scale, KeyRow key, ValueRow value,
                   double* out) {
    Vec s(static_cast<size_t>(n_pos));
    double mx = -INFINITY;
    for (int64_t j = 0; j < n_pos; ++j) {
        const double* k = key(j);
        double d = 0;
        for (int64_t i = 0; i < dk; ++i) d += q[i] * k[i];
        s[static_cast<size_t>(j)] = d * scale;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    double sum = 0;
    for (auto& v : s) sum += (v = std::exp(v - mx));
    for (int64_t j = 0; j < n_pos; ++j) {
        const double* v = value(j);
        for (int64_t i = 0; i < dv; ++i) out[i] += s[static_cast<size_t>(j)] / sum * v[i];
    }
}
}  // namespace detail

}  // namespace moe::testref
