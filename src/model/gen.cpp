// Random-weight GGUF generator (see gen.h).
#include "model/gen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_q8_0.h"
#include "model/param_count.h"
#include "model/presets.h"
#include "model/vocab_builtin.h"

namespace moe::model {
namespace {

constexpr const char* kC = "gen";
constexpr uint64_t kBlockBytes = 8u << 20;  // output bytes generated per parallel block

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

uint64_t row_seed(uint64_t seed, uint64_t name_hash, int64_t row) {
    return (seed * 0x9e3779b97f4a7c15ull) ^ name_hash ^ (static_cast<uint64_t>(row) * 0xd1b54a32d192ed03ull);
}

bool ends_with(const std::string& s, const char* suf) {
    const size_t n = std::strlen(suf);
    return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

void encode_row(DType type, const float* x, int64_t n, unsigned char* out) {
    switch (type) {
        case DType::F32: std::memcpy(out, x, static_cast<size_t>(n) * 4); break;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = fp32_to_fp16(x[i]);
                std::memcpy(out + 2 * i, &h, 2);
            }
            break;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = fp32_to_bf16(x[i]);
                std::memcpy(out + 2 * i, &h, 2);
            }
            break;
        case DType::Q8_0: ref::quantize_row_q8_0(x, out, n); break;
        case DType::MXFP4: ref::quantize_row_mxfp4(x, out, n); break;
        default: MOE_ASSERT(false, "gen cannot encode type ", dtype_name(type));
    }
}

void write_builtin_vocab(gguf::Writer& w, int64_t n_vocab) {
    const VocabData v = builtin_vocab(n_vocab);
    w.set_string("tokenizer.ggml.model", v.model);
    w.set_string("tokenizer.ggml.pre", v.pre);
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
    w.set_string_array("tokenizer.ggml.merges", v.merges);
    w.set_u32("tokenizer.ggml.bos_token_id", v.bos);
    w.set_u32("tokenizer.ggml.eos_token_id", v.eos);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
}

// deepseek2 keys as llama.cpp's converter writes them (classic attn_kv_b layout: key_length =
// nope + rope, value_length = v, no *_mla keys). q_lora_rank is written even when 0: llama.cpp
// reads it unless the block count is one of the "lite" counts, and 0 there means plain attn_q.
void write_deepseek2(gguf::Writer& w, const ModelConfig& c) {
    const std::string p = c.arch + ".";
    auto u32 = [&](const char* k, int64_t v) { w.set_u32(p + k, checked_cast<uint32_t>(v, kC, k)); };
    u32("leading_dense_block_count", c.n_layer_dense_lead);
    u32("attention.q_lora_rank", c.q_lora_rank);
    u32("attention.kv_lora_rank", c.kv_lora_rank);
    u32("expert_feed_forward_length", c.n_ff_exp);
    u32("expert_shared_count", c.n_shared_expert);
    w.set_f32(p + "expert_weights_scale", c.expert_weights_scale);
    w.set_bool(p + "expert_weights_norm", c.expert_weights_norm);
    u32("expert_gating_func", static_cast<int64_t>(c.gating));
    if (c.n_expert_groups > 1) {
        u32("expert_group_count", c.n_expert_groups);
        u32("expert_group_used_count", c.n_group_used);
    }
    if (c.rope_scaling == RopeScaling::Yarn) {
        w.set_string(p + "rope.scaling.type", "yarn");
        w.set_f32(p + "rope.scaling.factor", c.rope_scaling_factor);
        u32("rope.scaling.original_context_length", c.rope_orig_ctx);
        w.set_f32(p + "rope.scaling.yarn_log_multiplier", c.rope_yarn_log_mul);
    }
}

void write_hparams(gguf::Writer& w, const ModelConfig& c) {
    const std::string p = c.arch + ".";
    auto u32 = [&](const char* k, int64_t v) { w.set_u32(p + k, checked_cast<uint32_t>(v, kC, k)); };
    u32("context_length", c.n_ctx_train);
    u32("embedding_length", c.n_embd);
    u32("block_count", c.n_layer);
    u32("feed_forward_length", c.n_ff);
    u32("attention.head_count", c.n_head);
    u32("attention.head_count_kv", c.n_head_kv);
    if (c.head_dim_k != c.n_embd / c.n_head) u32("attention.key_length", c.head_dim_k);
    if (c.head_dim_v != c.n_embd / c.n_head) u32("attention.value_length", c.head_dim_v);
    u32("rope.dimension_count", c.n_rot);
    w.set_f32(p + "rope.freq_base", c.rope_freq_base);
    w.set_f32(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
    u32("expert_count", c.n_expert);
    u32("expert_used_count", c.n_expert_used);
    if (c.arch == kArchQwen2Moe || c.arch == kArchQwen3Moe) u32("expert_feed_forward_length", c.n_ff_exp);
    if (c.arch == kArchQwen2Moe) u32("expert_shared_feed_forward_length", c.n_ff_shexp);
    if (c.arch == kArchDeepseek2) write_deepseek2(w, c);
    if (c.arch == kArchGptOss) {  // conversion/gpt_oss.py + the base converter's rope keys
        u32("expert_feed_forward_length", c.n_ff_exp);
        u32("attention.sliding_window", c.sliding_window);
        if (c.rope_scaling == RopeScaling::Yarn) {
            w.set_string(p + "rope.scaling.type", "yarn");
            w.set_f32(p + "rope.scaling.factor", c.rope_scaling_factor);
            u32("rope.scaling.original_context_length", c.rope_orig_ctx);
        }
    }
}

}  // namespace

uint32_t file_type_of(DType t) {
    switch (t) {
        case DType::F32: return 0;
        case DType::F16: return 1;
        case DType::Q8_0: return 7;
        case DType::BF16: return 32;
        case DType::MXFP4: return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE: experts MXFP4, other matrices Q8_0
        default:
            throw_error(kC, "unsupported weight type ", dtype_name(t), " (supported: f32, f16, bf16, q8_0, mxfp4)");
    }
}

void gen_row_values(const ModelConfig& cfg, const TensorSpec& t, uint64_t seed, int64_t row, float* out) {
    Rng rng(row_seed(seed, fnv1a(t.name), row));
    const int64_t n = t.shape[0];
    float mean = 0.0f, scale;
    if (t.role == TensorRole::Norm) {
        mean = 1.0f;
        scale = 0.1f;
    } else if (ends_with(t.name, ".bias")) {
        scale = 0.02f;
    } else if (t.role == TensorRole::Router) {
        const float rs = cfg.gating == GatingFunc::Sigmoid ? kRouterScaleSigmoid : kRouterScale;
        scale = rs / std::sqrt(static_cast<float>(cfg.n_embd));
    } else {
        scale = 1.0f / std::sqrt(static_cast<float>(n));
    }
    // Box-Muller, using both values of each pair (half the log/sincos calls of Rng::normal()).
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = rng.uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * rng.uniform();
        out[i] = mean + scale * static_cast<float>(r * std::cos(a));
        if (i + 1 < n) out[i + 1] = mean + scale * static_cast<float>(r * std::sin(a));
    }
}

