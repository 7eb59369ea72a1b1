// GGUF reader + everything a loaded file feeds: what `moe inspect` computes (config, tensor table,
// parameter counts, memory plan) and what `moe run` does (Model::load: config, tokenizer, weight
// binding, MoE blocks; then a two-token greedy generation). Targets files that parse but lie:
// shapes that disagree with the config, types without kernels, vocabularies that disagree with
// the embedding, NaN weights. Properties: only moe::Error escapes, and every bound weight view lies
// inside the input bytes.
#include <cstring>

#include "format/gguf.h"
#include "fuzz/fuzz_target.h"
#include "model/arch_spec.h"
#include "model/config.h"
#include "model/model.h"
#include "model/param_count.h"
#include "runtime/session.h"

namespace moe::fuzz {
namespace {

void check_inside(const TensorView& v, const uint8_t* data, size_t size) {
    if (v.data == nullptr) return;
    const auto* p = static_cast<const uint8_t*>(v.data);
    // Views of the file point into it; converted f32 vectors (norms) are owned by the weights.
    if (p < data || p >= data + size) return;
    MOE_FUZZ_CHECK(v.nbytes() <= static_cast<uint64_t>(data + size - p), "view ", v.name, " runs past the file");
}

void inspect(const gguf::File& f) {
    for (const gguf::KV& kv : f.metadata()) (void)kv.value.to_string();
    const model::ModelConfig cfg = model::config_from_gguf(f);
    const auto tensors = model::describe_gguf(f);
    const model::ParamCounts pc = model::count_params(tensors, cfg);
    (void)model::kv_bytes_per_token(cfg, DType::F16);
    (void)model::plan_memory(cfg, pc, {256, 1, DType::F16});
}

void load_and_run(const uint8_t* data, size_t size) {
    // Small options: the bound on work is the file's own shapes, not the options.
    auto m = model::Model::load(gguf::File::parse(data, size, "<fuzz>"), {.n_threads = 1, .max_batch = 4, .n_ctx = 8});
    const model::ModelWeights& w = m->weights();
    check_inside(w.token_embd, data, size);
    check_inside(w.output, data, size);
    for (const model::LayerWeights& l : w.layers)
        for (const TensorView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            check_inside(*v, data, size);
    ThreadPool pool(1);
    runtime::Session s(*m, pool, {.n_ctx = 8});
    runtime::GenerateOptions g;
    g.n_predict = 2;
    (void)s.generate("Hi", g);
}

}  // namespace

void gguf_bind(const uint8_t* data, size_t size) {
    expect_clean([&] { inspect(gguf::File::parse(data, size, "<fuzz>")); });
    expect_clean([&] { load_and_run(data, size); });
}

}  // namespace moe::fuzz
