// Model::load: open + validate the GGUF, describe the architecture, bind weights, build MoE blocks.
#include "model/model.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/mem_limit.h"
#include "format/gguf.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "model/param_count.h"
#include "tokenizer/tokenizer.h"

namespace moe::model {

namespace {
// llama.cpp's rope.scaling.type values; config_from_gguf maps the ones it knows and would read
// anything else as "none", so the forward pass rejects the others here.
void check_rope_scaling_key(const gguf::File& f, const ModelConfig& c) {
    const auto type = f.get_string(c.arch + ".rope.scaling.type");
    if (type && *type != "none" && *type != "linear" && *type != "yarn")
        throw_error("model", f.path(), ": rope scaling type '", *type, "' (key ", c.arch,
                    ".rope.scaling.type) is not supported (supported: none, linear, yarn)");
    // Keys config_from_gguf does not map: refuse rather than run a different model.
    if (auto g = f.get_int(c.arch + ".expert_gating_func"); g && (*g < 1 || *g > 3))
        throw_error("model", f.path(), ": expert gating function ", *g, " (key ", c.arch,
                    ".expert_gating_func) is not supported (supported: 1 softmax, 2 sigmoid, 3 softmax over top-k)");
    // gpt-oss: llama.cpp reads an optional separate RoPE base for the sliding-window layers.
    if (auto b = f.get_float(c.arch + ".rope.freq_base_swa"); b && *b != c.rope_freq_base)
        throw_error("model", f.path(), ": key ", c.arch, ".rope.freq_base_swa = ", *b,
                    " differs from rope.freq_base = ", c.rope_freq_base,
                    "; a separate RoPE base for sliding-window layers is not supported");
    for (const char* k : {".attention.temperature_scale", ".attention.temperature_length"})
        if (f.find(c.arch + k))
            throw_error("model", f.path(), ": attention temperature tuning (key ", c.arch, k,
                        ") is not supported by the forward pass");
}
}  // namespace

Model::Model() : kernels_(kernels::CpuKernels::from_env()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const ModelOptions& opts) {
    return load(gguf::File::open(path), opts);
}

std::unique_ptr<Model> Model::load(gguf::File file, const ModelOptions& opts) {
    std::unique_ptr<Model> m(new Model());
    m->path_ = file.path();
    m->file_ = std::make_unique<gguf::File>(std::move(file));
    const std::string& path = m->path_;
    const gguf::File& f = *m->file_;
    if (auto arch = f.get_string("general.architecture");
        arch && std::find(forward_archs().begin(), forward_archs().end(), *arch) == forward_archs().end())
        throw_error("model", path, ": architecture '", *arch, "' is not supported by the forward pass (supported: ",
                    forward_archs_list(), ")");
    m->cfg_ = config_from_gguf(f);
    check_rope_scaling_key(f, m->cfg_);
    m->desc_ = describe_arch(m->cfg_);

    ModelOptions o = opts;
    if (o.n_threads <= 0) o.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (o.max_batch < 1) throw_error("model", "max batch ", o.max_batch, " must be >= 1");
    if (o.n_ctx <= 0) o.n_ctx = std::min<int64_t>(m->cfg_.n_ctx_train > 0 ? m->cfg_.n_ctx_train : 4096, 4096);
    m->opts_ = o;

    m->tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(f));
    if (static_cast<int64_t>(m->tok_->size()) > m->cfg_.n_vocab)
        throw_error("model", path, ": the vocabulary has ", m->tok_->size(), " tokens but the model only ",
                    m->cfg_.n_vocab, " logits (token_embd / output rows)");

