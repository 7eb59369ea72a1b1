#pragma once
// A loaded model: the mmapped GGUF file, its config and architecture description, the tokenizer,
// the bound weights, the kernels, the RoPE cache and one MoeBlock per MoE layer (scratch planned
// for opts.max_batch rows and opts.n_threads threads, one arena shared by all blocks). Weights stay
// in the mapping at their file type (weights.h), so resident memory is the file's touched pages.
// Running it is Forward's job (forward.h).
//
//   auto m = Model::load("model.gguf", {.n_threads = 4, .max_batch = 512, .n_ctx = 2048});
//
// Loading checks everything a forward pass relies on (architecture, hyperparameters, every tensor's
// presence, shape and type, the vocabulary) and throws moe::Error naming the problem and the file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/mem_limit.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ref/rope.h"
#include "model/arch_spec.h"
#include "model/config.h"
#include "model/weights.h"
#include "moe/expert_cache.h"
#include "moe/experts.h"
#include "moe/moe_block.h"

namespace moe::gguf {
class File;
}
namespace moe::tokenizer {
class Tokenizer;
}

namespace moe::model {

// Memory budget (--mem): routed experts in a tiered cache (moe/expert_cache.h, docs/TIERING.md).
struct ExpertCacheOptions {
    uint64_t mem_budget = 0;       // bytes the process may use; 0 = off (experts read in the mapping)
    std::string policy = "lru";    // cache_policy.h names
    std::string profile;           // routing profile (TSV trace or counts JSON) for "pinned"
    ExpertIo io = ExpertIo::Uring;
    bool direct = true;            // O_DIRECT reads (falls back to buffered where refused)
    bool prefetch = true;          // router-lookahead prefetch of the next MoE layer's experts
    int64_t kv_seqs = 1;           // sequences of n_ctx the KV cache will hold (moe serve: --parallel)
    DType kv_type = DType::F32;    // the KV cache's type (runtime::SessionOptions::kv_type)
    bool swa_full = false;         // sliding-window layers keep every position (SessionOptions::swa_full)
    bool repack_experts = false;   // --repack-experts: Q2_K / Q3_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 routed experts as panels (blocks released)
    bool repack = false;           // --repack: the same plus the dense projections and the lm head (Model::dense_panels)
    // The CLI's default (off here, for library users and tests): as --repack where nothing asks
    // otherwise (no repack flag, no --mem) and the file fits in the process's memory limit with a
    // margin (the panels are anonymous memory: a file that does not fit would no longer page from
    // disk but be killed); else no repack. Model::repack_note says which and why.
    bool repack_auto = false;
};

// What the budget is spent on (filled when the cache is on).
struct MemoryBudget {
    uint64_t budget = 0;
    uint64_t resident = 0;   // non-expert tensors in the mapping + converted vectors
    uint64_t kv = 0;         // KV cache of n_ctx positions x kv_seqs sequences at kv_type (rings included)
    uint64_t scratch = 0;    // MoE scratch + a fixed runtime allowance
    uint64_t slot = 0;       // bytes of one expert slot
    uint64_t minimum = 0;    // resident + kv + scratch + top_k slots
    int slots = 0;
    int total_experts = 0;   // MoE layers x n_expert
};

// ExpertCacheOptions::repack_auto's rule: repack where no --mem is given (mem_budget 0) and a file
// of file_bytes fits auto_memory_budget(*limit) (the --mem auto margin); limit null: none could be
// read. *note says which and why (Model::repack_note).
bool repack_by_default(uint64_t mem_budget, uint64_t file_bytes, const MemLimit* limit, std::string* note);

struct ModelOptions {
    int n_threads = 0;        // largest thread pool forward() will be given; <= 0: hardware threads
    int64_t max_batch = 512;  // most rows in one forward call
    int64_t n_ctx = 0;        // positions per sequence (RoPE cache); 0: min(n_ctx_train, 4096)
    ExpertCacheOptions cache = {};  // off by default; "= {}": GCC 12 warns on designated initializers that omit it
};

class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, const ModelOptions& opts = {});
    // Same over an already opened/parsed file (e.g. gguf::File::parse of bytes in memory: the
    // fuzz target fuzz/targets/gguf_bind.cpp). The bytes must outlive the model.
    static std::unique_ptr<Model> load(gguf::File file, const ModelOptions& opts = {});
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const std::string& path() const { return path_; }
    const ModelConfig& config() const { return cfg_; }
    const ArchDesc& desc() const { return desc_; }
    const ModelWeights& weights() const { return weights_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tok_; }
    const kernels::CpuKernels& kernels() const { return kernels_; }
    const RopeCache& rope() const { return *rope_; }
    const ModelOptions& options() const { return opts_; }  // resolved (no zeros)
    const gguf::File& file() const { return *file_; }
    // MoE block of layer il (nullptr for a dense layer).
    MoeBlock* moe_block(int64_t il) const { return moe_[static_cast<size_t>(il)].get(); }

    uint64_t n_params() const;      // elements of every tensor the forward pass uses
    uint64_t file_bytes() const;    // size of the GGUF file
    size_t moe_scratch_bytes() const { return moe_scratch_.capacity(); }  // shared MoE scratch
    std::string describe() const;   // one line: arch, name, layers, dims, experts
    // The expert cache (--mem), or nullptr when experts are read in place.
    ExpertCache* expert_cache() const { return cache_.get(); }
    const MemoryBudget& memory_budget() const { return budget_; }
    // Bytes of panels made by --repack-experts (0: none; ExpertCacheOptions::repack_experts).
    size_t panel_bytes() const { return panel_bytes_; }
    // Bytes of the file's mapping released because panels serve every call of those stacks
    // (gguf::File::release_pages; 0 without --repack-experts or for types with no panel GEMM).
    size_t released_bytes() const { return released_bytes_; }
    // True if p lies in a tensor whose pages were released that way (touching it would fault them back).
    bool released(const void* p) const;
    // --repack: the panels of the dense projection or lm head whose blocks start at w (a weight's
    // TensorView::data), or null where that matrix was not repacked (no panel layout or GEMM for its
    // type, K not whole super-blocks, not the AVX-512 kernel, or no --repack). Every call of such a
    // matrix reads the panels (Forward::Proj::panels). Made once per Model: every Forward shares them.
    const uint8_t* dense_panels(const void* w) const;
    // Bytes of those panels, and of their blocks released from the mapping (not the tied lm head's:
    // the embedding lookup still reads token_embd's rows).
    size_t dense_panel_bytes() const { return dense_panel_bytes_; }
    // ExpertCacheOptions::repack_auto: what it decided and why (empty without repack_auto).
    const std::string& repack_note() const { return repack_note_; }
    size_t dense_released_bytes() const { return dense_released_bytes_; }
    size_t dense_matrices() const { return dense_.size(); }
    // MOE_AMX_BF16=1 (CpuKernels::amx_bf16): the bf16 panels (kernels/cpu/matmul_bf16_amx.h) of
    // the dense F16 / BF16 projection or lm head whose rows start at w, or null (not on, another
    // type, K % 32 != 0). Prefill calls of m >= bf16amx::kMinRows rows read them (Forward::Proj::
    // bf16_panels); decode stays on the f16 / bf16 kernels, so the rows stay resident too.
    const uint16_t* bf16_panels(const void* w) const;
    size_t bf16_panel_bytes() const { return bf16_panel_bytes_; }
    // One line for the CLI when MOE_AMX_BF16=1 (empty otherwise).
    const std::string& amx_bf16_note() const { return amx_bf16_note_; }

