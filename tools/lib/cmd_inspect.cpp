// `moe inspect FILE.gguf|config.json`: architecture, hyperparameters, tokenizer, tensor table,
// parameter counts (total / active / resident bytes), KV cache per token and a memory plan.
// Counting conventions: src/model/param_count.h and docs/MODELS.md.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/placement.h"

#include "core/dtype.h"
#include "core/error.h"
#include "format/gguf.h"
#include "kernels/ref/attention.h"
#include "model/config.h"
#include "model/param_count.h"
#include "model/tensor_catalog.h"
#include "tools/lib/commands.h"

namespace moe::tools {
namespace {

using nlohmann::ordered_json;

void inspect_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe inspect FILE.gguf|config.json [--ctx N] [--batch N] [--type T] [--json] [--tensors]\n"
                 "  Architecture, hyperparameters, tokenizer, tensors, parameter counts (total, active per\n"
                 "  token, resident bytes), KV-cache bytes per token and a memory plan.\n"
                 "  A Hugging Face config.json (or DeepSeek inference config) is accepted too: the tensors\n"
                 "  are those llama.cpp would load for it, at --type (default bf16).\n"
                 "  --ctx N      KV-cache length per sequence for the memory plan (default 4096)\n"
                 "  --batch N    sequences decoded together (default 1); one step = N tokens\n"
                 "  --type T     count bytes as if the weights were T (f32, f16, bf16, q8_0, q4_0, q4_K, ...);\n"
                 "               norms, biases and router weights stay f32, as llama.cpp stores them\n"
                 "  --json       machine-readable output\n"
                 "  --tensors    list every tensor (default: one block per distinct block layout)\n"
                 "  --ep R       weight bytes each of R expert-parallel ranks maps (dense part + its experts)\n"
                 "  --placement FILE  with --ep: that placement (default: contiguous blocks of experts)\n");
}

struct Options {
    std::string path;
    int64_t ctx = 4096, batch = 1;
    std::optional<DType> type;
    bool json = false, all_tensors = false;
    int ep = 0;             // > 0: per-rank bytes for this many expert-parallel ranks
    std::string placement;  // with ep: placement file
};

int64_t parse_pos(const char* s, const char* opt) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (errno || end == s || *end || v <= 0) throw_error("inspect", opt, " expects a positive integer, got '", s, "'");
    return v;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc) throw_error("inspect", "option ", a, " needs a value (see moe inspect --help)");
            return argv[++i];
        };
        if (a == "--ctx") o.ctx = parse_pos(val(), "--ctx");
        else if (a == "--batch") o.batch = parse_pos(val(), "--batch");
        else if (a == "--type") {
            const std::string t = val();
            o.type = dtype_from_name(t);
            if (!o.type) throw_error("inspect", "--type '", t, "' is not a known tensor type (e.g. f16, bf16, q8_0, q4_K)");
        } else if (a == "--json") o.json = true;
        else if (a == "--ep") o.ep = static_cast<int>(parse_pos(val(), "--ep"));
        else if (a == "--placement") o.placement = val();
        else if (a == "--tensors") o.all_tensors = true;
        else if (!a.empty() && a[0] == '-') throw_error("inspect", "unknown option '", a, "' (see moe inspect --help)");
        else if (o.path.empty()) o.path = a;
        else throw_error("inspect", "unexpected argument '", a, "' (one file only)");
    }
    return o;
}

enum class Kind { Gguf, Json };

Kind detect(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_error("inspect", "cannot open ", path, ": ", std::strerror(errno));
    char head[4] = {};
    in.read(head, 4);
    if (in.gcount() == 4 && std::memcmp(head, "GGUF", 4) == 0) return Kind::Gguf;
    in.clear();
    in.seekg(0);
    char c;
    while (in.get(c)) {
        if (std::isspace(static_cast<unsigned char>(c))) continue;
        if (c == '{') return Kind::Json;
        throw_error("inspect", path, ": neither a GGUF file (no 'GGUF' magic) nor a JSON config.json (does not start with '{')");
    }
    throw_error("inspect", path, ": empty file (expected a GGUF file or a config.json)");
}

