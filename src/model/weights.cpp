// GGUF tensors -> ModelWeights, checked against the tensor catalog (see weights.h).
#include "model/weights.h"

#include <cstring>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "format/gguf.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dequant_row.h"
#include "kernels/ref/dequant_row.h"
#include "model/arch_spec.h"
#include "model/tensor_catalog.h"

namespace moe::model {

std::string supported_weight_types(const kernels::CpuKernels& k) {
    std::string s;
    for (DType t : kernels::CpuKernels::kMatmulTypes)
        if (k.has_matmul(t)) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
    return s;
}

namespace {

// How the forward pass reads a tensor, which decides the types it may have.
enum class Use { Matrix, Embedding, Vector };

Use use_of(const TensorSpec& spec) {
    if (spec.name == "token_embd.weight") return Use::Embedding;
    return spec.shape.size() >= 2 ? Use::Matrix : Use::Vector;
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
    return o + "]";
}

class Binder {
public:
    Binder(const gguf::File& f, ModelWeights& w, const kernels::CpuKernels& k) : f_(f), w_(w), k_(k) {}

    // Checks one catalog entry against the file and makes its view (in place, or f32 for vectors).
    void bind(const TensorSpec& spec) {
        const gguf::TensorInfo* t = f_.find_tensor(spec.name);
        if (!t)
            throw_error("weights", f_.path(), ": tensor '", spec.name, "' is missing (expected shape ",
                        shape_str(spec.shape), "); the file does not match its architecture's tensor list");
        bool ok = spec.shape.size() <= kMaxDims;
        for (int d = 0; ok && d < kMaxDims; ++d) {
            const int64_t want = d < static_cast<int>(spec.shape.size()) ? spec.shape[d] : 1;
            ok = t->ne[d] == want;
        }
        TensorView v = f_.view(*t);
        if (!ok)
            throw_error("weights", f_.path(), ": tensor '", spec.name, "' has shape ", v.shape_string(), ", expected ",
                        shape_str(spec.shape));
        switch (use_of(spec)) {
        case Use::Matrix:
            if (!k_.has_matmul(t->type)) unsupported(spec.name, t->type, supported_weight_types(k_));
            w_.mapped_bytes += v.nbytes();
            break;
        case Use::Embedding:
            if (!ref::dequant_row_supported(t->type))
                unsupported(spec.name, t->type, "types with a row dequantizer, e.g. " + supported_weight_types(k_));
            w_.mapped_bytes += v.nbytes();
            break;
        case Use::Vector:
            if (t->type == DType::F32)
                w_.mapped_bytes += v.nbytes();
            else if (t->type == DType::F16 || t->type == DType::BF16)
                v = convert(v);
            else
                unsupported(spec.name, t->type, "f32, f16, bf16 for norm weights and biases");
            break;
        }
        views_[spec.name] = v;
    }

    [[noreturn]] void unsupported(const std::string& name, DType type, const std::string& supported) const {
        throw_error("weights", f_.path(), ": tensor '", name, "' has type ", dtype_name(type),
                    ", which the forward pass has no kernel for (supported: ", supported, ")");
    }

    TensorView get(const std::string& name) const {
        auto it = views_.find(name);
        return it == views_.end() ? TensorView{} : it->second;
    }

private:
    TensorView convert(const TensorView& src) {
        const int64_t n = src.nelements();
        auto buf = std::make_unique<float[]>(static_cast<size_t>(n));
        for (int64_t r = 0; r < src.nrows(); ++r)
            cpu::dequant_row(src.type, static_cast<const char*>(src.data) + r * src.nb[1], buf.get() + r * src.ne[0],
                             src.ne[0]);
        TensorView v = make_view(src.name, DType::F32, src.n_dims, src.ne.data(), buf.get());
        w_.converted_bytes += static_cast<uint64_t>(n) * sizeof(float);
        w_.owned.push_back(std::move(buf));
        return v;
    }