private:
    Model();
    std::string path_;
    std::unique_ptr<gguf::File> file_;
    ModelConfig cfg_;
    ArchDesc desc_;
    ModelOptions opts_;
    kernels::CpuKernels kernels_;
    std::unique_ptr<tokenizer::Tokenizer> tok_;
    ModelWeights weights_;
    std::unique_ptr<RopeCache> rope_;
    std::vector<std::unique_ptr<MoeBlock>> moe_;
    Arena moe_scratch_;  // one scratch arena for every MoE block (layers run one after another)
    std::unique_ptr<ExpertCache> cache_;
    MemoryBudget budget_;
    size_t panel_bytes_ = 0;
    size_t released_bytes_ = 0;
    std::vector<std::pair<const char*, size_t>> released_;  // [begin, bytes) of released stacks / matrices
    PanelBuffer dense_store_;                                  // --repack: all dense panels, one buffer
    std::vector<std::pair<const void*, const uint8_t*>> dense_;  // (blocks, panels) of each repacked matrix
    size_t dense_panel_bytes_ = 0;
    size_t dense_released_bytes_ = 0;
    std::string repack_note_;
    PanelBuffer bf16_store_;                                      // MOE_AMX_BF16=1: all bf16 panels
    std::vector<std::pair<const void*, const uint16_t*>> bf16_;  // (rows, bf16 panels) per matrix
    size_t bf16_panel_bytes_ = 0;
    std::string amx_bf16_note_;
    void repack_bf16();  // model_bf16.cpp
    void attach_expert_cache();
    void repack_dense();
    bool auto_repack(uint64_t mem_budget);  // ExpertCacheOptions::repack_auto's decision (sets repack_note_)
};

}  // namespace moe::model
