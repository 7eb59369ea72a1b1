// Named model shapes for `moe train --preset` (see preset.h and docs/TRAINING.md).
#include "train/preset.h"

#include "core/error.h"

namespace moe::train {
namespace {

struct Named {
    const char* name;
    int64_t vocab, embd, layers, heads, kv_heads, head_dim, ff;
    int experts, top_k;
    int64_t ctx;
};

// shakespeare: the shipped default model (models/shakespeare-moe.gguf); small: the shape of the
// MoE-vs-dense and balancing measurements; tiny: tests (trains in well under a second a step).
constexpr Named kPresets[] = {
    {"tiny", 300, 32, 2, 2, 1, 16, 32, 4, 2, 32},
    {"small", 512, 64, 2, 2, 1, 32, 64, 8, 2, 64},
    {"shakespeare", 1024, 128, 4, 4, 2, 32, 128, 16, 2, 128},
};

}  // namespace

std::string preset_names() {
    std::string s;
    for (const Named& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
    return s;
}

ShapePreset shape_preset(const std::string& name) {
    for (const Named& p : kPresets) {
        if (name != p.name) continue;
        ShapePreset s;
        s.vocab_size = p.vocab;
        s.net.n_embd = p.embd;
        s.net.n_layer = p.layers;
        s.net.n_head = p.heads;
        s.net.n_head_kv = p.kv_heads;
        s.net.head_dim = p.head_dim;
        s.net.n_ff = p.ff;
        s.net.n_expert = p.experts;
        s.net.n_expert_used = p.top_k;
        s.net.n_ctx = p.ctx;
        return s;
    }
    throw_error("train", "--preset '", name, "' is unknown (known: ", preset_names(), ")");
}

}  // namespace moe::train