    const gguf::File& f_;
    ModelWeights& w_;
    const kernels::CpuKernels& k_;
    std::unordered_map<std::string, TensorView> views_;
};

// f32 copy of a bound matrix (any type with a row dequantizer), rows of ne0.
std::vector<float> to_f32(const TensorView& t) {
    std::vector<float> out(static_cast<size_t>(t.nelements()));
    for (int64_t r = 0; r < t.nrows(); ++r)
        ref::dequant_row(t.type, static_cast<const char*>(t.data) + r * t.nb[1], out.data() + r * t.ne[0], t.ne[0]);
    return out;
}

TensorView own_f32(ModelWeights& w, const std::string& name, std::vector<float> v, int64_t ne0, int64_t ne1,
                   int64_t ne2) {
    auto buf = std::make_unique<float[]>(v.size());
    std::memcpy(buf.get(), v.data(), v.size() * sizeof(float));
    const int64_t ne[3] = {ne0, ne1, ne2};
    TensorView t = make_view(name, DType::F32, 3, ne, buf.get());
    w.converted_bytes += v.size() * sizeof(float);
    w.owned.push_back(std::move(buf));
    return t;
}

// MLA tensors of one block; kv_b becomes per-head f32 k_b / v_b (see weights.h). The absorbed
// products are small per-head GEMVs (nope x r, r x v) that the f32 kernel runs with strided
// inputs; f32 keeps them exact for every file type (V2-Lite: 8 MB per layer).
void bind_mla(const Binder& b, ModelWeights& w, const ModelConfig& c, const std::string& p, LayerWeights& l) {
    const int64_t H = c.n_head, r = c.kv_lora_rank, nope = c.qk_nope_head_dim, dv = c.v_head_dim;
    l.wq_a = b.get(p + "attn_q_a.weight");
    l.q_a_norm = b.get(p + "attn_q_a_norm.weight");
    l.wq_b = b.get(p + "attn_q_b.weight");
    l.wkv_a = b.get(p + "attn_kv_a_mqa.weight");
    l.kv_a_norm = b.get(p + "attn_kv_a_norm.weight");
    if (c.mla_split_kv_b) {
        l.k_b = own_f32(w, p + "attn_k_b", to_f32(b.get(p + "attn_k_b.weight")), nope, r, H);
        l.v_b = own_f32(w, p + "attn_v_b", to_f32(b.get(p + "attn_v_b.weight")), r, dv, H);
        return;
    }
    const std::vector<float> kv = to_f32(b.get(p + "attn_kv_b.weight"));  // rows h*(nope+dv) + i, of r
    std::vector<float> kb(static_cast<size_t>(H * r * nope)), vb(static_cast<size_t>(H * dv * r));
    for (int64_t h = 0; h < H; ++h) {
        const float* base = kv.data() + h * (nope + dv) * r;
        for (int64_t i = 0; i < nope; ++i)      // k_b[h][j][i] = kv_b row (h, i) element j
            for (int64_t j = 0; j < r; ++j) kb[static_cast<size_t>((h * r + j) * nope + i)] = base[i * r + j];
        std::memcpy(vb.data() + h * dv * r, base + nope * r, sizeof(float) * static_cast<size_t>(dv * r));
    }
    l.k_b = own_f32(w, p + "attn_k_b", std::move(kb), nope, r, H);
    l.v_b = own_f32(w, p + "attn_v_b", std::move(vb), r, dv, H);
}

}  // namespace

ModelWeights bind_weights(const gguf::File& file, const ModelConfig& cfg, const ArchDesc& desc,
                          const kernels::CpuKernels& k) {
    ModelWeights w;
    Binder b(file, w, k);
    for (const TensorSpec& spec : tensor_catalog(cfg)) b.bind(spec);

    w.token_embd = b.get("token_embd.weight");
    w.output_norm = b.get("output_norm.weight");
    w.output = cfg.tied_embeddings ? w.token_embd : b.get("output.weight");
    if (cfg.tied_embeddings && !k.has_matmul(w.output.type))
        b.unsupported("token_embd.weight (tied lm head)", w.output.type, supported_weight_types(k));
    w.layers.resize(static_cast<size_t>(cfg.n_layer));
    for (int64_t il = 0; il < cfg.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights& l = w.layers[static_cast<size_t>(il)];
        l.attn_norm = b.get(p + "attn_norm.weight");
        l.wq = b.get(p + "attn_q.weight");
        l.wk = b.get(p + "attn_k.weight");
        l.wv = b.get(p + "attn_v.weight");
        l.wo = b.get(p + "attn_output.weight");
        if (desc.layer.mla) bind_mla(b, w, cfg, p, l);
        if (desc.layer.qkv_bias) {
            l.bq = b.get(p + "attn_q.bias");
            l.bk = b.get(p + "attn_k.bias");
            l.bv = b.get(p + "attn_v.bias");
        }
        if (desc.layer.qk_norm != QkNorm::None) {
            l.q_norm = b.get(p + "attn_q_norm.weight");
            l.k_norm = b.get(p + "attn_k_norm.weight");
        }
        l.ffn_norm = b.get(p + (desc.layer.post_attn_norm ? "post_attention_norm.weight" : "ffn_norm.weight"));
        if (desc.layer.o_bias) l.bo = b.get(p + "attn_output.bias");
        if (desc.layer.attn_sinks) l.sinks = b.get(p + "attn_sinks.weight");
        if (cfg.is_moe_layer(il)) {
            MoeWeights& m = l.moe;
            m.layer = static_cast<int>(il);
            m.router = b.get(p + "ffn_gate_inp.weight");
            if (desc.moe.has_selection_bias) m.selection_bias = b.get(p + "exp_probs_b.bias");
            if (desc.moe.has_router_bias) m.router_bias = b.get(p + "ffn_gate_inp.bias");
            if (desc.moe.has_expert_bias) {
                m.gate_exps_b = b.get(p + "ffn_gate_exps.bias");
                m.up_exps_b = b.get(p + "ffn_up_exps.bias");
                m.down_exps_b = b.get(p + "ffn_down_exps.bias");
            }
            m.gate_exps = b.get(p + "ffn_gate_exps.weight");
            m.up_exps = b.get(p + "ffn_up_exps.weight");
            m.down_exps = b.get(p + "ffn_down_exps.weight");
            if (desc.moe.n_shared > 0) {
                m.gate_shexp = b.get(p + "ffn_gate_shexp.weight");
                m.up_shexp = b.get(p + "ffn_up_shexp.weight");
                m.down_shexp = b.get(p + "ffn_down_shexp.weight");
            }
            if (desc.moe.shared_gate_sigmoid) m.gate_inp_shexp = b.get(p + "ffn_gate_inp_shexp.weight");
            m.validate(desc.moe);
        } else {
            l.ffn_gate = b.get(p + "ffn_gate.weight");
            l.ffn_up = b.get(p + "ffn_up.weight");
            l.ffn_down = b.get(p + "ffn_down.weight");
        }
        // Internal invariant: the catalog lists every tensor the description asks for.
        MOE_ASSERT(desc.layer.mla || (l.wq.data && l.wk.data && l.wv.data));
        MOE_ASSERT(!desc.layer.mla || ((l.wq.data || l.wq_b.data) && l.wkv_a.data && l.k_b.data && l.v_b.data));
        MOE_ASSERT(l.wo.data && l.attn_norm.data && l.ffn_norm.data);
        MOE_ASSERT((!desc.layer.o_bias || l.bo.data) && (!desc.layer.attn_sinks || l.sinks.data));
        MOE_ASSERT(!desc.layer.qkv_bias || (l.bq.data && l.bk.data && l.bv.data));
        MOE_ASSERT(desc.layer.qk_norm == QkNorm::None || (l.q_norm.data && l.k_norm.data));
    }
    MOE_ASSERT(w.token_embd.data && w.output_norm.data && w.output.data);
    return w;
}

}  // namespace moe::model
