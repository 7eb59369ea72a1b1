#pragma once
// The trainable qwen3moe-style network (f32 for training, f64 for gradient tests):
//   x = embd[tok]; per block: x += Wo attn(rope(qk_norm(Wq/k/v rmsnorm(x)))); x += moe(rmsnorm(x))
//   logits = Wout rmsnorm(x)
// exactly the engine's qwen3moe forward (qwen2moe with n_ff_shexp > 0: see NetConfig) (per-head q/k RMSNorm, NeoX RoPE, softmax top-k router
// with renormalised weights, SwiGLU experts; no biases, untied head). Parameters live in one flat
// vector in GGUF layout (matrices [out][in] row-major = ne0 is the input width), named as the GGUF
// tensors, so export is a copy. n_expert == 1 makes a dense SwiGLU model (comparison baseline).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ref/rope.h"
#include "train/moe_ffn.h"

namespace moe::train {

struct NetConfig {
    int64_t n_vocab = 0;
    int64_t n_embd = 128;
    int64_t n_layer = 4;
    int64_t n_head = 4;
    int64_t n_head_kv = 2;
    int64_t head_dim = 32;
    int64_t n_ff = 128;   // per expert
    int n_expert = 8;
    int n_expert_used = 2;
    int64_t n_ctx = 128;  // training context (also the GGUF context_length)
    float rope_base = 10000.0f;
    float rms_eps = 1e-6f;
    // > 0: a shared expert of this width with a sigmoid gate, which makes the model qwen2moe (the
    // llama.cpp architecture with one): no q/k norm, no top-k renormalisation; needs
    // n_head * head_dim == n_embd (qwen2moe's attn_q / attn_output are n_embd wide).
    int64_t n_ff_shexp = 0;
    bool qwen2moe() const { return n_ff_shexp > 0; }
    // Throws moe::Error("[train] ...") naming the bad field.
    void validate() const;
    int64_t qd() const { return n_head * head_dim; }
    int64_t kd() const { return n_head_kv * head_dim; }
};

struct ParamInfo {
    std::string name;            // GGUF tensor name
    std::vector<int64_t> shape;  // ne0 first
    size_t offset = 0, size = 0; // in elements, into the flat vector
    bool decay = false;          // weight decay applies (matrices, not norms)
};

std::vector<ParamInfo> param_layout(const NetConfig& c);
size_t param_count(const std::vector<ParamInfo>& layout);
// Active parameters per token (embedding row excluded: k of E experts, router, attention, head).
int64_t active_params(const NetConfig& c);

struct InitSpec {
    uint64_t seed = 1;
    double std = 0.02;         // matrices
    double router_std = 0.02;  // router (ffn_gate_inp)
};

struct LossParts {
    double ce = 0;   // mean cross-entropy (nats per predicted token)
    double aux = 0;  // sum over layers of the aux terms (times coefficients)
    double z = 0;
    double total() const { return ce + aux + z; }
};

template <typename R>
class Net {
public:
    explicit Net(const NetConfig& c);
    const NetConfig& config() const { return c_; }
    const std::vector<ParamInfo>& layout() const { return layout_; }
    const ParamInfo& info(const std::string& name) const;
    std::vector<R> params, grads;  // flat, same layout

    void init(const InitSpec& s);
    // B sequences of T (<= n_ctx) tokens; targets[B*T]. Forward, then (backward) accumulates
    // gradients of total() into grads (the caller zeroes them). sel_bias: per layer [E] or null.
    // counts (optional): per layer, slots per expert.
    LossParts step(ThreadPool* pool, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                   const MoeLossSpec& ls, const std::vector<std::vector<float>>* sel_bias, bool backward,
                   std::vector<std::vector<int64_t>>* counts = nullptr);
    // Logits [B*T, V] of the last step() (valid until the next step; overwritten by backward).
    const std::vector<R>& logits() const { return logits_; }

private:
    struct Layer {
        R *attn_norm, *wq, *wk, *wv, *wo, *q_norm, *k_norm, *ffn_norm, *router, *gate, *up, *down;
        R *sh_gate_inp, *sh_gate, *sh_up, *sh_down;  // null without a shared expert
    };
    struct Saved;
    Layer layer_ptrs(std::vector<R>& v, int64_t il) const;
    NetConfig c_;
    std::vector<ParamInfo> layout_;
    RopeCache rope_;
    std::vector<R> logits_;
    std::shared_ptr<Saved> sv_;
};

}  // namespace moe::train
