// GGUF output of trained models and checkpoints (see export.h).
#include "train/export.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/fp16.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/ref/quantize_q8_0.h"
#include "model/config.h"
#include "model/gen.h"
#include "model/tensor_catalog.h"

namespace moe::train {
namespace {

constexpr const char* kC = "train";

void write_vocab(gguf::Writer& w, const tokenizer::Vocab& v) {
    w.set_string("tokenizer.ggml.model", v.model);
    w.set_string("tokenizer.ggml.pre", v.pre);
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    std::vector<int32_t> types;
    for (size_t i = 0; i < v.tokens.size(); ++i) types.push_back(static_cast<int32_t>(v.type_of(static_cast<int32_t>(i))));
    w.set_i32_array("tokenizer.ggml.token_type", types);
    std::vector<std::string> merges;
    for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
    w.set_string_array("tokenizer.ggml.merges", merges);
    if (v.bos_id >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
    if (v.eos_id >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
    w.set_bool("tokenizer.ggml.add_bos_token", false);
}

const char* arch_of(const NetConfig& c) { return c.qwen2moe() ? model::kArchQwen2Moe : model::kArchQwen3Moe; }

void write_hparams(gguf::Writer& w, const NetConfig& c) {
    const std::string p = std::string(arch_of(c)) + ".";
    auto u32 = [&](const char* k, int64_t v) { w.set_u32(p + k, static_cast<uint32_t>(v)); };
    u32("context_length", c.n_ctx);
    u32("embedding_length", c.n_embd);
    u32("block_count", c.n_layer);
    u32("feed_forward_length", c.n_ff);
    u32("attention.head_count", c.n_head);
    u32("attention.head_count_kv", c.n_head_kv);
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
    u32("rope.dimension_count", c.head_dim);
    w.set_f32(p + "rope.freq_base", c.rope_base);
    w.set_f32(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
    u32("expert_count", c.n_expert);
    u32("expert_used_count", c.n_expert_used);
    u32("expert_feed_forward_length", c.n_ff);
    if (c.qwen2moe()) u32("expert_shared_feed_forward_length", c.n_ff_shexp);
}

void encode(DType t, const float* x, int64_t n, std::vector<unsigned char>& out) {
    out.resize(static_cast<size_t>(row_bytes(t, static_cast<uint64_t>(n), kC)));
    if (t == DType::F32) {
        std::memcpy(out.data(), x, out.size());
    } else if (t == DType::F16) {
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = fp32_to_fp16(x[i]);
            std::memcpy(out.data() + 2 * i, &h, 2);
        }
    } else if (t == DType::Q8_0) {
        ref::quantize_row_q8_0(x, out.data(), n);
    } else {
        throw_error(kC, "cannot write weights as ", dtype_name(t), " (supported: f32, f16, q8_0)");
    }
}

struct Extra {
    std::string name;
    std::vector<int64_t> shape;
    const float* data;
};

void write_gguf(const std::string& path, const NetConfig& c, const std::vector<float>& params,
                const tokenizer::Vocab& vocab, DType type, const std::string& name,
                const std::vector<std::pair<std::string, uint64_t>>& train_keys,
                const std::vector<std::pair<std::string, double>>& train_reals, const std::vector<Extra>& extra) {
    if (c.n_expert < 2)
        throw_error(kC, "a dense model (--experts 1) has no qwen3moe GGUF form; train it without --out");
    const std::vector<ParamInfo> layout = param_layout(c);
    const std::string tmp = path + ".tmp";
    {
        gguf::Writer w(tmp);
        w.set_string("general.architecture", arch_of(c));
        w.set_string("general.name", name);
        w.set_u32("general.file_type", model::file_type_of(type));
        if (type == DType::Q8_0) w.set_u32("general.quantization_version", 2);
        write_hparams(w, c);
        write_vocab(w, vocab);
        for (const auto& [k, v] : train_keys) w.set_u64(k, v);
        for (const auto& [k, v] : train_reals) {
            char buf[64];
            std::snprintf(buf, sizeof(buf), "%.17g", v);
            w.set_string(k, buf);
        }
        std::vector<DType> types;
        for (const auto& p : layout) {
            types.push_back(model::storage_type(p.name, p.shape, type));
            w.add_tensor(p.name, types.back(), p.shape);
        }
        for (const auto& e : extra) w.add_tensor(e.name, DType::F32, e.shape);
        w.write_header();
        std::vector<unsigned char> buf;
        for (size_t i = 0; i < layout.size(); ++i) {
            const ParamInfo& p = layout[i];
            const int64_t ne0 = p.shape[0], rows = static_cast<int64_t>(p.size) / ne0;
            for (int64_t r = 0; r < rows; ++r) {
                encode(types[i], params.data() + p.offset + r * ne0, ne0, buf);
                w.write_data(buf.data(), buf.size());
            }
        }
        for (const auto& e : extra) {
            size_t n = 1;
            for (int64_t d : e.shape) n *= static_cast<size_t>(d);
            w.write_data(e.data, n * sizeof(float));
        }
        w.finish();
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw_error(kC, "cannot move ", tmp, " to ", path, ": ", ec.message());
}

}  // namespace

void write_model(const std::string& path, const Net<float>& net, const tokenizer::Vocab& vocab, DType type,
                 const std::string& name) {
    write_gguf(path, net.config(), net.params, vocab, type, name, {}, {}, {});
}

void write_checkpoint(const std::string& path, const Checkpoint& ck) {
    std::vector<Extra> extra;
    for (const auto& p : param_layout(ck.config)) {
        extra.push_back({"train.adam_m." + p.name, p.shape, ck.opt.m.data() + p.offset});
        extra.push_back({"train.adam_v." + p.name, p.shape, ck.opt.v.data() + p.offset});
    }
    for (size_t il = 0; il < ck.sel_bias.size(); ++il)
        if (!ck.sel_bias[il].empty())
            extra.push_back({"train.sel_bias." + std::to_string(il), {static_cast<int64_t>(ck.sel_bias[il].size())},
                             ck.sel_bias[il].data()});
    write_gguf(path, ck.config, ck.params, ck.vocab, DType::F32, "moe-train checkpoint",
               {{"train.step", static_cast<uint64_t>(ck.step)},
                {"train.steps", static_cast<uint64_t>(ck.steps)},
                {"train.adam_t", static_cast<uint64_t>(ck.opt.t)},
                {"train.seed", ck.seed},
                {"train.batch", static_cast<uint64_t>(ck.batch)},
                {"train.warmup", static_cast<uint64_t>(ck.adam.warmup)}},
               {{"train.lr", ck.adam.lr},
                {"train.min_lr_frac", ck.adam.min_lr_frac},
                {"train.beta1", ck.adam.beta1},
                {"train.beta2", ck.adam.beta2},
                {"train.eps", ck.adam.eps},
                {"train.weight_decay", ck.adam.weight_decay},
                {"train.clip", ck.adam.clip},
                {"train.aux_loss", ck.loss.aux},
                {"train.z_loss", ck.loss.z},
                {"train.bias_balance", ck.bias_rate}},
               extra);
}

Checkpoint read_checkpoint(const std::string& path) {
    const gguf::File f = gguf::File::open(path);
    auto need = [&](const char* key) -> uint64_t {
        const auto v = f.get_uint(key);
        if (!v) throw_error(kC, path, ": key ", key, " is missing (not a moe train checkpoint; pass one written by --save-every)");
        return *v;
    };
    const model::ModelConfig mc = model::config_from_gguf(f);
    if (mc.arch != model::kArchQwen3Moe && mc.arch != model::kArchQwen2Moe)
        throw_error(kC, path, ": architecture ", mc.arch, " is not a trainer checkpoint");
    Checkpoint ck;
    NetConfig& c = ck.config;
    c.n_vocab = mc.n_vocab;
    c.n_embd = mc.n_embd;
    c.n_layer = mc.n_layer;
    c.n_head = mc.n_head;
    c.n_head_kv = mc.n_head_kv;
    c.head_dim = mc.head_dim_k;
    c.n_ff = mc.n_ff_exp;
    c.n_expert = static_cast<int>(mc.n_expert);
    c.n_expert_used = static_cast<int>(mc.n_expert_used);
    c.n_ctx = mc.n_ctx_train;
    c.rope_base = mc.rope_freq_base;
    c.rms_eps = mc.rms_eps;
    if (mc.arch == model::kArchQwen2Moe) c.n_ff_shexp = mc.n_ff_shexp;
    c.validate();
    ck.step = static_cast<int64_t>(need("train.step"));
    ck.steps = static_cast<int64_t>(need("train.steps"));
    ck.seed = need("train.seed");
    ck.batch = static_cast<int64_t>(need("train.batch"));
    ck.adam.warmup = static_cast<int64_t>(need("train.warmup"));
    auto real = [&](const char* key) {
        const auto v = f.get_string(key);
        char* end = nullptr;
        const double d = v ? std::strtod(v->c_str(), &end) : 0.0;
        if (!v || v->empty() || *end != '\0' || !std::isfinite(d))
            throw_error(kC, path, ": key ", key, " is missing or not a number (not a moe train checkpoint)");
        return d;
    };
    ck.adam.lr = real("train.lr");
    ck.adam.min_lr_frac = real("train.min_lr_frac");
    ck.adam.beta1 = real("train.beta1");
    ck.adam.beta2 = real("train.beta2");
    ck.adam.eps = real("train.eps");
    ck.adam.weight_decay = real("train.weight_decay");
    ck.adam.clip = real("train.clip");
    ck.loss.aux = real("train.aux_loss");
    ck.loss.z = real("train.z_loss");
    ck.bias_rate = real("train.bias_balance");
    ck.vocab = tokenizer::load_vocab(f);
    const std::vector<ParamInfo> layout = param_layout(c);
    const size_t n = param_count(layout);
    ck.params.resize(n);
    ck.opt = AdamW(n);
    ck.opt.t = static_cast<int64_t>(need("train.adam_t"));
    auto load = [&](const std::string& name, const std::vector<int64_t>& shape, float* dst) {
        const gguf::TensorInfo* t = f.find_tensor(name);
        if (!t) throw_error(kC, path, ": tensor ", name, " is missing (incomplete checkpoint)");
        size_t count = 1;
        for (size_t d = 0; d < 4; ++d) {
            const int64_t want = d < shape.size() ? shape[d] : 1;
            if (t->ne[d] != want) throw_error(kC, path, ": tensor ", name, " has the wrong shape for this model");
            count *= static_cast<size_t>(want);
        }
        if (t->type != DType::F32) throw_error(kC, path, ": tensor ", name, " is ", dtype_name(t->type), ", expected f32");
        std::memcpy(dst, f.view(*t).data, count * sizeof(float));
    };
    for (const auto& p : layout) {
        load(p.name, p.shape, ck.params.data() + p.offset);
        load("train.adam_m." + p.name, p.shape, ck.opt.m.data() + p.offset);
        load("train.adam_v." + p.name, p.shape, ck.opt.v.data() + p.offset);
    }
    ck.sel_bias.assign(static_cast<size_t>(c.n_layer), {});
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string nm = "train.sel_bias." + std::to_string(il);
        if (f.find_tensor(nm)) {
            ck.sel_bias[static_cast<size_t>(il)].resize(static_cast<size_t>(c.n_expert));
            load(nm, {c.n_expert}, ck.sel_bias[static_cast<size_t>(il)].data());
        }
    }
    return ck;
}

}  // namespace moe::train