    m->weights_ = bind_weights(f, m->cfg_, m->desc_, m->kernels_);
    m->rope_ = std::make_unique<RopeCache>(m->desc_.rope, o.n_ctx);
    m->moe_.resize(static_cast<size_t>(m->cfg_.n_layer));
    // Blocks run one after another: one arena sized for the largest block serves them all (instead
    // of one per layer, which is GBs at real shapes and max_batch 512). Each block hands its own
    // arena back as soon as it is built, so at most one is held at a time.
    for (int64_t il = 0; il < m->cfg_.n_layer; ++il) {
        if (!m->cfg_.is_moe_layer(il)) continue;
        auto b = std::make_unique<MoeBlock>(m->desc_.moe, m->weights_.layers[static_cast<size_t>(il)].moe,
                                            m->kernels_, o.max_batch, o.n_threads);
        if (b->scratch_needed() > m->moe_scratch_.capacity()) {
            m->moe_scratch_.reserve(b->scratch_needed());  // nothing carved yet: growing is safe
            for (const auto& prev : m->moe_)
                if (prev) prev->use_shared_scratch(&m->moe_scratch_);
        }
        b->use_shared_scratch(&m->moe_scratch_);
        m->moe_[static_cast<size_t>(il)] = std::move(b);
    }
    if (o.cache.repack_auto && !o.cache.repack && !o.cache.repack_experts) {
        o.cache.repack = m->auto_repack(o.cache.mem_budget);
        m->opts_.cache.repack = o.cache.repack;
    }
    if (o.cache.repack_experts || o.cache.repack) {
        if (o.cache.mem_budget > 0)
            throw_error("model", o.cache.repack ? "--repack" : "--repack-experts",
                        " needs every expert resident: it cannot be combined with --mem");
        for (const auto& b : m->moe_) {
            if (!b) continue;
            m->panel_bytes_ += b->repack_experts();
            // stacks whose every call reads the panels (ExpertMatrix::panels_serve_all): their blocks
            // leave the resident set, so the repack does not double those bytes
            const std::pair<const moe::ExpertFfn*, int64_t> stacks[] = {{&b->routed_ffn(), m->cfg_.n_expert},
                                                                         {&b->shared_ffn(), 1}};  // shared: a stack of one
            for (const auto& [f, count] : stacks)
                for (const moe::ExpertMatrix* x : {&f->gate, &f->up, &f->down})
                    if (x->panels && x->panels_serve_all && !x->slots) {
                        const size_t n = static_cast<size_t>(count) * x->expert_stride;
                        const size_t r = m->file_->release_pages(x->data, n);
                        if (r > 0) m->released_.emplace_back(x->data, n);
                        m->released_bytes_ += r;
                    }
        }
    }
    if (o.cache.repack) m->repack_dense();
    if (m->kernels_.amx_bf16()) m->repack_bf16();
    if (o.cache.repack_auto && o.cache.repack && m->panel_bytes_ == 0 && m->dense_panel_bytes_ == 0)
        m->repack_note_ = "nothing repacked: no weight has a panel layout here (types Q2_K / Q3_K / Q4_K / Q5_K / Q6_K with "
                          "rows of whole 256-value super-blocks, Q8_0 / Q4_0 / Q5_0 / MXFP4 of 32-value blocks, on a CPU with "
                          "AVX-512 VNNI and GFNI)";
    if (o.cache.mem_budget > 0) m->attach_expert_cache();
    return m;
}

bool repack_by_default(uint64_t mem_budget, uint64_t file_bytes, const MemLimit* limit, std::string* note) {
    if (mem_budget > 0) {
        *note = "no repack: --mem streams the experts (the panels need every expert resident)";
        return false;
    }
    if (!limit) {
        *note = "no repack: no memory limit could be read (--repack forces it)";
        return false;
    }
    if (file_bytes > auto_memory_budget(*limit)) {
        *note = "no repack: the file (" + std::to_string(file_bytes >> 20) + " MiB) does not fit the memory limit (" +
                std::to_string(limit->bytes >> 20) + " MiB, " + limit->source + ") with a margin; --repack forces it";
        return false;
    }
    *note = "repacked by default (the file fits the memory limit of " + std::to_string(limit->bytes >> 20) + " MiB, " +
            limit->source + "); --no-repack turns it off";
    return true;
}

