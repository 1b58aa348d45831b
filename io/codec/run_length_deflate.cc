// See run_length_deflate.h. Section numbers refer to RFC 1951.
#include "io/codec/run_length_deflate.h"

#include <libdeflate.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tstat::io {
namespace {

constexpr int kNumLitLen = 286;  // literals 0..255, end of block 256, lengths 257..285
constexpr int kEndOfBlock = 256;
constexpr int kNumCodeLen = 19;
constexpr int kMaxLitLenBits = 15;
constexpr int kMaxCodeLenBits = 7;
constexpr int kMinMatch = 3, kMaxMatch = 258;

// Length symbols 257..285: base length and extra bits (3.2.5).
constexpr std::uint16_t kLengthBase[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                           15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                           67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::uint8_t kLengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                           2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
// Distance symbols 0..29: base distance and extra bits (3.2.5).
constexpr int kNumDist = 30;
constexpr std::uint16_t kDistBase[kNumDist] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::uint8_t kDistExtra[kNumDist] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                               6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
constexpr std::size_t kMaxDistance = 32768;  // the window the zlib header declares

// Match tokens at the period distance carry this flag (RunLengthDeflater::tokens_).
constexpr std::uint16_t kPeriodMatch = 0x800;

// The distance symbol of `distance` (1..32768).
int DistSymbol(std::size_t distance) {
  int s = kNumDist - 1;
  while (kDistBase[s] > distance) --s;
  return s;
}

// The order code length code lengths are sent in (3.2.7).
constexpr std::uint8_t kCodeLenOrder[kNumCodeLen] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                                     11, 4,  12, 3, 13, 2, 14, 1, 15};

// Match length 3..258 -> index of its length symbol (symbol 257 + index).
struct LengthIndex {
  std::uint8_t of[kMaxMatch + 1] = {};
  constexpr LengthIndex() {
    for (int i = 0; i < 29; ++i) {
      const int last = i == 28 ? kMaxMatch : kLengthBase[i + 1] - 1;
      for (int len = kLengthBase[i]; len <= last; ++len) of[len] = static_cast<std::uint8_t>(i);
    }
  }
};
constexpr LengthIndex kLengthIndex;

// Code lengths of at most `max_bits` for `n` symbols (<= kNumLitLen) with
// frequencies `freq` (0: unused, length 0). A Huffman tree by the two-queue
// method, its depths clamped to max_bits and the Kraft sum repaired by
// moving codes one level down; the least frequent symbols get the longest.
void BuildLengths(const std::uint32_t* freq, int n, int max_bits, std::uint8_t* lengths) {
  // Leaves by rising frequency, then symbol. A block has at most
  // kBlockBytes tokens, so frequencies fit 16 bits (larger ones would only
  // be ordered among themselves less well): a stable radix sort of the
  // symbols (in symbol order) by the frequency's low byte, then its high
  // byte, orders ties by symbol without comparing.
  int in_order[kNumLitLen];
  int m = 0;
  for (int s = 0; s < n; ++s) {
    lengths[s] = 0;
    if (freq[s]) in_order[m++] = s;
  }
  if (m == 0) return;
  if (m == 1) {
    lengths[in_order[0]] = 1;
    return;
  }
  int by_low[kNumLitLen], leaves[kNumLitLen];
  auto radix_pass = [&](const int* from, int* to, int shift) {
    int start[257] = {};
    for (int i = 0; i < m; ++i)
      ++start[((std::min<std::uint32_t>(freq[from[i]], 0xFFFF) >> shift) & 0xFF) + 1];
    for (int b = 0; b < 256; ++b) start[b + 1] += start[b];
    for (int i = 0; i < m; ++i) {
      to[start[(std::min<std::uint32_t>(freq[from[i]], 0xFFFF) >> shift) & 0xFF]++] = from[i];
    }
  };
  radix_pass(in_order, by_low, 0);
  radix_pass(by_low, leaves, 8);
  std::uint64_t weight[2 * kNumLitLen];
  int parent[2 * kNumLitLen];
  for (int i = 0; i < m; ++i) weight[i] = freq[leaves[i]];
  int next_leaf = 0, next_node = m, end = m;  // internal nodes: [m, end), in weight order
  auto take = [&]() {
    if (next_leaf < m && (next_node == end || weight[next_leaf] <= weight[next_node])) {
      return next_leaf++;
    }
    return next_node++;
  };
  for (int k = 0; k + 1 < m; ++k) {
    const int a = take(), b = take();
    weight[end] = weight[a] + weight[b];
    parent[a] = parent[b] = end;
    ++end;
  }
  int depth[2 * kNumLitLen];
  depth[end - 1] = 0;  // the root; every node's parent comes after it
  int count[kMaxLitLenBits + 1] = {};
  for (int i = end - 2; i >= 0; --i) {
    depth[i] = depth[parent[i]] + 1;
    if (i < m) ++count[std::min(depth[i], max_bits)];
  }
  std::uint32_t kraft = 0;  // in units of 2^-max_bits
  for (int l = 1; l <= max_bits; ++l)
    kraft += static_cast<std::uint32_t>(count[l]) << (max_bits - l);
  while (kraft > (1u << max_bits)) {
    --count[max_bits];
    for (int l = max_bits - 1; l >= 1; --l) {
      if (count[l]) {
        --count[l];
        count[l + 1] += 2;
        break;
      }
    }
    --kraft;
  }
  int pos = 0;  // leaves are sorted by rising frequency
  for (int l = max_bits; l >= 1; --l) {
    for (int c = 0; c < count[l]; ++c) lengths[leaves[pos++]] = static_cast<std::uint8_t>(l);
  }
}

// Each byte with its bits in reverse order.
struct ReversedByte {
  std::uint8_t of[256] = {};
  constexpr ReversedByte() {
    for (int v = 0; v < 256; ++v) {
      int r = 0;
      for (int b = 0; b < 8; ++b) r |= ((v >> b) & 1) << (7 - b);
      of[v] = static_cast<std::uint8_t>(r);
    }
  }
};
constexpr ReversedByte kReversedByte;

// Canonical codes of `lengths` (3.2.2), bit-reversed: deflate sends Huffman
// codes most significant bit first into an LSB-first bit stream.
void BuildCodes(const std::uint8_t* lengths, int n, std::uint16_t* codes) {
  int per_length[kMaxLitLenBits + 1] = {};
  for (int s = 0; s < n; ++s) ++per_length[lengths[s]];
  per_length[0] = 0;
  int next[kMaxLitLenBits + 1] = {};
  int code = 0;
  for (int bits = 1; bits <= kMaxLitLenBits; ++bits) {
    code = (code + per_length[bits - 1]) << 1;
    next[bits] = code;
  }
  for (int s = 0; s < n; ++s) {
    const int len = lengths[s];
    if (len == 0) continue;
    const unsigned c = static_cast<unsigned>(next[len]++);
    const unsigned reversed16 = kReversedByte.of[c & 0xFF] << 8 | kReversedByte.of[c >> 8];
    codes[s] = static_cast<std::uint16_t>(reversed16 >> (16 - len));
  }
}

// Gives the two least-numbered unused symbols a count when fewer than two
// symbols are used, so every code is a complete tree of at least two codes.
void AtLeastTwoUsed(std::uint32_t* freq, int n) {
  int used = 0;
  for (int s = 0; s < n; ++s) used += freq[s] != 0;
  for (int s = 0; s < n && used < 2; ++s) {
    if (freq[s] == 0) {
      freq[s] = 1;
      ++used;
    }
  }
}

// A complete, length-limited Huffman code for up to kNumLitLen symbols.
struct HuffmanCode {
  std::uint8_t length[kNumLitLen];
  std::uint16_t code[kNumLitLen];

