// GGUF tensors -> ModelWeights, checked against the tensor catalog (see weights.h).
#include "model/weights.h"

#include <cstring>
#include <unordered_map>

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
        if (desc.layer.qkv_bias) {
            l.bq = b.get(p + "attn_q.bias");
            l.bk = b.get(p + "attn_k.bias");
            l.bv = b.get(p + "attn_v.bias");
        }
        if (desc.layer.qk_norm != QkNorm::None) {
            l.q_norm = b.get(p + "attn_q_norm.weight");
            l.k_norm = b.get(p + "attn_k_norm.weight");
        }
        l.ffn_norm = b.get(p + "ffn_norm.weight");
        if (cfg.is_moe_layer(il)) {
            MoeWeights& m = l.moe;
            m.layer = static_cast<int>(il);
            m.router = b.get(p + "ffn_gate_inp.weight");
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
        MOE_ASSERT(l.wq.data && l.wk.data && l.wv.data && l.wo.data && l.attn_norm.data && l.ffn_norm.data);
        MOE_ASSERT(!desc.layer.qkv_bias || (l.bq.data && l.bk.data && l.bv.data));
        MOE_ASSERT(desc.layer.qk_norm == QkNorm::None || (l.q_norm.data && l.k_norm.data));
    }
    MOE_ASSERT(w.token_embd.data && w.output_norm.data && w.output.data);
    return w;
}

}  // namespace moe::model