// Without a repack a file larger than memory still runs from the page cache; its panels,
// anonymous memory, would not: hence the limit check (repack_by_default).
bool Model::auto_repack(uint64_t mem_budget) {
    std::optional<MemLimit> lim;
    try {
        lim = process_memory_limit();
    } catch (const Error&) {
    }
    return repack_by_default(mem_budget, file_->file_size(), lim ? &*lim : nullptr, &repack_note_);
}

// --repack: each dense projection and the lm head with panels (experts.h panels_fit) whose type
// also has a panel GEMM, so every call (decode GEMV, prefill GEMM) reads the panels and the blocks
// can leave the resident set. Done once here, not per Forward: a server or batch run builds several
// Forwards over one Model, and they all look the panels up (dense_panels).
void Model::repack_dense() {
    struct Job {
        const TensorView* t;
        bool release;
        size_t at;  // offset of its panels in the shared buffer
    };
    std::vector<Job> jobs;
    size_t total = 0;
    auto want = [&](const TensorView& t, bool release) {
        if (!t.data || t.nrows() != t.ne[1]) return;  // absent or not 2-D
        for (const Job& j : jobs)
            if (j.t->data == t.data) return;
        if (!panels_fit(t.type, t.ne[0], kernels_.matmul(t.type, t.name)) || !kernels::panel::panel_gemm_supported(t.type))
            return;
        jobs.push_back({&t, release, total});
        total += (kernels::panel::panel_matrix_bytes(t.type, t.ne[1], t.ne[0]) + 63) / 64 * 64;
    };
    for (const LayerWeights& w : weights_.layers)
        for (const TensorView* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_gate, &w.ffn_up, &w.ffn_down, &w.wq_a, &w.wq_b, &w.wkv_a})
            want(*t, true);
    // tied embeddings: token_embd's rows are still read one per token, so keep those pages
    want(weights_.output, weights_.output.data != weights_.token_embd.data);
    if (jobs.empty()) return;
    // one buffer for all (OLMoE: 65 matrices of 1-50 MiB; 2 MiB pages each would waste ~1 MiB apiece)
    dense_store_.bytes.reset(static_cast<uint8_t*>(huge_alloc(total)));
    if (!dense_store_.bytes) throw_error("model", "out of memory repacking ", total, " bytes of dense panels (--repack)");
    dense_panel_bytes_ = total;
    for (const Job& j : jobs) {
        const TensorView& t = *j.t;
        uint8_t* p = dense_store_.bytes.get() + j.at;
        repack_panels_into(t.type, static_cast<const char*>(t.data), 0, t.nb[1], 1, t.ne[1], t.ne[0], p);
        dense_.emplace_back(t.data, p);
        if (!j.release) continue;
        const size_t n = static_cast<size_t>(t.nb[1]) * static_cast<size_t>(t.ne[1]);
        const size_t r = file_->release_pages(t.data, n);
        if (r > 0) released_.emplace_back(static_cast<const char*>(t.data), n);
        dense_released_bytes_ += r;
    }
}

const uint8_t* Model::dense_panels(const void* w) const {
    for (const auto& [blocks, panels] : dense_)
        if (blocks == w) return panels;
    return nullptr;
}

bool Model::released(const void* p) const {
    const char* c = static_cast<const char*>(p);
    for (const auto& [b, n] : released_)
        if (c >= b && c < b + n) return true;
    return false;
}

namespace {
std::string mib(uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; }
// Code, tokenizer, forward scratch, allocator slack: not counted one by one.
constexpr uint64_t kRuntimeAllowance = 64ull << 20;
}  // namespace