  // From the symbols' counts (0: no code), giving codes to unused symbols
  // when fewer than two are used (AtLeastTwoUsed).
  void Build(const std::uint32_t* freq, int n, int max_bits) {
    std::uint32_t used[kNumLitLen];
    std::memcpy(used, freq, static_cast<std::size_t>(n) * sizeof(used[0]));
    AtLeastTwoUsed(used, n);
    BuildLengths(used, n, max_bits, length);
    std::fill(code, code + n, std::uint16_t{0});
    BuildCodes(length, n, code);
  }
};

// Passed by value to the code that puts many codes (WriteBlock): a byte
// stored through out_ may, as far as the compiler knows, alias the writer's
// own members when they live in memory, so every Put reloaded them and
// stored its four bytes one by one.
class BitWriter {
 public:
  explicit BitWriter(std::uint8_t* out) : out_(out) {}
  // n <= 32.
  void Put(std::uint32_t bits, int n) {
    buffer_ |= static_cast<std::uint64_t>(bits) << count_;
    count_ += n;
    if (count_ >= 32) {
      std::uint8_t bytes[4];  // little-endian, whatever the host's order
      for (int i = 0; i < 4; ++i) bytes[i] = static_cast<std::uint8_t>(buffer_ >> (8 * i));
      std::memcpy(out_, bytes, 4);
      out_ += 4;
      buffer_ >>= 32;
      count_ -= 32;
    }
  }
  void AlignToByte() {
    while (count_ > 0) {
      *out_++ = static_cast<std::uint8_t>(buffer_);
      buffer_ >>= 8;
      count_ -= 8;
    }
    buffer_ = 0;
    count_ = 0;
  }
  // After AlignToByte only.
  void PutBytes(const std::uint8_t* data, std::size_t n) {
    if (n == 0) return;  // data may be null
    std::memcpy(out_, data, n);
    out_ += n;
  }
  std::uint8_t* position() const { return out_; }

