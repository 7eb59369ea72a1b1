#pragma once
// Expert parallelism for one MoE block (docs/EP.md). Every rank holds the whole batch x [T, D]
// (attention and the router run on every rank); the block's tokens are cut into R contiguous
// slices and rank r owns slice r:
//
//   route own slice -> layout (destination rank of each (token, slot) from the placement; per
//   destination row counts exchanged first) -> dispatch (all_to_all_v of [expert id | row] records,
//   f32 exact, or bf16 / int8 + per-row scale with compression) -> grouped FFN of the rows received,
//   over this rank's experts only -> combine (reverse all_to_all_v of f32 expert outputs) ->
//   weighted sum in slot order (+ shared experts) for the own slice -> all_gather_v of the slices,
//   so every rank again holds y [T, D].
//
// Each expert row and the weighted sum are computed exactly as on one process, so with f32 dispatch
// the output is bitwise that of the single-process block for any R and any placement.
#include <cstdint>
#include <string>
#include <vector>

#include "dist/group.h"
#include "dist/placement.h"

namespace moe {

enum class EpCompress { None, BF16, Int8 };
const char* ep_compress_name(EpCompress c);
// "none" | "bf16" | "int8" (throws moe::Error naming the flag).
EpCompress parse_ep_compress(const std::string& s);

struct EpConfig {
    dist::Group* group = nullptr;            // must outlive the block
    const dist::Placement* placement = nullptr;
    EpCompress compress = EpCompress::None;  // dispatch encoding (combine is always f32)
    // Two micro-batches (halves of each rank's slice) with non-blocking all-to-alls: the second
    // half's dispatch is in flight while the first half's experts run, the first half's combine
    // while the second's run, and the second's combine while the shared experts run.
    bool overlap = false;
    // Data-parallel attention: x [T, D] holds only this rank's own tokens (its own sequences), T may
    // differ between ranks (a rank with no work calls MoeBlock::ep_idle), every rank routes all of
    // its tokens and there is no all-gather: y [T, D] is this rank's rows only.
    bool dp = false;
};

// Wall time of each EP stage of one block on this rank, accumulated over calls, plus traffic.
struct EpStageTimes {
    double route = 0, layout = 0, wait = 0, dispatch = 0, experts = 0, shared = 0, combine = 0, gather = 0;
    int64_t calls = 0;
    int64_t rows_sent = 0;    // (token, slot) rows sent to other ranks
    int64_t bytes_sent = 0;   // dispatch + combine bytes sent to other ranks
    int64_t gather_bytes = 0; // all_gather bytes sent to other ranks
    int64_t inter_node_bytes = 0;  // dispatch + combine + gather bytes sent to ranks on other nodes
    int64_t tokens = 0;       // tokens of the whole batch, summed over calls
    int64_t max_rows_recv = 0;  // most rows this rank received (and computed) in one call
    double total() const { return route + layout + wait + dispatch + experts + shared + combine + gather; }
};

// Bytes of one dispatched record (expert id + encoded row of D values), a multiple of 4.
size_t ep_record_bytes(int64_t D, EpCompress c);
// Encodes / decodes one row (the record after the expert id).
void ep_encode_row(const float* x, int64_t D, EpCompress c, void* out);
void ep_decode_row(const void* in, int64_t D, EpCompress c, float* x);

// Buffers and settings of one block's EP path (sized for max_tokens at attach time).
struct EpState {
    EpConfig cfg;
    int layer = 0;
    size_t rec_bytes = 0;
    // [M * R] per micro-batch m (M = 2 with overlap, else 1): rows, then dispatch (sb, sd, rb, rd)
    // and combine (cb, cd, qb, qd) bytes / displacements; MPI reads them until the exchange ends.
    std::vector<int64_t> send_rows, recv_rows, sb, sd, rb, rd, cb, cd, qb, qd;
    std::vector<int32_t> dest;       // [T * k] destination rank of own (token, slot), -1 unused
    std::vector<int32_t> slot_send;  // [T * k] record index of own (token, slot) in send order
    std::vector<int64_t> cursor;     // [M * R]
    std::vector<char> send_buf, recv_buf;   // [T * k records] (recv: grown on demand with dp, up to R T k)
    std::vector<int32_t> recv_pos;          // [T * k] grouped row of received record i (idem)
    std::vector<float> ret_send, ret_recv;  // [T * k, D] (ret_send: idem)
    EpStageTimes times;
};

}  // namespace moe
