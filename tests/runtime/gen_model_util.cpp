#include "runtime/gen_model_util.h"

#include "model/gen.h"

namespace moe::testutil {

std::string gen_model(const std::filesystem::path& dir, const std::string& preset, DType type, uint64_t seed,
                      bool name_type) {
    const std::filesystem::path p = dir / (name_type ? preset + "-" + dtype_name(type) + ".gguf" : preset + ".gguf");
    if (!std::filesystem::exists(p)) {
        model::GenSpec g;
        g.preset = preset;
        g.seed = seed;
        g.type = type;
        g.output = p.string();
        g.threads = 1;
        model::generate(g);
    }
    return p.string();
}

}  // namespace moe::testutil