 private:
  std::uint8_t* out_;
  std::uint64_t buffer_ = 0;
  int count_ = 0;
};

// Whether the word has a zero byte: the classic test (any byte order).
inline bool HasZeroByte(std::uint64_t x) {
  return ((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull) != 0;
}

// Whether any of p[0, 8) equals the byte `distance` before it (1: a run).
inline bool RepeatsAnyByteAt(const std::uint8_t* p, std::size_t distance) {
  std::uint64_t here, before;
  std::memcpy(&here, p, 8);
  std::memcpy(&before, p - distance, 8);
  return HasZeroByte(here ^ before);
}

// How many of data[i, end) repeat the bytes `distance` before them
// (i >= distance; the compared ranges may overlap, as in a deflate match;
// distance 1: the run of data[i - 1]). On a little-endian machine byte k of
// a loaded word belongs to data[i + k].
inline std::size_t MatchLength(const std::uint8_t* data, std::size_t i, std::size_t end,
                               std::size_t distance) {
  const std::size_t start = i;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (i + 8 <= end) {
    std::uint64_t here, before;
    std::memcpy(&here, data + i, 8);
    std::memcpy(&before, data + i - distance, 8);
    const std::uint64_t x = here ^ before;
    if (x) return i - start + (static_cast<unsigned>(__builtin_ctzll(x)) >> 3);
    i += 8;
  }
#endif
  while (i < end && data[i] == data[i - distance]) ++i;
  return i - start;
}

// One block's symbols as a code-length sequence (3.2.7): the literal/length
// and distance code lengths, with runs as symbols 16 (repeat the previous
// 3-6 times), 17 (3-10 zeros) and 18 (11-138 zeros).
struct CodeLengthItem {
  std::uint8_t symbol, extra;
};
int EncodeCodeLengths(const std::uint8_t* lengths, int n, CodeLengthItem* items,
                      std::uint32_t* freq) {
  int k = 0;
  for (int i = 0; i < n;) {
    const std::uint8_t v = lengths[i];
    int run = 1;
    while (i + run < n && lengths[i + run] == v) ++run;
    i += run;
    if (v == 0) {
      while (run >= 11) {
        const int r = std::min(run, 138);
        items[k++] = {18, static_cast<std::uint8_t>(r - 11)};
        run -= r;
      }
      if (run >= 3) {
        items[k++] = {17, static_cast<std::uint8_t>(run - 3)};
        run = 0;
      }
    } else {
      items[k++] = {v, 0};
      --run;
      while (run >= 3) {
        const int r = std::min(run, 6);
        items[k++] = {16, static_cast<std::uint8_t>(r - 3)};
        run -= r;
      }
    }
    for (; run > 0; --run) items[k++] = {v, 0};
  }
  for (int j = 0; j < k; ++j) ++freq[items[j].symbol];
  return k;
}

int CodeLengthExtraBits(int symbol) {
  return symbol == 16 ? 2 : symbol == 17 ? 3 : symbol == 18 ? 7 : 0;
}

// Whether bytes[0, n), `literals` of whose tokens are literals, look like
// random bytes: nearly all literals, and about as many distinct values as n
// uniformly random bytes have (256 * (1 - (255/256)^n) expected; a byte
// plane of few values, which a Huffman code shortens, has far fewer).
bool IsNoise(const std::uint8_t* bytes, std::size_t n, std::size_t literals) {
  if (literals < n - n / 16) return false;
  std::uint8_t seen[256] = {};
  for (std::size_t i = 0; i < n; ++i) seen[bytes[i]] = 1;
  int distinct = 0;
  for (std::uint8_t v : seen) distinct += v;
  const double expected = 256.0 * (1.0 - std::pow(255.0 / 256.0, static_cast<double>(n)));
  return distinct >= 0.5 * expected;
}

// Writes data[begin, end) (at most 65,535 bytes) as a stored block.
BitWriter WriteStored(const std::uint8_t* data, std::size_t begin, std::size_t end,
                      bool final_block, BitWriter w) {
  w.Put(final_block ? 1 : 0, 1);
  w.Put(0, 2);  // BTYPE 00
  w.AlignToByte();
  const auto len = static_cast<std::uint32_t>(end - begin);
  w.Put(len, 16);
  w.Put(~len & 0xFFFF, 16);
  w.AlignToByte();
  w.PutBytes(data + begin, end - begin);
  return w;
}

// The entropy of symbols counted `freq` (n of them), in bits: no prefix code
// sends them in fewer.
double EntropyBits(const std::uint32_t* freq, int n) {
  // sum f * log2(total / f) = total * log2(total) - sum f * log2(f), the
  // f * log2(f) of small counts from a table.
  struct FLogF {
    float of[1024];
    FLogF() {
      for (int f = 0; f < 1024; ++f) of[f] = f == 0 ? 0.0f : static_cast<float>(f * std::log2(f));
    }
  };
  static const FLogF kFLogF;
  double total = 0, sum = 0;
  for (int s = 0; s < n; ++s) {
    const std::uint32_t f = freq[s];
    total += f;
    sum += f < 1024 ? kFLogF.of[f] : f * std::log2(static_cast<double>(f));
  }
  return total > 0 ? total * std::log2(total) - sum : 0.0;
}

// Writes data[begin, end) as one block through `w` and returns it: dynamic
// Huffman codes over `tokens` (which encode exactly those bytes), or stored
// when that is not larger (`noise`: not more than 1/32 larger).
//
// Distances are 1 (distance symbol 0) and, with a period, `period`: the
// distance code is two 1-bit codes, symbol 0 ("0") and the period's symbol
// ("1"; symbol 1 when there is no period), which keeps it complete.
BitWriter WriteBlock(const std::uint8_t* data, std::size_t begin, std::size_t end,
                     const std::uint16_t* tokens, std::size_t num_tokens, bool noise,
                     std::size_t period, bool final_block, BitWriter w) {
  std::uint32_t token_freq[kNumLitLen] = {};
  std::uint32_t matches = 0, period_matches = 0;
  for (std::size_t k = 0; k < num_tokens; ++k) {
    const std::uint16_t t = tokens[k];
    if (t < 256) {
      ++token_freq[t];
      continue;
    }
    ++token_freq[257 + kLengthIndex.of[(t & ~kPeriodMatch) - 256]];
    ++matches;
    period_matches += (t & kPeriodMatch) != 0;
  }
  const std::uint64_t stored_bits = 3 + 7 + 32 + 8 * static_cast<std::uint64_t>(end - begin);
  // Noise is stored unless its code saves more than 1/32 of it: a stored
  // block is copied when decoded, several times as fast as a coded one. No
  // code spends fewer bits than the symbols' entropy, so most noise is
  // stored without building one.
  const std::uint64_t noise_margin = noise ? stored_bits / 32 : 0;
  if (noise && stored_bits <= EntropyBits(token_freq, kNumLitLen) + noise_margin) {
    return WriteStored(data, begin, end, final_block, w);
  }
  const int period_symbol = period > 0 ? DistSymbol(period) : 1;
  const int period_extra = period > 0 ? kDistExtra[period_symbol] : 0;
  const int num_dist = period_symbol + 1;
  // Literal/length code.
  std::uint32_t freq[kNumLitLen];
  std::memcpy(freq, token_freq, sizeof(freq));
  freq[kEndOfBlock] = 1;
  HuffmanCode lit;
  lit.Build(freq, kNumLitLen, kMaxLitLenBits);
  const std::uint8_t* lit_len = lit.length;
  const std::uint16_t* lit_code = lit.code;
  int num_lit = kNumLitLen;
  while (num_lit > 257 && lit_len[num_lit - 1] == 0) --num_lit;

  // Code length code over the literal/length then the distance lengths.
  std::uint8_t all_lengths[kNumLitLen + kNumDist];
  std::memcpy(all_lengths, lit_len, static_cast<std::size_t>(num_lit));
  std::fill(all_lengths + num_lit, all_lengths + num_lit + num_dist, std::uint8_t{0});
  all_lengths[num_lit] = 1;
  all_lengths[num_lit + period_symbol] = 1;
  CodeLengthItem items[kNumLitLen + kNumDist];
  std::uint32_t cl_freq[kNumCodeLen] = {};
  const int num_items = EncodeCodeLengths(all_lengths, num_lit + num_dist, items, cl_freq);
  HuffmanCode cl;
  cl.Build(cl_freq, kNumCodeLen, kMaxCodeLenBits);
  const std::uint8_t* cl_len = cl.length;
  const std::uint16_t* cl_code = cl.code;
  int num_cl = kNumCodeLen;
  while (num_cl > 4 && cl_len[kCodeLenOrder[num_cl - 1]] == 0) --num_cl;

  // Exact size of the dynamic block against a stored one (3 header bits, up
  // to 7 bits of padding, LEN and NLEN, the bytes).
  std::uint64_t dynamic_bits = 3 + 5 + 5 + 4 + 3 * static_cast<std::uint64_t>(num_cl);
  for (int s = 0; s < kNumCodeLen; ++s) {
    dynamic_bits += cl_freq[s] * static_cast<std::uint64_t>(cl_len[s] + CodeLengthExtraBits(s));
  }
  for (int s = 0; s < kNumLitLen; ++s) {
    std::uint64_t bits = lit_len[s];
    if (s > kEndOfBlock) bits += kLengthExtra[s - 257];
    dynamic_bits += token_freq[s] * bits;
  }
  // One distance bit per match, and the period's extra bits.
  dynamic_bits +=
      lit_len[kEndOfBlock] + matches + static_cast<std::uint64_t>(period_matches) * period_extra;
  if (stored_bits <= dynamic_bits + noise_margin) {
    return WriteStored(data, begin, end, final_block, w);
  }
  w.Put(final_block ? 1 : 0, 1);
  w.Put(2, 2);  // BTYPE 10: dynamic Huffman codes
  w.Put(static_cast<std::uint32_t>(num_lit - 257), 5);
  w.Put(static_cast<std::uint32_t>(num_dist - 1), 5);
  w.Put(static_cast<std::uint32_t>(num_cl - 4), 4);
  for (int i = 0; i < num_cl; ++i) w.Put(cl_len[kCodeLenOrder[i]], 3);
  for (int i = 0; i < num_items; ++i) {
    const CodeLengthItem& it = items[i];
    w.Put(cl_code[it.symbol], cl_len[it.symbol]);
    if (const int extra = CodeLengthExtraBits(it.symbol)) w.Put(it.extra, extra);
  }
  for (std::size_t k = 0; k < num_tokens; ++k) {
    const std::uint16_t t = tokens[k];
    if (t < 256) {
      w.Put(lit_code[t], lit_len[t]);
      continue;
    }
    const bool at_period = (t & kPeriodMatch) != 0;
    const int length = (t & ~kPeriodMatch) - 256;
    const int index = kLengthIndex.of[length];
    const int symbol = 257 + index;
    w.Put(lit_code[symbol], lit_len[symbol]);
    if (kLengthExtra[index])
      w.Put(static_cast<std::uint32_t>(length - kLengthBase[index]), kLengthExtra[index]);
    if (!at_period) {
      w.Put(0, 1);  // distance symbol 0 (distance 1): code "0"
      continue;
    }
    w.Put(1, 1);  // the period's symbol: code "1"
    if (period_extra) {
      w.Put(static_cast<std::uint32_t>(period - kDistBase[period_symbol]), period_extra);
    }
  }
  w.Put(lit_code[kEndOfBlock], lit_len[kEndOfBlock]);
  return w;
}

}  // namespace

std::size_t RunLengthDeflater::Bound(std::size_t size) {
  // A block per piece at most (Compress): pieces are at least kMinPlaneBytes
  // long but for the last of each plane or block.
  const std::size_t blocks = 2 * (size / kMinPlaneBytes + size / kBlockBytes + 2);
  return 2 + 4 + size + 8 * blocks + 16;  // header, Adler-32, stored-block overheads, slack
}

std::size_t RunLengthDeflater::Tokenize(const std::uint8_t* data, std::size_t begin,
                                        std::size_t end, std::size_t period, std::uint16_t* tokens,
                                        std::size_t* literals) {
  std::size_t n = 0, matches = 0;
  std::size_t i = begin;
  if (i == 0 && i < end) tokens[n++] = data[i++];  // nothing before it to repeat
  while (i < end) {
    const bool has_period = period > 0 && i >= period;
    if (i + 8 <= end && !RepeatsAnyByteAt(data + i, 1) &&
        !(has_period && RepeatsAnyByteAt(data + i, period))) {  // noise: eight literals
      for (int k = 0; k < 8; ++k) tokens[n++] = data[i + k];
      i += 8;
      continue;
    }
    // A run, or the same byte of the same row a period earlier (the same
    // tensor at the previous step) when that matches further.
    const std::size_t run = MatchLength(data, i, end, 1);
    const std::size_t same = has_period ? MatchLength(data, i, end, period) : 0;
    const bool at_period = same > run;
    std::size_t count = at_period ? same : run;
    if (count < kMinMatch) {
      tokens[n++] = data[i++];
      continue;
    }
    i += count;
    for (; count >= kMinMatch; count -= std::min<std::size_t>(count, kMaxMatch)) {
      const auto length = static_cast<int>(std::min<std::size_t>(count, kMaxMatch));
      tokens[n++] = static_cast<std::uint16_t>((256 + length) | (at_period ? kPeriodMatch : 0));
      ++matches;
    }
    for (; count > 0; --count) tokens[n++] = data[i - count];  // 1 or 2 left
  }
  *literals = n - matches;
  return n;
}

std::size_t RunLengthDeflater::Compress(const std::uint8_t* data, std::size_t size,
                                        std::uint8_t* out, std::size_t period,
                                        std::size_t plane_bytes) {
  if (period < 2 || period > kMaxDistance) period = 0;
  if (plane_bytes < kMinPlaneBytes) plane_bytes = 0;
  BitWriter w(out);
  w.Put(0x78, 8);                                   // CMF: deflate, 32 KB window
  w.Put(0x01, 8);                                   // FLG: fastest; 0x7801 is a multiple of 31
  if (tokens_.size() < size) tokens_.resize(size);  // a token per byte at most
  std::uint16_t* tokens = tokens_.data();
  // The input in pieces: planes (and kBlockBytes at most), each tokenized
  // and marked whether it is noise (the low mantissa bytes of
  // floating-point stats).
  pieces_.clear();
  std::size_t num_tokens = 0;
  for (std::size_t at = 0; at < size;) {
    std::size_t end = std::min(size, at + kBlockBytes);
    if (plane_bytes > 0) end = std::min(end, (at / plane_bytes + 1) * plane_bytes);
    std::size_t literals = 0;
    const std::size_t n = Tokenize(data, at, end, period, tokens + num_tokens, &literals);
    pieces_.push_back(Piece{at, end, num_tokens, num_tokens + n,
                            plane_bytes > 0 && IsNoise(data + at, end - at, literals)});
    num_tokens += n;
    at = end;
  }
  if (pieces_.empty()) pieces_.push_back(Piece{0, 0, 0, 0, false});  // one empty final block
  // Noise worth a stored block of its own: a run of it long enough that
  // copying it saves more time when inflating than the coded block it
  // splits off costs (its code tables are built again).
  for (std::size_t i = 0; i < pieces_.size();) {
    std::size_t j = i;
    while (j < pieces_.size() && pieces_[j].noise == pieces_[i].noise) ++j;
    if (pieces_[i].noise && pieces_[j - 1].end - pieces_[i].begin < kMinStoredRun) {
      for (std::size_t k = i; k < j; ++k) pieces_[k].noise = false;
    }
    i = j;
  }
  // Blocks: consecutive pieces of one kind, up to kBlockBytes.
  for (std::size_t i = 0; i < pieces_.size();) {
    std::size_t j = i + 1;
    while (j < pieces_.size() && pieces_[j].noise == pieces_[i].noise &&
           pieces_[j].end - pieces_[i].begin <= kBlockBytes) {
      ++j;
    }
    const Piece& first = pieces_[i];
    const Piece& last = pieces_[j - 1];
    w = WriteBlock(data, first.begin, last.end, tokens + first.token_begin,
                   last.token_end - first.token_begin, first.noise, period, j == pieces_.size(), w);
    i = j;
  }
  w.AlignToByte();
  const std::uint32_t adler = libdeflate_adler32(1, data, size);
  for (int shift = 24; shift >= 0; shift -= 8) w.Put((adler >> shift) & 0xFF, 8);
  w.AlignToByte();
  return static_cast<std::size_t>(w.position() - out);
}

}  // namespace tstat::io
