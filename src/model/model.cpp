// Model::load: open + validate the GGUF, describe the architecture, bind weights, build MoE blocks.
#include "model/model.h"

#include <algorithm>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "format/gguf.h"
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
    return m;
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