ModelConfig gen_config(const GenSpec& spec) {
    ModelConfig c = find_preset(spec.preset).config;
    if (spec.layers < 0) throw_error(kC, "--layers must be >= 1 (got ", spec.layers, ")");
    if (spec.layers > 0) c.n_layer = spec.layers;
    if (!spec.vocab_file.empty()) {
        const gguf::File vf = gguf::File::open(spec.vocab_file);
        const gguf::Value* toks = vf.find("tokenizer.ggml.tokens");
        if (!toks || toks->type != gguf::ValueType::ARRAY || toks->elem_type != gguf::ValueType::STRING)
            throw_error(kC, spec.vocab_file, ": no tokenizer.ggml.tokens string array (not a vocab GGUF?)");
        c.n_vocab = static_cast<int64_t>(toks->arr.size());
    } else {
        c.n_vocab = std::max(c.n_vocab, builtin_vocab_size());
    }
    file_type_of(spec.type);  // rejects unsupported types
    c.validate();
    return c;
}

GenResult generate(const GenSpec& spec) {
    if (spec.output.empty()) throw_error(kC, "no output path (-o FILE)");
    GenResult res;
    res.config = gen_config(spec);
    const ModelConfig& c = res.config;
    const std::vector<TensorSpec> cat = tensor_catalog(c);

    gguf::Writer w(spec.output);
    w.set_string("general.architecture", c.arch);
    w.set_string("general.name", c.name);
    w.set_u32("general.file_type", file_type_of(spec.type));
    if (dtype_info(spec.type).quantized) w.set_u32("general.quantization_version", 2);
    write_hparams(w, c);
    if (spec.vocab_file.empty()) {
        write_builtin_vocab(w, c.n_vocab);
    } else {
        const gguf::File vf = gguf::File::open(spec.vocab_file);
        for (const auto& kv : vf.metadata())
            if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);
    }

    std::vector<DType> types;
    for (const auto& t : cat) {
        types.push_back(storage_type(t.name, t.shape, spec.type));
        const size_t idx = w.add_tensor(t.name, types.back(), t.shape);
        res.data_bytes += w.tensor_bytes(idx);
        res.n_params += t.nelements();
    }
    res.n_tensors = cat.size();
    w.write_header();

    ThreadPool pool(spec.threads);
    std::vector<unsigned char> buf;
    std::vector<std::vector<float>> row_f32(static_cast<size_t>(pool.size()));
    uint64_t done = 0;
    for (size_t ti = 0; ti < cat.size(); ++ti) {
        const TensorSpec& t = cat[ti];
        const int64_t ne0 = t.shape[0];
        const int64_t nrows = static_cast<int64_t>(t.nelements() / static_cast<uint64_t>(ne0));
        const uint64_t rb = row_bytes(types[ti], static_cast<uint64_t>(ne0), kC);
        const int64_t rows_per_block = std::max<int64_t>(1, static_cast<int64_t>(kBlockBytes / rb));
        for (int64_t r0 = 0; r0 < nrows; r0 += rows_per_block) {
            const int64_t nr = std::min(rows_per_block, nrows - r0);
            buf.resize(static_cast<size_t>(nr * rb));
            const int64_t grain = std::max<int64_t>(1, 65536 / ne0);
            pool.parallel_for(nr, grain, [&](int64_t b, int64_t e, int tid) {
                std::vector<float>& tmp = row_f32[static_cast<size_t>(tid)];
                tmp.resize(static_cast<size_t>(ne0));
                for (int64_t r = b; r < e; ++r) {
                    gen_row_values(c, t, spec.seed, r0 + r, tmp.data());
                    encode_row(types[ti], tmp.data(), ne0, buf.data() + r * rb);
                }
            });
            w.write_data(buf.data(), buf.size());
            done += buf.size();
            if (spec.progress) spec.progress(done, res.data_bytes);
        }
    }
    w.finish();
    return res;
}

}  // namespace moe::model
