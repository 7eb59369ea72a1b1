#pragma once
// A load-time "panel" layout of Q3_K, Q2_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0 and MXFP4 weights for the decode GEMV (used for the routed
// experts with --repack-experts: moe/experts.h repack_expert_panels). The AVX-512 decode GEMV over the original blocks (gemv16_q3k,
// qmatmul_avx512_kq_gemv.cpp) gets one zmm per row and 64 values and must reduce the 16 rows'
// lanes to [granule][row] sums (granule_sums: ~44 shuffles/adds per 16 rows x 64 values). Here the
// 16 rows' bits are stored column-interleaved like the prefill panel (repack in qmatmul_avx512.h),
// still at 3 bits per value, so the GEMV's vpdpbusd accumulators are already [row] lanes per
// granule: no reduction.
// (Not here: the bf16 panels of dense F32 / F16 / BF16 weights for the opt-in AMX-BF16 prefill
// GEMM, a layout of their own: kernels/cpu/matmul_bf16_amx.h.)
//
// Layout of one panel (16 weight rows, K values, nsb = K / 256 super-blocks), three regions:
//   levels  [nsb][8 octets][3 vectors A, B, C][64 bytes]     1536 bytes per super-block
//   scales  [nsb][192 bytes]: the 256 raw 6-bit scales sc (value scale sc - 32) packed as Q4_K's
//           (q4k_scale_get); unpacked index 32 p + 2 c + j = sc_2p+j of column c (q3k_sc_at)
//   d       [nsb][16 columns]  f16                           32 bytes per super-block
// Octet o of a super-block holds its values 32 o .. 32 o + 31 (granules 2 o, 2 o + 1) as 8 quads
// qi (values 32 o + 4 qi .. + 3); a quad's "level vector" has byte p = 4 c + i = the 3-bit level
// (field + 4 x hmask bit, 0..7; value = level - 4) of column c at the quad's value i, so one
// vpdpbusd with the 4 activation bytes broadcast adds to all 16 columns' granule sums. The 8
// quads' levels of byte position p are packed into bytes p of A, B, C (kQ3kPanelBits):
//   A: bits 0-2 quad 0, 3-5 quad 1, 6-7 quad 2 (level bits 0, 1)
//   B: bits 0-2 quad 3, 3-5 quad 4, 6-7 quad 5 (level bits 0, 1)
//   C: bits 0-2 quad 6, 3-5 quad 7, bit 6 quad 2 (level bit 2), bit 7 quad 5 (level bit 2)
// so each quad's level vector is one vgf2p8affineqb of A, B or C (6 of 8 quads) or two and an OR
// (quads 2, 5). Unpacked (q4k_scales_unpack<32>: sc - 32 as int8), the scale pair (sc_2o, sc_2o+1)
// of a column is two adjacent bytes: one vpmovsxbw gives the word pairs of one vpdpwssd against the
// two granule sums packed as words.
// Size: 1760 bytes per 16 rows x 256 values = 16 x 110, the blocks' size. (Until session 50 the
// scales were stored unpacked as bytes, 1824 bytes: decode read 3.6 % more.) Every bit of the
// blocks is kept (unpack_panel gives the block bytes back). A panel of nrows < 16 rows has zero
// levels, scales and d in its missing columns (a zero raw scale there: sc - 32 times zero levels).
//
// Q2_K (84-byte blocks: scales[16] = sc | m << 4, qs[64], d, dmin) the same way at 2 bits:
//   levels  [nsb][8 octets][2 vectors A, B][64 bytes]     1024 bytes per super-block
//           (A: bits 2 qi .. 2 qi + 1 = quad qi, qi < 4; B: quads 4..7 likewise)
//   scales  [nsb][8 pairs][16 columns][2]  the block's scale bytes sc | m << 4    256 bytes
//   d       [nsb][2][16 columns]  f16 d, then dmin                                64 bytes
// 1344 bytes per 16 rows x 256 values = 16 x 84: the same size as the blocks.
//
// Q4_K (144-byte blocks: f16 d, f16 dmin, scales[12] = 8 six-bit scales sc_g and mins m_g as
// ref::get_scale_min_k4, qs[128]: value 64 h + l is the low nibble of qs[32 h + l], value
// 64 h + 32 + l the high nibble, l < 32; granule g = values 32 g .. 32 g + 31, value =
// d sc_g q - dmin m_g) at 4 bits, granule by granule:
//   levels  [nsb][8 granules g][4 vectors v][64 bytes]   2048 bytes per super-block; byte p = 4 c + i
//           of vector v: low nibble = level of value 32 g + 8 v + i of column c, high nibble =
//           level of value 32 g + 8 v + 4 + i (vec & 0x0F and (vec >> 4) & 0x0F are the
//           column-interleaved quads of values 32 g + 8 v .. + 3 and 32 g + 8 v + 4 .. + 7)
//   scales  [nsb][192 bytes]: 256 six-bit values u[i] packed (q4k_scale_get / q4k_scale_set), the
//           kernels unpack them per super-block (q4k_scales_avx512.inc) to 256 bytes: byte 16 g + c
//           = sc_g of column c (g < 8); byte 128 + 32 k + 2 c + j = m_2k+j of column c (k < 4, j <
//           2: one vpmovzxbw of the 32 bytes at 128 + 32 k gives the dword pairs m_2k | m_2k+1 << 16
//           of the 16 columns, mins32's operand)
//   d       [nsb][2][16 columns]  f16 d, then dmin                                64 bytes
// 2304 bytes per 16 rows x 256 values = 16 x 144: the same size as the blocks. (Until session 48
// the scales were stored as the 256 unpacked bytes, 2368 bytes, 2.8 % more than the file: decode
// streams every byte once, so it read 2.8 % more.) In a matrix these three regions are not kept together per panel: Q4_K matrices
// are region-major (panel_region_major below: all levels, then all scales, then all d), as are all
// the K-quants'.
//
// Q6_K (210-byte blocks: ql[128], qh[64], int8 scales[16] per 16 values, f16 d; value = d sc_g
// (level - 32), level = 4 low bits from ql | 2 top bits from qh << 4) at 6 bits, octet by octet:
//   levels  [nsb][8 octets o][384 bytes]: the octet's 4 nibble vectors v as Q4_K's (at 64 v: byte
//           4 c + i: low nibble = low 4 bits of value 32 o + 8 v + i of column c, high nibble = of
//           value 32 o + 8 v + 4 + i), then its 2 top-bit vectors h as Q2_K's levels (at 256 + 64 h:
//           byte 4 c + i: bits 2 q, 2 q + 1 = the top two bits of value 32 o + 4 (4 h + q) + i of
//           column c). One octet's six vectors are adjacent, so the decode GEMV walks the level
//           region in order (all nibbles first, then all top bits, made two interleaved streams:
//           22-24 GB/s on one thread, against 36 for the block GEMV)
//   scales  [nsb][16 granules][16 columns]  int8 sc_g                             256 bytes
//   d       [nsb][16 columns]  f16                                                 32 bytes
// 3360 bytes per 16 rows x 256 values = 16 x 210: the same size as the blocks.
//
// Q8_0 (34-byte blocks: f16 d, int8 qs[32]; value = d q) block by block, any K that is a multiple
// of 32 (nb = K / 32 blocks; panel_k_step 32):
//   levels  [nb blocks b][8 quads qi][64 bytes]   512 bytes per block; byte 4 c + i of quad qi =
//           q[4 qi + i] ^ 0x80 (= q + 128, u8) of block b of column c: vpdpbusd's unsigned operand,
//           the activations its signed one; the sum is taken back by 128 x the activation block sum
//           (ActQ8Row::nsum), as gemv16_q80 and the block GEMM (DQ8_0) do
//   d       [nb blocks][16 columns]  f16          32 bytes per block
// 544 bytes per 16 rows x 32 values = 16 x 34: the same size as the blocks. For K % 256 == 0 this
// is byte for byte the earlier layout of 256-value super-blocks of 8 blocks (levels [K/256][4096],
// d [K/256][256]). Quad vectors are the block GEMM's int8 buffer as is (levels q ^ 0x80, [K/4]
// quads), so its fill is a copy. The kernels walk whole groups of 8 blocks (256 values), then the
// K / 32 % 8 blocks left (gpt-oss: K = 2880 = 11 x 8 + 2 blocks).
//
// Q4_0 (18-byte blocks: f16 d, qs[16]; value j < 16 = low nibble of qs[j], 16 + j = high nibble;
// value = d (nibble - 8)) block by block as Q8_0 (any K % 32 == 0), the nibbles as Q4_K's level
// vectors:
//   levels  [nb blocks b][4 vectors v][64 bytes]   256 bytes per block; byte 4 c + i of vector v:
//           low nibble = nibble of value 8 v + i of block b of column c, high nibble = of value
//           8 v + 4 + i (so the level region is Q4_K's [granule][4][64]: the block GEMM reads it in
//           place, kNibbles, with the offset 8 as its kShift 3 seed)
//   d       [nb blocks][16 columns]  f16          32 bytes per block
// 288 bytes per 16 rows x 32 values = 16 x 18: the same size as the blocks (K % 256 == 0: the
// earlier super-block layout byte for byte).
//
// Q5_K (176-byte blocks: f16 d, f16 dmin, scales[12] as Q4_K, qh[32], qs[128]; value 64 j + 32 h + l
// (l < 32) = nibble h of qs[32 j + l] + 16 x bit 2 j + h of qh[l]; granule g = 2 j + h: value =
// d sc_g q - dmin m_g) in Q4_K's regions, the 5-bit levels as level vectors and a side vector:
//   levels  [nsb][8 granules g][320 bytes]: the granule's side vector (at 0: byte 4 c + i, bits
//           2 v, 2 v + 1 = level bits 3, 4 of value 32 g + 8 v + i of column c), then its 4 level
//           vectors v (at 64 (v + 1): byte 4 c + i: bits 3-7 = level of value 32 g + 8 v + 4 + i of
//           column c (in place: v & 0xF8 = 8 x level), bits 0-2 = the low 3 bits of the level of
//           value 32 g + 8 v + i): the decode GEMV's load order, as Q6_K's octets
//   scales  [nsb][192 bytes] as Q4_K's (packed; unpacked: sc_g bytes, then the mins' word-pair bytes)
//   d       [nsb][2][16 columns]  f16 d, then dmin                                64 bytes
// 2816 bytes per 16 rows x 256 values = 16 x 176: the same size as the blocks.
//
// Q5_0 (22-byte blocks: f16 d, qh[4], qs[16]; value j < 16 = low nibble of qs[j], 16 + j = high
// nibble, + 16 x bit j of the little-endian uint32 qh; value = d (level - 16)) block by block: K step
// 32 (panel_k_step), so any K of whole blocks (V2-Lite's ffn_down_exps: K = 1408), nb = K / 32;
// Q5_K's level vectors and side vector per block:
//   levels  [nb][5 vectors][64 bytes]   320 bytes per block: byte 4 c + i of vector v < 4: bits 3-7
//           = level of value 8 v + 4 + i of column c (in place: v & 0xF8 = 8 x level), bits 0-2 = the
//           low 3 bits of the level of value 8 v + i; vector 4 (the side vector): byte 4 c + i, bits
//           2 v, 2 v + 1 = level bits 3, 4 of value 8 v + i of column c
//   d       [nb][16 columns]  f16        32 bytes per block
// 352 bytes per 16 rows x 32 values = 16 x 22: the same size as the blocks (the 5-bit levels as
// bytes would be 544: +55 %).
// MXFP4 (17-byte blocks: E8M0 e, qs[16]; value j < 16 = code in the low nibble of qs[j], 16 + j = in
// the high nibble; value = kMxfp4Values[code] x 2^(e - 128), kMxfp4Values = 2 x E2M1) block by block:
// its K step is one block (panel_k_step 32: any K multiple of 32, e.g. gpt-oss's 2880, no tail case),
// nb = K / 32 blocks:
//   levels  [nb][4 vectors v][64 bytes]   256 bytes per block; byte 4 c + i of vector v: low nibble =
//           code of value 8 v + i of column c, high nibble = of value 8 v + 4 + i (Q4_0's level
//           vectors; the kernels map each masked nibble vector to the levels kMxfp4Values + 16 by
//           one vpshufb, DMXFP4's table, and seed the sums with 16 x nsum)
//   e       [nb][16 columns]  the E8M0 bytes                                       16 bytes per block
// 272 bytes per 16 rows x 32 values = 16 x 17: the same size as the blocks (panel_sb_bytes, per 256
// values: 2176).
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels::panel {

inline constexpr int kQ3kBlockBytes = 110, kQ2kBlockBytes = 84;
inline constexpr int kQ3kSbLevelBytes = 1536, kQ3kSbScaleBytes = 192, kQ3kSbDBytes = 32;
inline constexpr int kQ3kSbPanelBytes = kQ3kSbLevelBytes + kQ3kSbScaleBytes + kQ3kSbDBytes;  // 1760
// Unpacked index of Q3_K's scale sc_g (g < 16) of column c in its packed region (q4k_scale_get).
inline constexpr int q3k_sc_at(int g, int c) { return 32 * (g / 2) + 2 * c + g % 2; }
inline constexpr int kQ2kSbLevelBytes = 1024, kQ2kSbScaleBytes = 256, kQ2kSbDBytes = 64;
inline constexpr int kQ2kSbPanelBytes = kQ2kSbLevelBytes + kQ2kSbScaleBytes + kQ2kSbDBytes;  // 1344
inline constexpr int kQ4kBlockBytes = 144;
inline constexpr int kQ4kSbLevelBytes = 2048, kQ4kSbScaleBytes = 192, kQ4kSbDBytes = 64;
inline constexpr int kQ4kSbPanelBytes = kQ4kSbLevelBytes + kQ4kSbScaleBytes + kQ4kSbDBytes;  // 2304
// Q4_K / Q5_K scale region of a super-block: the 256 unpacked six-bit values u[i] (i < 256) in 192
// bytes, low nibbles then top bits, so that AVX-512 unpacks them with 16-bit shifts and masks:
// byte j < 128 = (u[j] & 15) | (u[j + 128] & 15) << 4; byte 128 + j (j < 64) = u[j] >> 4 |
// (u[j + 64] >> 4) << 2 | (u[j + 128] >> 4) << 4 | (u[j + 192] >> 4) << 6.
inline constexpr int kQ4kScalesUnpacked = 256;
// Unpacked index of sc_g / m_g of column c (the layout above; Q5_K's too).
inline constexpr int q4k_sc_at(int g, int c) { return 16 * g + c; }
inline constexpr int q4k_m_at(int g, int c) { return 128 + 32 * (g / 2) + 2 * c + g % 2; }
inline uint8_t q4k_scale_get(const uint8_t* S, int i) {
    const int lo = (S[i & 127] >> (4 * (i >> 7))) & 0xF, hi = (S[128 + (i & 63)] >> (2 * (i >> 6))) & 3;
    return static_cast<uint8_t>(lo | hi << 4);
}
// v < 64; the other values' bits are kept.
inline void q4k_scale_set(uint8_t* S, int i, uint8_t v) {
    const int ls = 4 * (i >> 7), hs = 2 * (i >> 6);
    uint8_t& lo = S[i & 127];
    uint8_t& hi = S[128 + (i & 63)];
    lo = static_cast<uint8_t>((lo & ~(0xF << ls)) | (v & 0xF) << ls);
    hi = static_cast<uint8_t>((hi & ~(3 << hs)) | ((v >> 4) & 3) << hs);
}
// All 256 values u[i] (< 64) packed at once (the scalar repack; q4k_scales_pack is AVX-512's).
inline void q4k_scales_pack_scalar(const uint8_t* u, uint8_t* S) {
    for (int j = 0; j < 128; ++j) S[j] = static_cast<uint8_t>((u[j] & 0xF) | (u[j + 128] & 0xF) << 4);
    for (int j = 0; j < 64; ++j)
        S[128 + j] = static_cast<uint8_t>(u[j] >> 4 | (u[j + 64] >> 4) << 2 | (u[j + 128] >> 4) << 4 | (u[j + 192] >> 4) << 6);
}
inline constexpr int kQ6kBlockBytes = 210;
inline constexpr int kQ6kSbLevelBytes = 3072, kQ6kSbScaleBytes = 256, kQ6kSbDBytes = 32;
inline constexpr int kQ6kSbPanelBytes = kQ6kSbLevelBytes + kQ6kSbScaleBytes + kQ6kSbDBytes;  // 3360
// Q6_K: byte offset (in a super-block's level region) of octet o's nibble vector v / top vector h.
inline constexpr int q6k_nib_at(int o, int v) { return 384 * o + 64 * (v + v / 2 + 1); }
inline constexpr int q6k_top_at(int o, int h) { return 384 * o + 192 * h; }
inline constexpr int kQ80BlockBytes = 34;  // per 32 values
inline constexpr int kQ80SbLevelBytes = 4096, kQ80SbDBytes = 256;
inline constexpr int kQ80SbPanelBytes = kQ80SbLevelBytes + kQ80SbDBytes;  // 4352
inline constexpr int kQ80BlkLevelBytes = 512, kQ80BlkDBytes = 32;  // per block of 32 values (16 rows)
inline constexpr int kQ40BlockBytes = 18;  // per 32 values
inline constexpr int kQ40SbLevelBytes = 2048, kQ40SbDBytes = 256;
inline constexpr int kQ40SbPanelBytes = kQ40SbLevelBytes + kQ40SbDBytes;  // 2304
inline constexpr int kQ40BlkLevelBytes = 256, kQ40BlkDBytes = 32;
inline constexpr int kQ5kBlockBytes = 176;
inline constexpr int kQ5kSbLevelBytes = 2560, kQ5kSbScaleBytes = kQ4kSbScaleBytes, kQ5kSbDBytes = 64;
inline constexpr int kQ5kSbPanelBytes = kQ5kSbLevelBytes + kQ5kSbScaleBytes + kQ5kSbDBytes;  // 2816
// Q5_K: byte offset (in a super-block's level region) of granule g's side vector / level vector v.
inline constexpr int q5k_side_at(int g) { return 320 * g; }
inline constexpr int q5k_lev_at(int g, int v) { return 320 * g + 64 * (v + 1); }
inline constexpr int kQ50BlockBytes = 22;  // per 32 values
inline constexpr int kQ50BlkLevelBytes = 320, kQ50BlkDBytes = 32;  // per block of a panel
inline constexpr int kQ50SbPanelBytes = 8 * (kQ50BlkLevelBytes + kQ50BlkDBytes);  // 2816 per 256 values
inline constexpr int kMxfp4BlockBytes = 17;  // per 32 values
inline constexpr int kMxfp4BlockLevelBytes = 256, kMxfp4BlockEBytes = 16;
inline constexpr int kMxfp4BlockPanelBytes = kMxfp4BlockLevelBytes + kMxfp4BlockEBytes;  // 272 per block

// Where level bit b of quad qi (of an octet) lives: vector (0 A, 1 B, 2 C) and bit of its byte.
struct PanelBit {
    uint8_t vec, bit;
};
inline constexpr PanelBit kQ3kPanelBits[8][3] = {
    {{0, 0}, {0, 1}, {0, 2}}, {{0, 3}, {0, 4}, {0, 5}}, {{0, 6}, {0, 7}, {2, 6}}, {{1, 0}, {1, 1}, {1, 2}},
    {{1, 3}, {1, 4}, {1, 5}}, {{1, 6}, {1, 7}, {2, 7}}, {{2, 0}, {2, 1}, {2, 2}}, {{2, 3}, {2, 4}, {2, 5}},
};

// True for the weight types with a panel layout (Q2_K, Q3_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0, MXFP4).
bool panel_supported(DType t);
// Bytes of 256 values of one panel (16 rows x 256 values) of type t.
int panel_sb_bytes(DType t);
// The K values a panel of type t is made of: K must be a positive multiple of it (256 for the
// K-quants: their super-block; 32 for Q8_0, Q4_0, Q5_0 and MXFP4: their block).
int panel_k_step(DType t);
// Bytes of one panel (16 rows) of K values; throws moe::Error ([kernels]) unless t has a panel
// layout and K is a positive multiple of panel_k_step(t).
size_t panel_bytes(DType t, int64_t K);

// Rows (nrows <= 16 rows of type t, K values each, row_stride bytes apart) -> one panel at out
// (panel_bytes(t, K) bytes). Scalar, load-time work.
void repack_panel(DType t, const uint8_t* rows, size_t row_stride, int64_t K, int nrows, uint8_t* out);
// The inverse: the nrows rows' original block bytes back from a panel.
void unpack_panel(DType t, const uint8_t* panel, int64_t K, int nrows, uint8_t* rows, size_t row_stride);
// A whole matrix of N rows: ceil(N / 16) panels (the last one padded), panel_matrix_bytes in all.
// The per-block types (Q8_0, Q4_0, Q5_0, MXFP4) store them back to back. The K-quants' matrices
// (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) are region-major: every panel's levels back to back, then every
// panel's scales, then every panel's d (the same bytes per panel, moved). On
// the panel-major layout the decode GEMV's loads streamed at 80 % of a sequential read, because
// each panel's scale and d regions interrupt the level stream; region-major streams at 97-99 %
// (bench/panel_stream_bench.cpp, docs/PERFORMANCE.md session 26).
size_t panel_matrix_bytes(DType t, int64_t N, int64_t K);
bool panel_region_major(DType t);
// One panel's levels, scales and d bytes (K values) of a region-major type.
struct PanelRegionBytes {
    size_t lev, sc, d;
};
PanelRegionBytes panel_region_bytes(DType t, int64_t K);
// Where panel p of a matrix of n_panels panels (at `panels`) keeps its regions. Region-major types:
// its levels, scales and d. Panel-major types: lev = the panel (its regions follow inside it, as
// the type's layout above says), sc = d = nullptr.
struct PanelParts {
    const uint8_t* lev;
    const uint8_t* sc;
    const uint8_t* d;
};
PanelParts panel_parts(DType t, int64_t K, const uint8_t* panels, int64_t n_panels, int64_t p);
// Panel p as repack_panel's bytes: the panel itself (panel-major types), or its regions gathered
// into buf (panel_bytes(t, K) bytes) and buf returned.
const uint8_t* panel_gather(DType t, int64_t K, const uint8_t* panels, int64_t n_panels, int64_t p, uint8_t* buf);
// (repack_panel for every panel, or repack_panel_avx512 where it applies and the CPU has AVX-512;
// region-major types: each panel made in a scratch panel, then its regions moved into place.)
void repack_matrix(DType t, const uint8_t* w, size_t row_stride, int64_t N, int64_t K, uint8_t* out);
// The same for panels [p0, p1) only (w: row 0 of the matrix, out: the matrix's first byte), so
// that threads can share one matrix.
void repack_matrix_panels(DType t, const uint8_t* w, size_t row_stride, int64_t N, int64_t K, int64_t p0, int64_t p1, uint8_t* out);
// The inverse of repack_matrix: the N rows' original block bytes.
void unpack_matrix(DType t, const uint8_t* panels, int64_t N, int64_t K, uint8_t* rows, size_t row_stride);
// AVX-512 repack_panel of a whole panel (nrows == 16) of Q8_0 (any K), Q4_K, Q6_K or MXFP4 (any K) with 16 * row_stride <
// 2^31: the same bytes (qmatmul_panel_repack_avx512.cpp). Returns false, writing nothing, where it
// does not apply. Call only where the CPU has AVX-512 F/BW/VL.
bool repack_panel_avx512(DType t, const uint8_t* rows, size_t row_stride, int64_t K, int nrows, uint8_t* out);

// y[n - n0] = row n . x for n in [n0, n1) of a repacked matrix (n0 a multiple of 16), with the
// Q8_K activation row x: the super-block integer chain of qmatmul.h (S = sum_g sc_g I_g exact in
// int32, acc = fma(float(S), d * dx, acc) per super-block; Q2_K / Q4_K then M = sum_g m_g nsum_g,
// acc = fma(float(M), dmin * dx, acc); Q6_K: levels - 32), so the bits equal those of every kernel path of the type.
// Q8_0 / Q4_0 (x: a kActQ8_0 row): the per-block chain, acc = fma(float(I_b), d_b * dx_b, acc) per 32
// values (Q4_0: levels - 8; Q5_0: levels - 16). Q5_K: Q4_K's chain with 5-bit levels. MXFP4 (x: kActQ8_0):
// per block acc = fma(float(I_b), ref::e8m0_half(e_b) * dx_b, acc), I_b = sum kMxfp4Values[code] x.
struct PanelMatrix {
    DType type = DType::Q3_K;
    const uint8_t* panels = nullptr;  // repack_matrix's output
    int64_t N = 0, K = 0;
};
// Throws moe::Error ([kernels]) unless [n0, n1) lies in [0, N) and n0 % 16 == 0.
void check_range(const PanelMatrix& w, int64_t n0, int64_t n1);
// Scalar reference.
void panel_gemv_ref(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y);
// AVX-512 VNNI + GFNI; call only where panel_gemv_usable().
void panel_gemv_avx512(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y);
// Rows [n0, n1) of two matrices of one type and shape at once, each against its own activation row
// (x[0] == x[1]: one row, its broadcasts shared): y[j][n - n0] = panel_gemv_avx512(w[j], *x[j])'s,
// the same bits. Two long streams where one matrix streams its two halves (decode: an expert's gate
// and up, two experts' down). Types: panel_gemv_pair_supported (Q4_K, Q6_K);
// others, or two shapes, throw moe::Error ([kernels]). AVX-512 VNNI, as panel_gemv_avx512.
bool panel_gemv_pair_supported(DType t);
void panel_gemv_pair_avx512(const PanelMatrix (&w)[2], const ref::ActQ8Row* const (&x)[2], int64_t n0, int64_t n1,
                            float* const (&y)[2]);
bool panel_gemv_usable();

namespace detail {  // Q4_0 (nb blocks of 32 values) and Q5_K (nsb super-blocks) (qmatmul_panel_q40_q5k.cpp), nrows <= 16 rows
void repack_q40(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out);
void unpack_q40(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride);
float dot_q40(const uint8_t* panel, int64_t nb, int c, const ref::ActQ8Row& x);  // row c of the panel . x
void repack_q5k(const uint8_t* rows, size_t row_stride, int64_t nsb, int nrows, uint8_t* out);
void unpack_q5k(const uint8_t* panel, int64_t nsb, int nrows, uint8_t* rows, size_t row_stride);
float dot_q5k(const uint8_t* panel, int64_t nsb, int c, const ref::ActQ8Row& x);
// Q5_0 (qmatmul_panel_q50.cpp): nb blocks of 32 values; panel_gemv_avx512's Q5_0 case
void repack_q50(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out);
void unpack_q50(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride);
float dot_q50(const uint8_t* panel, int64_t nb, int c, const ref::ActQ8Row& x);
void panel_gemv_q50(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y);
// panel_gemv_avx512 of a Q3_K or Q2_K matrix (its checks done; qmatmul_panel_gemv_q3k_q2k.cpp): AVX-512 VNNI + GFNI
void panel_gemv_q3k_q2k(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y);
// MXFP4 (qmatmul_panel_mxfp4.cpp): nb blocks of 32 values, nrows <= 16 rows
void repack_mxfp4(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out);
void unpack_mxfp4(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride);
float dot_mxfp4(const uint8_t* panel, int64_t nb, int c, const ref::ActQ8Row& x);
// panel_gemv_avx512 of an MXFP4 matrix (its checks done); AVX-512 VNNI
void gemv_mxfp4_avx512(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y);
}  // namespace detail

}  // namespace moe::kernels::panel