std::string human_bytes(uint64_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return buf;
}

std::string human_params(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.3fB", n / 1e9);
    else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.3fM", n / 1e6);
    else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    return buf;
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// Bytes rank r maps under EP: every non-routed tensor, plus each routed-expert tensor's share of
// the experts the placement puts on r in that layer ([rank] -> bytes).
std::vector<uint64_t> ep_rank_bytes(const std::vector<model::TensorDesc>& ts, const model::ModelConfig& c,
                                    const dist::Placement& p) {
    std::vector<uint64_t> out(static_cast<size_t>(p.n_ranks), 0);
    for (const auto& t : ts) {
        const int l = model::tensor_layer(t.name);
        const bool routed = t.role == model::TensorRole::RoutedExpert && l >= 0 && l < p.n_layers && c.n_expert > 0;
        for (int r = 0; r < p.n_ranks; ++r)
            out[static_cast<size_t>(r)] +=
                routed ? t.nbytes() / static_cast<uint64_t>(c.n_expert) * static_cast<uint64_t>(p.experts_on(l, r))
                       : t.nbytes();
    }
    return out;
}

// Storage type holding the most bytes among matrices (the "file's weight type").
DType dominant_type(const std::vector<model::TensorDesc>& ts) {
    std::map<DType, uint64_t> bytes;
    for (const auto& t : ts)
        if (t.shape.size() >= 2) bytes[t.type] += t.nbytes();
    DType best = DType::F32;
    uint64_t most = 0;
    for (const auto& [t, b] : bytes)
        if (b > most) best = t, most = b;
    return best;
}

ordered_json hparams_json(const model::ModelConfig& c) {
    ordered_json h;
    h["n_vocab"] = c.n_vocab;
    h["n_embd"] = c.n_embd;
    h["n_layer"] = c.n_layer;
    h["n_head"] = c.n_head;
    h["n_head_kv"] = c.n_head_kv;
    h["head_dim_k"] = c.head_dim_k;
    h["head_dim_v"] = c.head_dim_v;
    h["n_ff"] = c.n_ff;
    h["n_ctx_train"] = c.n_ctx_train;
    h["n_expert"] = c.n_expert;
    h["n_expert_used"] = c.n_expert_used;
    h["n_ff_exp"] = c.n_ff_exp;
    h["n_shared_expert"] = c.n_shared_expert;
    h["n_ff_shexp"] = c.n_ff_shexp;
    h["shared_expert_gate"] = c.shexp_gate;
    h["n_layer_dense_lead"] = c.n_layer_dense_lead;
    h["gating"] = model::gating_func_name(c.gating);
    h["expert_weights_norm"] = c.expert_weights_norm;
    h["expert_weights_scale"] = c.expert_weights_scale;
    h["n_expert_groups"] = c.n_expert_groups;
    h["n_group_used"] = c.n_group_used;
    h["selection_bias"] = c.selection_bias;
    h["qk_norm"] = model::qk_norm_name(c.qk_norm);
    h["qkv_bias"] = c.qkv_bias;
    h["n_rot"] = c.n_rot;
    h["rope_freq_base"] = c.rope_freq_base;
    h["rope_scaling"] = model::rope_scaling_name(c.rope_scaling);
    h["rope_scaling_factor"] = c.rope_scaling_factor;
    h["rms_eps"] = c.rms_eps;
    h["tied_embeddings"] = c.tied_embeddings;
    if (c.is_mla()) {
        h["q_lora_rank"] = c.q_lora_rank;
        h["kv_lora_rank"] = c.kv_lora_rank;
        h["qk_rope_head_dim"] = c.qk_rope_head_dim;
        h["qk_nope_head_dim"] = c.qk_nope_head_dim;
        h["v_head_dim"] = c.v_head_dim;
        h["n_layer_nextn"] = c.n_layer_nextn;
    }
    if (c.arch == model::kArchGptOss) {
        h["sliding_window"] = c.sliding_window;
        h["swa_pattern"] = c.swa_pattern;
        h["attn_sinks"] = c.attn_sinks;
        h["swiglu_limit"] = c.swiglu_limit;
    }
    return h;
}

ordered_json tokenizer_json(const gguf::File& f) {
    ordered_json t;
    t["model"] = f.get_string("tokenizer.ggml.model").value_or("");
    t["pre"] = f.get_string("tokenizer.ggml.pre").value_or("");
    const gguf::Value* toks = f.find("tokenizer.ggml.tokens");
    t["n_tokens"] = toks && toks->type == gguf::ValueType::ARRAY ? toks->arr.size() : 0;
    const gguf::Value* merges = f.find("tokenizer.ggml.merges");
    t["n_merges"] = merges && merges->type == gguf::ValueType::ARRAY ? merges->arr.size() : 0;
    for (const char* k : {"bos", "eos", "unknown", "padding"}) {
        const std::string key = std::string("tokenizer.ggml.") + k + "_token_id";
        if (auto id = f.get_int(key)) {
            ordered_json e;
            e["id"] = *id;
            if (toks && toks->type == gguf::ValueType::ARRAY && *id >= 0 && static_cast<size_t>(*id) < toks->arr.size())
                e["text"] = toks->arr[static_cast<size_t>(*id)].str;
            t[k] = e;
        }
    }
    t["chat_template"] = f.find("tokenizer.chat_template") != nullptr;
    return t;
}

// Block layout signature: suffixes + shapes + types of its tensors (to collapse identical blocks).
std::map<int, std::string> block_signatures(const std::vector<model::TensorDesc>& ts) {
    std::map<int, std::string> sig;
    for (const auto& t : ts) {
        const int l = model::tensor_layer(t.name);
        if (l < 0) continue;
        const std::string suffix = t.name.substr(t.name.find('.', 4) + 1);
        sig[l] += suffix + shape_str(t.shape) + dtype_name(t.type) + ";";
    }
    return sig;
}

// Per-type breakdown of the tensors (dynamic quants mix many types per file) and the bits per
// weight of the routed experts vs everything else.
struct TypeRow {
    DType type;
    uint64_t tensors = 0, params = 0, bytes = 0;
};
struct TypeBreakdown {
    std::vector<TypeRow> rows;  // by bytes, largest first
    uint64_t bytes = 0, exp_params = 0, exp_bytes = 0, rest_params = 0, rest_bytes = 0;
    static double bpw(uint64_t bytes, uint64_t params) { return params ? 8.0 * static_cast<double>(bytes) / static_cast<double>(params) : 0.0; }
};

TypeBreakdown type_breakdown(const std::vector<model::TensorDesc>& ts) {
    TypeBreakdown b;
    std::map<uint32_t, TypeRow> by;
    for (const auto& t : ts) {
        TypeRow& r = by.try_emplace(static_cast<uint32_t>(t.type), TypeRow{t.type}).first->second;
        const uint64_t n = t.nelements(), nb = t.nbytes();
        ++r.tensors;
        r.params += n;
        r.bytes += nb;
        b.bytes += nb;
        (t.role == model::TensorRole::RoutedExpert ? b.exp_params : b.rest_params) += n;
        (t.role == model::TensorRole::RoutedExpert ? b.exp_bytes : b.rest_bytes) += nb;
    }
    for (const auto& [id, r] : by) b.rows.push_back(r);
    std::sort(b.rows.begin(), b.rows.end(), [](const TypeRow& x, const TypeRow& y) { return x.bytes > y.bytes; });
    return b;
}

void print_types(const TypeBreakdown& b) {
    std::printf("\nWeight types\n");
    std::printf("  %-8s %8s %14s %12s %7s %6s\n", "type", "tensors", "params", "bytes", "share", "bpw");
    for (const auto& r : b.rows)
        std::printf("  %-8s %8llu %14s %12s %6.1f%% %6.3f\n", dtype_name(r.type), (unsigned long long)r.tensors,
                    human_params(r.params).c_str(), human_bytes(r.bytes).c_str(),
                    b.bytes ? 100.0 * static_cast<double>(r.bytes) / static_cast<double>(b.bytes) : 0.0,
                    TypeBreakdown::bpw(r.bytes, r.params));
    std::printf("  bits per weight: routed experts %.3f (%s), everything else %.3f (%s), all %.3f\n",
                TypeBreakdown::bpw(b.exp_bytes, b.exp_params), human_bytes(b.exp_bytes).c_str(),
                TypeBreakdown::bpw(b.rest_bytes, b.rest_params), human_bytes(b.rest_bytes).c_str(),
                TypeBreakdown::bpw(b.bytes, b.exp_params + b.rest_params));
}

void print_human(const Options& o, Kind kind, const model::ModelConfig& c, const gguf::File* f,
                 const std::vector<model::TensorDesc>& ts, DType wtype, bool retyped, const model::ParamCounts& pc,
                 const model::MemoryPlan& plan, uint64_t kv_tok) {
    std::printf("Architecture\n");
    std::printf("  file          %s (%s)\n", o.path.c_str(),
                kind == Kind::Gguf ? ("GGUF v" + std::to_string(f->version()) + ", " + human_bytes(f->file_size())).c_str()
                                   : "config.json: tensors are the ones llama.cpp would load");
    std::printf("  architecture  %s\n  name          %s\n", c.arch.c_str(), c.name.c_str());

    std::printf("\nHyperparameters\n");
    std::printf("  vocab %lld, embd %lld, layers %lld, heads %lld (kv %lld), head dim k/v %lld/%lld, ctx_train %lld\n",
                (long long)c.n_vocab, (long long)c.n_embd, (long long)c.n_layer, (long long)c.n_head, (long long)c.n_head_kv,
                (long long)c.head_dim_k, (long long)c.head_dim_v, (long long)c.n_ctx_train);
    if (c.is_moe()) {
        std::printf("  experts %lld, top-%lld, expert ffn %lld", (long long)c.n_expert, (long long)c.n_expert_used,
                    (long long)c.n_ff_exp);
        if (c.n_shared_expert > 0)
            std::printf(", shared experts %lld (ffn %lld%s)", (long long)c.n_shared_expert, (long long)c.n_ff_shexp,
                        c.shexp_gate ? ", sigmoid-gated" : "");
        if (c.n_layer_dense_lead > 0) std::printf(", %lld leading dense blocks (ffn %lld)", (long long)c.n_layer_dense_lead, (long long)c.n_ff);
        std::printf("\n  router: %s, renormalise %s, scale %g", model::gating_func_name(c.gating),
                    c.expert_weights_norm ? "yes" : "no", c.expert_weights_scale);
        if (c.n_expert_groups > 1) std::printf(", groups %lld keep %lld", (long long)c.n_expert_groups, (long long)c.n_group_used);
        if (c.selection_bias) std::printf(", selection bias");
        std::printf("\n");
    } else {
        std::printf("  dense ffn %lld\n", (long long)c.n_ff);
    }
    std::printf("  attention: qk-norm %s, qkv bias %s", model::qk_norm_name(c.qk_norm), c.qkv_bias ? "yes" : "no");
    if (c.is_mla())
        std::printf(", MLA q_lora %lld kv_lora %lld rope %lld nope %lld v %lld", (long long)c.q_lora_rank,
                    (long long)c.kv_lora_rank, (long long)c.qk_rope_head_dim, (long long)c.qk_nope_head_dim,
                    (long long)c.v_head_dim);
    if (c.sliding_window > 0) std::printf(", sliding window %lld (pattern %lld), sinks", (long long)c.sliding_window, (long long)c.swa_pattern);
    std::printf("\n  rope: dim %lld, base %g, scaling %s", (long long)c.n_rot, c.rope_freq_base, model::rope_scaling_name(c.rope_scaling));
    if (c.rope_scaling != model::RopeScaling::None) std::printf(" x%g (orig ctx %lld)", c.rope_scaling_factor, (long long)c.rope_orig_ctx);
    std::printf("; rms eps %g; tied embeddings %s\n", c.rms_eps, c.tied_embeddings ? "yes" : "no");

    std::printf("\nTokenizer\n");
    if (f) {
        const ordered_json t = tokenizer_json(*f);
        std::printf("  model %s, pre %s, %zu tokens, %zu merges", t["model"].get<std::string>().c_str(),
                    t["pre"].get<std::string>().c_str(), t["n_tokens"].get<size_t>(), t["n_merges"].get<size_t>());
        for (const char* k : {"bos", "eos"})
            if (t.contains(k))
                std::printf(", %s %lld%s", k, (long long)t[k]["id"].get<int64_t>(),
                            t[k].contains("text") ? (" '" + t[k]["text"].get<std::string>() + "'").c_str() : "");
        std::printf("\n");
    } else {
        std::printf("  (not part of config.json; vocab_size %lld)\n", (long long)c.n_vocab);
    }

    std::printf("\nTensors (%zu, weights as %s%s)\n", ts.size(), dtype_name(wtype), retyped ? ", recomputed for --type" : "");
    std::printf("  %-36s %-6s %-24s %12s\n", "name", "type", "shape", "bytes");
    const auto sigs = block_signatures(ts);
    std::map<std::string, std::vector<int>> groups;  // signature -> layers
    for (const auto& [l, s] : sigs) groups[s].push_back(l);
    std::map<int, const std::vector<int>*> first_of_group;
    for (const auto& [s, ls] : groups) first_of_group[ls.front()] = &ls;
    int last_layer_printed = -2;
    for (const auto& t : ts) {
        const int l = model::tensor_layer(t.name);
        if (l >= 0 && !o.all_tensors) {
            auto it = first_of_group.find(l);
            if (it == first_of_group.end()) continue;
            if (l != last_layer_printed) {
                const auto& ls = *it->second;
                std::printf("  -- blk.%d (layout shared by %zu block%s: %d..%d)\n", l, ls.size(), ls.size() == 1 ? "" : "s",
                            ls.front(), ls.back());
                last_layer_printed = l;
            }
        }
        std::printf("  %-36s %-6s %-24s %12s\n", t.name.c_str(), dtype_name(t.type), shape_str(t.shape).c_str(),
                    human_bytes(t.nbytes()).c_str());
    }
    if (!o.all_tensors && sigs.size() > first_of_group.size())
        std::printf("  (%zu blocks collapsed into %zu layouts; --tensors lists every tensor)\n", sigs.size(), first_of_group.size());
    print_types(type_breakdown(ts));

    std::printf("\nParameters\n");
    std::printf("  total                        %12s\n", human_params(pc.total).c_str());
    if (c.is_moe())
        std::printf("  active per token             %12s  (all non-routed tensors incl. embeddings and head + %lld/%lld of routed experts)\n",
                    human_params(pc.active).c_str(), (long long)c.n_expert_used, (long long)c.n_expert);
    else
        std::printf("  active per token             %12s  (dense model: every tensor)\n", human_params(pc.active).c_str());
    std::printf("  active excl. token_embd      %12s  (DeepSeek / OpenAI convention)\n", human_params(pc.active_excl_embd).c_str());
    std::printf("  resident bytes               %12s  (all tensors at their storage type)\n", human_bytes(pc.resident_bytes).c_str());
    std::printf("  by role:\n");
    for (int r = 0; r < model::kRoleCount; ++r)
        if (pc.by_role[r])
            std::printf("    %-16s %12s params %12s\n", model::role_name(static_cast<model::TensorRole>(r)),
                        human_params(pc.by_role[r]).c_str(), human_bytes(pc.bytes_by_role[r]).c_str());

    std::printf("\nKV cache\n");
    if (c.is_mla())
        std::printf("  %s per token (f16): n_layer %lld x (kv_lora_rank %lld + qk_rope %lld) x 2 B (MLA latent)\n",
                    human_bytes(kv_tok).c_str(), (long long)c.n_layer, (long long)c.kv_lora_rank, (long long)c.qk_rope_head_dim);
    else
        std::printf("  %s per token (f16): n_layer %lld x n_head_kv %lld x (k %lld + v %lld) x 2 B\n", human_bytes(kv_tok).c_str(),
                    (long long)c.n_layer, (long long)c.n_head_kv, (long long)c.head_dim_k, (long long)c.head_dim_v);
    const uint64_t kv_q8 = model::kv_bytes_per_token(c, DType::Q8_0);
    std::printf("  %s per token with --kv-type q8_0 (%.1f%% of f16; f32, the default, is 2x f16)\n", human_bytes(kv_q8).c_str(),
                kv_tok ? 100.0 * static_cast<double>(kv_q8) / static_cast<double>(kv_tok) : 0.0);
    if (c.sliding_window > 0)
        std::printf("  sliding-window layers (window %lld) keep a ring of %lld rows: window + 511 (forward calls of up\n"
                    "  to 512 rows, the default) + window - 1 mirrored; --swa-full keeps every position; the plan counts the ring\n",
                    (long long)c.sliding_window, (long long)swa_stored_rows(c.sliding_window, 512, INT64_MAX));

    std::printf("\nMemory plan (ctx %lld, batch %lld, weights %s, kv f16)\n", (long long)o.ctx, (long long)o.batch, dtype_name(wtype));
    std::printf("  weights   %12s\n", human_bytes(plan.weights_bytes).c_str());
    std::printf("  kv cache  %12s  (%lld sequences x %lld tokens)\n", human_bytes(plan.kv_bytes).c_str(), (long long)o.batch, (long long)o.ctx);
    std::printf("  scratch   %12s  (f32 working set of one %lld-token step: hidden, attention, scores, router, expert ffn, logits)\n",
                human_bytes(plan.scratch_bytes).c_str(), (long long)o.batch);
    std::printf("  total     %12s\n", human_bytes(plan.total_bytes).c_str());
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.path.empty()) {
        inspect_usage(stderr);
        return 1;
    }
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            inspect_usage(stdout);
            return 0;
        }
    const Kind kind = detect(o.path);
    std::optional<gguf::File> file;
    model::ModelConfig cfg;
    std::vector<model::TensorDesc> tensors;
    bool retyped = false;
    if (kind == Kind::Gguf) {
        file.emplace(gguf::File::open(o.path));
        cfg = model::config_from_gguf(*file);
        tensors = model::describe_gguf(*file);
        if (o.type) {
            tensors = model::retype(tensors, *o.type);
            retyped = true;
        }
    } else {
        cfg = model::config_from_hf_json(o.path);
        tensors = model::describe_catalog(model::tensor_catalog(cfg), o.type.value_or(DType::BF16));
    }
    const DType wtype = o.type.value_or(dominant_type(tensors));
    const model::ParamCounts pc = model::count_params(tensors, cfg);
    const uint64_t kv_tok = model::kv_bytes_per_token(cfg, DType::F16);
    const model::MemoryPlan plan = model::plan_memory(cfg, pc, {o.ctx, o.batch, DType::F16});

    std::vector<uint64_t> ep_bytes;
    if (o.ep > 0) {
        if (!cfg.is_moe()) throw_error("inspect", "--ep needs a MoE model; ", o.path, " has no routed experts");
        dist::Placement pl = o.placement.empty()
                                 ? dist::Placement::contiguous(static_cast<int>(cfg.n_layer), static_cast<int>(cfg.n_expert), o.ep)
                                 : dist::Placement::load(o.placement);
        pl.check_model(static_cast<int>(cfg.n_layer), static_cast<int>(cfg.n_expert), o.ep,
                       o.placement.empty() ? "contiguous" : o.placement);
        ep_bytes = ep_rank_bytes(tensors, cfg, pl);
    } else if (!o.placement.empty()) {
        throw_error("inspect", "--placement needs --ep R");
    }
    if (!o.json) {
        print_human(o, kind, cfg, file ? &*file : nullptr, tensors, wtype, retyped, pc, plan, kv_tok);
        if (!ep_bytes.empty()) {
            std::printf("\nExpert parallelism (%d ranks, %s placement): weight bytes each rank maps\n", o.ep,
                        o.placement.empty() ? "contiguous" : o.placement.c_str());
            for (size_t r = 0; r < ep_bytes.size(); ++r)
                std::printf("  rank %-4zu %12s  (%.1f%% of the file's weights)\n", r, human_bytes(ep_bytes[r]).c_str(),
                            100.0 * static_cast<double>(ep_bytes[r]) / static_cast<double>(pc.resident_bytes));
        }
        return 0;
    }
    ordered_json j;
    j["file"] = o.path;
    j["format"] = kind == Kind::Gguf ? "gguf" : "config.json";
    j["architecture"] = cfg.arch;
    j["name"] = cfg.name;
    j["hyperparameters"] = hparams_json(cfg);
    j["tokenizer"] = file ? tokenizer_json(*file) : ordered_json(nullptr);
    j["weight_type"] = dtype_name(wtype);
    ordered_json tl = ordered_json::array();
    for (const auto& t : tensors)
        tl.push_back({{"name", t.name}, {"type", dtype_name(t.type)}, {"shape", t.shape}, {"bytes", t.nbytes()},
                      {"role", model::role_name(t.role)}});
    j["tensors"] = tl;
    const TypeBreakdown tb = type_breakdown(tensors);
    ordered_json types = ordered_json::array();
    for (const auto& r : tb.rows)
        types.push_back({{"type", dtype_name(r.type)},
                         {"tensors", r.tensors},
                         {"params", r.params},
                         {"bytes", r.bytes},
                         {"share", tb.bytes ? static_cast<double>(r.bytes) / static_cast<double>(tb.bytes) : 0.0},
                         {"bits_per_weight", TypeBreakdown::bpw(r.bytes, r.params)}});
    j["types"] = types;
    j["bits_per_weight"] = {{"routed_experts", TypeBreakdown::bpw(tb.exp_bytes, tb.exp_params)},
                            {"rest", TypeBreakdown::bpw(tb.rest_bytes, tb.rest_params)},
                            {"all", TypeBreakdown::bpw(tb.bytes, tb.exp_params + tb.rest_params)}};
    ordered_json p;
    p["total"] = pc.total;
    p["active"] = pc.active;
    p["active_excl_embedding"] = pc.active_excl_embd;
    p["routed_total"] = pc.routed_total;
    p["routed_active"] = pc.routed_active;
    p["resident_bytes"] = pc.resident_bytes;
    ordered_json roles;
    for (int r = 0; r < model::kRoleCount; ++r)
        roles[model::role_name(static_cast<model::TensorRole>(r))] = pc.by_role[r];
    p["by_role"] = roles;
    j["parameters"] = p;
    j["kv_cache"] = {{"type", "f16"}, {"bytes_per_token", kv_tok}, {"bytes_per_token_q8_0", model::kv_bytes_per_token(cfg, DType::Q8_0)}, {"mla_latent", cfg.is_mla()}};
    j["memory_plan"] = {{"ctx", o.ctx},
                        {"batch", o.batch},
                        {"weights_bytes", plan.weights_bytes},
                        {"kv_bytes", plan.kv_bytes},
                        {"scratch_bytes", plan.scratch_bytes},
                        {"total_bytes", plan.total_bytes}};
    if (!ep_bytes.empty()) j["ep"] = {{"ranks", o.ep}, {"rank_weight_bytes", ep_bytes}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
}

}  // namespace moe::tools
