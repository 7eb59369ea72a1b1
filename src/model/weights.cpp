// GGUF tensors -> ModelWeights, checked against the tensor catalog (see weights.h).
#include "model/weights.h"

#include <algorithm>
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

// Types whose cpu::dequant_row is fast enough to read kv_b in place at every call (AVX-512 and
// AVX2 paths, 1M values on one thread: 0.06-0.2 ns per value) against the ~0.3-0.5 ns per value that reading
// an f32 copy costs at decode's memory bandwidth. The others (the scalar reference: Q4_0 0.37,
// Q5_0 0.48 ns, the IQ family slower) keep f32 copies.
bool kv_b_in_place(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
            return true;
        default:
            return false;
    }
}

cpu::HeadRows f32_rows(ModelWeights& w, const std::string& name, std::vector<float> v, int64_t K, int64_t rows,
                       int64_t H) {
    const TensorView t = own_f32(w, name, std::move(v), K, rows, H);
    cpu::HeadRows h;
    h.data = static_cast<const uint8_t*>(t.data);
    h.type = DType::F32;
    h.row_bytes = static_cast<size_t>(K) * sizeof(float);
    h.head_rows = h.rows = rows;
    h.K = K;
    h.H = H;
    return h;
}

cpu::HeadRows in_place(const TensorView& t, int64_t head_rows, int64_t first, int64_t rows, int64_t H, bool columns) {
    cpu::HeadRows h;
    h.data = static_cast<const uint8_t*>(t.data);
    h.type = t.type;
    h.row_bytes = t.nb[1];
    h.head_rows = head_rows;
    h.first = first;
    h.rows = rows;
    h.K = t.ne[0];
    h.H = H;
    h.columns = columns;
    return h;
}

// MLA tensors of one block (k_b / v_b: see weights.h). The absorbed products are small per-head
// GEMVs (nope x r, r x v); in place they read the file's bytes, dequantized per call into f32.
void bind_mla(const Binder& b, ModelWeights& w, const ModelConfig& c, const std::string& p, LayerWeights& l) {
    const int64_t H = c.n_head, r = c.kv_lora_rank, nope = c.qk_nope_head_dim, dv = c.v_head_dim;
    if (std::max(r, nope) > cpu::kHeadRowsBuffer)
        throw_error("weights", p, "attention: kv_lora_rank ", r, " / qk_nope_head_dim ", nope, " above ",
                    cpu::kHeadRowsBuffer, ", which this engine's MLA kernels do not support");
    l.wq_a = b.get(p + "attn_q_a.weight");
    l.q_a_norm = b.get(p + "attn_q_a_norm.weight");
    l.wq_b = b.get(p + "attn_q_b.weight");
    l.wkv_a = b.get(p + "attn_kv_a_mqa.weight");
    l.kv_a_norm = b.get(p + "attn_kv_a_norm.weight");
    if (c.mla_split_kv_b) {
        const TensorView kb = b.get(p + "attn_k_b.weight"), vb = b.get(p + "attn_v_b.weight");  // [nope, r, H], [r, v, H]
        l.k_b = kv_b_in_place(kb.type) ? in_place(kb, r, 0, r, H, false) : f32_rows(w, p + "attn_k_b", to_f32(kb), nope, r, H);
        l.v_b = kv_b_in_place(vb.type) ? in_place(vb, dv, 0, dv, H, false) : f32_rows(w, p + "attn_v_b", to_f32(vb), r, dv, H);
        return;
    }
    const TensorView kvb = b.get(p + "attn_kv_b.weight");  // rows h*(nope+dv) + i, of r
    if (kv_b_in_place(kvb.type)) {
        l.k_b = in_place(kvb, nope + dv, 0, nope, H, true);
        l.v_b = in_place(kvb, nope + dv, nope, dv, H, false);
        return;
    }
    const std::vector<float> kv = to_f32(kvb);
    std::vector<float> kb(static_cast<size_t>(H * r * nope)), vb(static_cast<size_t>(H * dv * r));
    for (int64_t h = 0; h < H; ++h) {
        const float* base = kv.data() + h * (nope + dv) * r;
        for (int64_t i = 0; i < nope; ++i)      // k_b[h][j][i] = kv_b row (h, i) element j
            for (int64_t j = 0; j < r; ++j) kb[static_cast<size_t>((h * r + j) * nope + i)] = base[i * r + j];
        std::memcpy(vb.data() + h * dv * r, base + nope * r, sizeof(float) * static_cast<size_t>(dv * r));
    }
    l.k_b = f32_rows(w, p + "attn_k_b", std::move(kb), nope, r, H);
    l.v_b = f32_rows(w, p + "attn_v_b", std::move(vb), r, dv, H);
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
