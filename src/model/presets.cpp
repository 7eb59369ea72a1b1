// Preset table. Real presets copy their shapes from the model's config.json (Mixtral-8x7B-v0.1,
// Qwen3-30B-A3B, OLMoE-1B-7B-0924, Qwen1.5-MoE-A2.7B; see moe_models_summary.json); tests check
// mixtral and qwen3 against the config.json files in shared/reference/configs.
#include "model/presets.h"

#include "core/error.h"
#include "model/vocab_builtin.h"

namespace moe::model {
namespace {

ModelConfig base(const char* arch, const std::string& name, int64_t vocab, int64_t embd, int64_t layers,
                 int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t ctx, float rope_base, float eps) {
    ModelConfig c;
    c.arch = arch;
    c.name = name;
    c.source = "preset:" + name;
    c.n_vocab = vocab;
    c.n_embd = embd;
    c.n_layer = layers;
    c.n_head = heads;
    c.n_head_kv = kv_heads;
    c.head_dim_k = c.head_dim_v = c.n_rot = head_dim;
    c.n_ctx_train = ctx;
    c.rope_freq_base = rope_base;
    c.rms_eps = eps;
    return c;
}

ModelConfig mixtral(const std::string& name, int64_t vocab, int64_t embd, int64_t layers, int64_t heads,
                    int64_t kv, int64_t hd, int64_t ff, int64_t E, int64_t k, int64_t ctx) {
    ModelConfig c = base(kArchLlama, name, vocab, embd, layers, heads, kv, hd, ctx, 1e6f, 1e-5f);
    c.n_ff = c.n_ff_exp = ff;  // llama arch: expert width = feed_forward_length
    c.n_expert = E;
    c.n_expert_used = k;
    c.expert_weights_norm = true;
    return c;
}

ModelConfig qwen3moe(const std::string& name, int64_t vocab, int64_t embd, int64_t layers, int64_t heads,
                     int64_t kv, int64_t hd, int64_t ff, int64_t ff_exp, int64_t E, int64_t k, int64_t ctx) {
    ModelConfig c = base(kArchQwen3Moe, name, vocab, embd, layers, heads, kv, hd, ctx, 1e6f, 1e-6f);
    c.n_ff = ff;
    c.n_ff_exp = ff_exp;
    c.n_expert = E;
    c.n_expert_used = k;
    c.expert_weights_norm = true;
    c.qk_norm = QkNorm::PerHead;
    return c;
}

ModelConfig olmoe(const std::string& name, int64_t vocab, int64_t embd, int64_t layers, int64_t heads,
                  int64_t kv, int64_t hd, int64_t ff_exp, int64_t E, int64_t k, int64_t ctx) {
    ModelConfig c = base(kArchOlmoe, name, vocab, embd, layers, heads, kv, hd, ctx, 1e4f, 1e-5f);
    c.n_ff = c.n_ff_exp = ff_exp;  // llama.cpp olmoe: expert width = feed_forward_length
    c.n_expert = E;
    c.n_expert_used = k;
    c.qk_norm = QkNorm::Whole;
    return c;
}

ModelConfig qwen2moe(const std::string& name, int64_t vocab, int64_t embd, int64_t layers, int64_t heads,
                     int64_t kv, int64_t hd, int64_t ff, int64_t ff_exp, int64_t ff_shexp, int64_t E, int64_t k,
                     int64_t ctx) {
    ModelConfig c = base(kArchQwen2Moe, name, vocab, embd, layers, heads, kv, hd, ctx, 1e6f, 1e-6f);
    c.n_ff = ff;
    c.n_ff_exp = ff_exp;
    c.n_ff_shexp = ff_shexp;
    c.n_shared_expert = 1;
    c.shexp_gate = true;
    c.n_expert = E;
    c.n_expert_used = k;
    c.qkv_bias = true;
    return c;
}

// deepseek2: MLA sizes (q_lora 0 = plain attn_q, V2-Lite), YaRN (factor, original context,
// yarn_log_multiplier = 0.1 * mscale_all_dim as the converter stores it), dense lead, experts.
struct Ds2 {
    int64_t vocab, embd, layers, heads, q_lora, kv_lora, nope, rope, v, ff, ff_exp, E, k, shared, dense_lead, ctx;
    float yarn_factor;
    int64_t yarn_orig;
    float yarn_log_mul;
};
ModelConfig deepseek2(const std::string& name, const Ds2& s) {
    ModelConfig c = base(kArchDeepseek2, name, s.vocab, s.embd, s.layers, s.heads, s.heads, s.nope + s.rope, s.ctx,
                         1e4f, 1e-6f);
    c.head_dim_v = c.v_head_dim = s.v;
    c.n_rot = c.qk_rope_head_dim = s.rope;
    c.qk_nope_head_dim = s.nope;
    c.q_lora_rank = s.q_lora;
    c.kv_lora_rank = s.kv_lora;
    c.n_ff = s.ff;
    c.n_ff_exp = s.ff_exp;
    c.n_expert = s.E;
    c.n_expert_used = s.k;
    c.n_shared_expert = s.shared;
    c.n_ff_shexp = s.ff_exp * s.shared;
    c.n_layer_dense_lead = s.dense_lead;
    if (s.yarn_factor > 1.0f) {
        c.rope_scaling = RopeScaling::Yarn;
        c.rope_scaling_factor = s.yarn_factor;
        c.rope_orig_ctx = s.yarn_orig;
        c.rope_yarn_log_mul = s.yarn_log_mul;
    }
    return c;
}

ModelConfig tiny_deepseek3(int64_t tv) {
    // V3 routing: sigmoid scores + exp_probs_b selection bias, 4 groups of 4 (top-2 groups),
    // renormalised top-4 weights scaled by 2.5; q through q_a / q_b; 1 shared expert.
    ModelConfig c = deepseek2("tiny-deepseek3", {tv, 64, 3, 4, 64, 32, 16, 16, 16, 96, 32, 16, 4, 1, 1, 4096,
                                                 4.0f, 128, 0.1f});
    c.gating = GatingFunc::Sigmoid;
    c.selection_bias = true;
    c.n_expert_groups = 4;
    c.n_group_used = 2;
    c.expert_weights_norm = true;
    c.expert_weights_scale = 2.5f;
    return c;
}

// gpt-oss: q/k/v/o biases, attention sinks, sliding window on the even layers (pattern 2), router
// and expert biases, softmax over the top-k logits, clamped SwiGLU, YaRN (factor, original ctx).
struct Oss {
    int64_t vocab, embd, layers, heads, kv, head_dim, ff_exp, E, k, window, ctx;
    float rope_base, yarn_factor;
    int64_t yarn_orig;
};
ModelConfig gpt_oss(const std::string& name, const Oss& s) {
    ModelConfig c = base(kArchGptOss, name, s.vocab, s.embd, s.layers, s.heads, s.kv, s.head_dim, s.ctx, s.rope_base,
                         1e-5f);
    c.n_ff = c.n_ff_exp = s.ff_exp;
    c.n_expert = s.E;
    c.n_expert_used = s.k;
    c.gating = GatingFunc::SoftmaxWeight;
    c.router_bias = c.expert_bias = c.attn_sinks = true;
    c.qkv_bias = c.attn_out_bias = true;
    c.sliding_window = s.window;
    c.swa_pattern = 2;
    c.rope_scaling = RopeScaling::Yarn;
    c.rope_scaling_factor = s.yarn_factor;
    c.rope_orig_ctx = s.yarn_orig;
    return c;
}

std::vector<Preset> make_presets() {
    const int64_t tv = builtin_vocab_size();
    std::vector<Preset> p;
    p.push_back({"mixtral-8x7b", "Mixtral-8x7B-v0.1 (llama arch, 8 experts top-2, ~46.7B params)",
                 mixtral("mixtral-8x7b", 32000, 4096, 32, 32, 8, 128, 14336, 8, 2, 32768)});
    p.push_back({"qwen3-30b-a3b", "Qwen3-30B-A3B (qwen3moe, 128 experts top-8, ~30.5B params)",
                 qwen3moe("qwen3-30b-a3b", 151936, 2048, 48, 32, 4, 128, 6144, 768, 128, 8, 40960)});
    p.push_back({"olmoe-1b-7b", "OLMoE-1B-7B-0924 (olmoe, 64 experts top-8, ~6.9B params)",
                 olmoe("olmoe-1b-7b", 50304, 2048, 16, 16, 16, 128, 1024, 64, 8, 4096)});
    p.push_back({"qwen1.5-moe-a2.7b", "Qwen1.5-MoE-A2.7B (qwen2moe, 60 experts top-4 + gated shared expert, ~14.3B params)",
                 qwen2moe("qwen1.5-moe-a2.7b", 151936, 2048, 24, 16, 16, 128, 5632, 1408, 5632, 60, 4, 8192)});
    // DeepSeek-V2-Lite (config.json): 27 layers, 16 heads, kv_lora 512, no q_lora, nope 128 +
    // rope 64, v 128, first layer dense (10944), 64 experts top-6 of 1408 + 2 shared, softmax, YaRN
    // 40x from 4096 with mscale_all_dim 0.707.
    p.push_back({"deepseek-v2-lite", "DeepSeek-V2-Lite (deepseek2, MLA, 64 experts top-6 + 2 shared, ~15.7B params)",
                 deepseek2("deepseek-v2-lite", {102400, 2048, 27, 16, 0, 512, 128, 64, 128, 10944, 1408, 64, 6, 2, 1,
                                                163840, 40.0f, 4096, 0.0707f})});
    // gpt-oss-20b (config.json): 24 layers, hidden 2880, 64 heads / 8 kv of 64, 32 experts top-4 of
    // 2880, sliding window 128, rope theta 150000 with YaRN 32x from 4096, vocab 201088.
    p.push_back({"gpt-oss-20b", "gpt-oss-20b (gpt-oss, 32 experts top-4, sinks, sliding window, ~20.9B params)",
                 gpt_oss("gpt-oss-20b", {201088, 2880, 24, 64, 8, 64, 2880, 32, 4, 128, 131072, 150000.0f, 32.0f, 4096})});
    // Tiny presets: n_embd 64, 2 layers, 4 heads / 2 kv heads (olmoe: 4, llama.cpp needs
    // n_head_kv == n_head there), 8 experts top-2, n_ff_exp 32.
    p.push_back({"tiny-mixtral", "tiny llama-arch MoE (test model)",
                 mixtral("tiny-mixtral", tv, 64, 2, 4, 2, 16, 32, 8, 2, 512)});
    p.push_back({"tiny-qwen2moe", "tiny qwen2moe with a gated shared expert (test model)",
                 qwen2moe("tiny-qwen2moe", tv, 64, 2, 4, 2, 16, 64, 32, 64, 8, 2, 512)});
    // head_dim 32: q width 128 != n_embd 64, as in the real model (4096 vs 2048).
    p.push_back({"tiny-qwen3moe", "tiny qwen3moe with per-head q/k norms (test model)",
                 qwen3moe("tiny-qwen3moe", tv, 64, 2, 4, 2, 32, 64, 32, 8, 2, 512)});
    p.push_back({"tiny-olmoe", "tiny olmoe with whole-projection q/k norms (test model)",
                 olmoe("tiny-olmoe", tv, 64, 2, 4, 4, 16, 32, 8, 2, 512)});
    // tiny deepseek2: V2-Lite's structure (plain q, softmax, dense first layer, 2 shared experts,
    // YaRN with mscale) at n_embd 64, kv_lora 32, heads of 16 + 16 (rope), v 16.
    p.push_back({"tiny-deepseek2", "tiny deepseek2 (V2-Lite-like MLA, YaRN, dense lead, 2 shared experts; test model)",
                 deepseek2("tiny-deepseek2", {tv, 64, 3, 4, 0, 32, 16, 16, 16, 96, 32, 8, 2, 2, 1, 4096, 4.0f, 128,
                                              0.0707f})});
    p.push_back({"tiny-deepseek3", "tiny deepseek2 with V3 routing (sigmoid, groups, selection bias; test model)",
                 tiny_deepseek3(tv)});
    // tiny gpt-oss: 2 layers (sliding, full) with a window of 8 so that short tests
    // run past it, 8 heads / 2 kv of 16, 8 experts top-4 of 32, YaRN 4x from 128.
    p.push_back({"tiny-gpt-oss", "tiny gpt-oss (sinks, sliding window 8, biases, clamped SwiGLU, YaRN; test model)",
                 gpt_oss("tiny-gpt-oss", {tv, 64, 2, 8, 2, 16, 32, 8, 4, 8, 4096, 150000.0f, 4.0f, 128})});
    // Small presets for per-weight-type parity runs (docs/PARITY.md, issue 17): every row length a
    // multiple of 256 so that llama-quantize keeps each K-/IQ-type (no fallback), 4 layers,
    // 16 experts top-4, a few hundred MB at f32.
    p.push_back({"small-qwen3moe", "small qwen3moe, rows multiples of 256 (quantization parity model)",
                 qwen3moe("small-qwen3moe", tv, 512, 4, 4, 2, 128, 1024, 256, 16, 4, 2048)});
    p.push_back({"small-olmoe", "small olmoe, rows multiples of 256 (quantization parity model)",
                 olmoe("small-olmoe", tv, 512, 4, 4, 4, 128, 512, 16, 4, 2048)});
    for (const auto& x : p) x.config.validate();
    return p;
}

}  // namespace

const std::vector<Preset>& presets() {
    static const std::vector<Preset> p = make_presets();
    return p;
}

const Preset& find_preset(const std::string& name) {
    for (const auto& p : presets())
        if (p.name == name) return p;
    std::string names;
    for (const auto& p : presets()) names += (names.empty() ? "" : ", ") + p.name;
    throw_error("gen", "unknown preset '", name, "' (known: ", names, ")");
}

}  // namespace moe::model