void Model::attach_expert_cache() {
    const ExpertCacheOptions& co = opts_.cache;
    const gguf::File& f = *file_;
    ExpertCacheSpec spec;
    spec.path = path_;
    spec.n_layer = static_cast<int>(cfg_.n_layer);
    spec.n_expert = static_cast<int>(cfg_.n_expert);
    spec.policy = co.policy;
    spec.io = co.io;
    spec.direct = co.direct;
    spec.prefetch = co.prefetch;
    uint64_t expert_bytes = 0;
    static const char* const kNames[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int64_t il = 0; il < cfg_.n_layer; ++il) {
        if (!moe_[static_cast<size_t>(il)]) continue;
        ExpertLayerFile lf;
        lf.layer = static_cast<int>(il);
        for (int c = 0; c < 3; ++c) {
            const gguf::TensorInfo* t = f.find_tensor("blk." + std::to_string(il) + "." + kNames[c] + ".weight");
            MOE_ASSERT(t && t->ne[2] == cfg_.n_expert, "expert tensor of layer ", il);
            lf.offset[c] = f.data_offset() + t->offset;
            lf.stride[c] = t->nbytes / static_cast<uint64_t>(cfg_.n_expert);
            expert_bytes += t->nbytes;
        }
        spec.layers.push_back(lf);
    }
    if (spec.layers.empty())
        throw_error("model", path_, ": --mem needs a MoE model (this one has no routed experts to cache)");
    MemoryBudget& b = budget_;
    b.budget = co.mem_budget;
    b.resident = weights_.mapped_bytes - expert_bytes + weights_.converted_bytes;
    const int64_t kv_seqs = std::max<int64_t>(1, co.kv_seqs);
    b.kv = kv_cache_bytes(cfg_, co.kv_type, opts_.n_ctx, opts_.max_batch, co.swa_full) * static_cast<uint64_t>(kv_seqs);
    b.scratch = moe_scratch_.capacity() + kRuntimeAllowance;
    b.slot = ExpertCache::slot_bytes(spec.layers);
    b.total_experts = static_cast<int>(spec.layers.size()) * spec.n_expert;
    const uint64_t fixed = b.resident + b.kv + b.scratch;
    b.minimum = fixed + static_cast<uint64_t>(desc_.moe.top_k) * b.slot;
    if (b.budget < b.minimum)
        throw_error("model", path_, ": --mem ", mib(b.budget), " is below the minimum of ", mib(b.minimum),
                    " for this model (resident weights ", mib(b.resident), " + KV cache of ",
                    kv_seqs > 1 ? std::to_string(kv_seqs) + " x " : std::string(), opts_.n_ctx, " positions ",
                    mib(b.kv), " + scratch ", mib(b.scratch), " + ", desc_.moe.top_k,
                    " experts of one layer ", mib(static_cast<uint64_t>(desc_.moe.top_k) * b.slot),
                    "); give --mem of at least ", mib(b.minimum), " or a shorter --ctx",
                    kv_seqs > 1 ? " or fewer --parallel slots" : "");
    b.slots = static_cast<int>(std::min<uint64_t>((b.budget - fixed) / b.slot, static_cast<uint64_t>(b.total_experts)));
    spec.n_slots = b.slots;
    if (co.policy == "pinned" && !co.profile.empty()) spec.profile = load_routing_profile(co.profile);
    cache_ = std::make_unique<ExpertCache>(std::move(spec));
    MoeBlock* prev = nullptr;
    for (auto& blk : moe_) {
        if (!blk) continue;
        blk->set_expert_store(cache_.get());
        if (prev && co.prefetch) prev->set_prefetch_next(blk.get());
        prev = blk.get();
    }
}

uint64_t Model::n_params() const {
    uint64_t n = 0;
    for (const auto& t : file_->tensors()) n += static_cast<uint64_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    return n;
}

uint64_t Model::file_bytes() const { return file_->file_size(); }

std::string Model::describe() const {
    std::ostringstream os;
    os << cfg_.arch << " '" << cfg_.name << "': " << cfg_.n_layer << " layers, n_embd " << cfg_.n_embd << ", heads "
       << cfg_.n_head << "/" << cfg_.n_head_kv << " x " << cfg_.head_dim_k << ", vocab " << cfg_.n_vocab;
    if (cfg_.is_moe()) os << ", MoE " << desc_.moe.describe();
    return os.str();
}

}  // namespace moe::model
